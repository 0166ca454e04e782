package console

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/logist/logist/internal/cluster"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/effect"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/steward"
)

// The console of a cluster (cluster mode): the pages and the API read the
// jobs, as the CLI's reading commands do, from a folder that follows the
// cluster's store (cluster.Mirror, notified of each change), and a
// steward's action runs, as the CLI's steering commands do, through
// cluster.Steer: the same steward code on the job in folder form, its
// records stored in one fenced transaction under an idempotency key
// (bumping the job's epoch, so a node running a halted job is fenced).

// Cluster is what a console of a cluster needs.
type Cluster struct {
	Store clusterstore.Store
	// Key signs the console's steward records (a key the store knows:
	// the serving node's).
	Key     *signing.Key
	Effects effect.Registry
}

// clusterSide is a cluster console's state.
type clusterSide struct {
	Cluster
	mirror *cluster.Mirror
}

// NewCluster makes the console of a cluster, reading from a folder that
// follows cl.Store until ctx ends (then the folder is removed). o.Store
// and o.Steward are set by it.
func NewCluster(ctx context.Context, o Options, cl Cluster) (*Console, error) {
	dir, err := os.MkdirTemp("", "logist-console-")
	if err != nil {
		return nil, err
	}
	side := &clusterSide{Cluster: cl, mirror: &cluster.Mirror{Store: cl.Store, Dir: dir}}
	if err := side.sync(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("console: read the cluster: %w", err)
	}
	go func() {
		defer func() { _ = os.RemoveAll(dir) }()
		_ = side.mirror.Follow(ctx, cluster.FollowEvery(cl.Store))
	}()
	o.Store, o.Steward = jobstore.New(dir), nil
	c := New(o)
	c.cl = side
	return c, nil
}

func (s *clusterSide) sync(ctx context.Context) error { return s.mirror.Sync(ctx) }

// steer applies do, a steward's command on job id, through the cluster's
// fenced steering path, then brings the console's folder up to it.
// restore is the checkpoint a rollback returns to ("": none), whose
// snapshot (and a git job's repository) the command needs.
func (s *clusterSide) steer(ctx context.Context, id, command, restore string, do func(*steward.Steward) error) error {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	_, err := cluster.Steer(ctx, s.Store, cluster.Steering{Job: id, Key: "console-" + hex.EncodeToString(b), Command: command, Restore: restore,
		Apply: func(jobsDir string) error {
			env := &jobtx.Env{Store: jobstore.New(jobsDir), Logger: slog.New(slog.DiscardHandler),
				History: history.Options{Signer: s.Key, MaxBytes: -1}}
			return do(&steward.Steward{Env: env, User: "console", Effects: s.Effects})
		}})
	if err != nil {
		return err
	}
	return s.sync(ctx)
}

// commandWords is what a console command is bound to: the action, the
// job and the request's body.
func commandWords(action, id string, b any) string {
	j, _ := json.Marshal(b)
	return fmt.Sprintf("console %s %q %s", action, id, j)
}
