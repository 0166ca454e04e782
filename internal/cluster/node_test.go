package cluster

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/pgstore"
	"github.com/logist/logist/internal/pgtest"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/verify"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func scripted(id string, delayMS int) []byte {
	return fmt.Appendf(nil, `{
  "schema_version": 1,
  "job_id": %q,
  "task_description": "Write greet.py with tests.",
  "agents": {
    "worker": {"provider": "script", "script": [
      {"action": "COMPLETED", "summary": "Wrote greet.py.", "evidence_files": ["greet.py"], "files": {"greet.py": "x"}, "cost_usd": 0.02, "delay_ms": %d},
      {"action": "COMPLETED", "summary": "Added tests.", "evidence_files": ["greet.py"], "cost_usd": 0.02, "delay_ms": %d}]},
    "supervisor": {"provider": "script", "script": [
      {"action": "RETRY", "summary": "Add tests.", "evidence_files": ["greet.py"], "cost_usd": 0.01},
      {"action": "COMPLETED", "summary": "Good.", "evidence_files": ["greet.py"], "cost_usd": 0.01}]}
  },
  "cost_threshold": 100,
  "metrics": {"cumulative_cost": 0, "cumulative_time_seconds": 0}
}`, id, delayMS, delayMS)
}

func openStore(t *testing.T) (*pgstore.Store, string) {
	t.Helper()
	url := pgtest.DB(t)
	s, err := pgstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, url
}

func newNode(t *testing.T, s clusterstore.Store, id string, ttl time.Duration) *Node {
	return &Node{ID: id, Store: s, Dir: filepath.Join(t.TempDir(), id), TTL: ttl, Poll: 50 * time.Millisecond,
		MaxParallel: 4, Effects: builtins.Effects(), Logger: slog.New(slog.DiscardHandler)}
}

// runUntil runs node n (newNode's) until the store's one job is done, then
// stops it and waits for its end: a node that ran a job to a stop.
func runUntil(t *testing.T, s clusterstore.Store, n *Node, done func(*clusterstore.Job) bool) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.Run(ctx) })
	defer wg.Wait()
	defer stop()
	waitAll(t, s, 1, done, 60*time.Second)
}

// stuck says a job waits for a steward.
func stuck(j *clusterstore.Job) bool { return j.Status == lifecycle.InterventionRequired }

func waitAll(t *testing.T, s clusterstore.Store, n int, done func(*clusterstore.Job) bool, within time.Duration) []clusterstore.Job {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		js, err := s.Jobs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ok := len(js) == n
		for i := range js {
			ok = ok && done(&js[i])
		}
		if ok {
			return js
		}
		if time.Now().After(deadline) {
			for _, j := range js {
				t.Logf("job %s: %s epoch %d owner %q records %d", j.ID, j.Status, j.Epoch, j.Owner, j.NextSeq)
			}
			t.Fatalf("jobs not done within %s", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// verifyExport exports a job and verifies it offline with the nodes'
// keys, as `logist verify` does.
func verifyExport(t *testing.T, s clusterstore.Store, id string) *verify.Report {
	t.Helper()
	dir := t.TempDir()
	if err := Export(context.Background(), s, id, dir); err != nil {
		t.Fatal(err)
	}
	keys, err := signing.LoadKeyring(filepath.Join(dir, signing.Dir, signing.PublicFile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.ReadFile(filepath.Join(dir, id, "job.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := verify.Job(id, filepath.Join(dir, id), verify.Options{Public: keys[0], Keyring: keys[1:], Manifest: m})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("job %s does not verify: %v", id, rep.Problems)
	}
	return rep
}

// TestTwoNodesRunJobs: two nodes share one database and run every job to
// its end once; each history verifies offline from its export.
func TestTwoNodesRunJobs(t *testing.T) {
	s, _ := openStore(t)
	twoNodesRunJobs(t, s, 5*time.Second)
}

// TestTwoNodesRunJobsOnAFolder: the same on the seam's file
// implementation, a jobs folder in file mode's format: the engine's units
// go into its job folders, which file mode's verify reads as they are.
func TestTwoNodesRunJobsOnAFolder(t *testing.T) {
	dir := t.TempDir()
	s, err := clusterstore.OpenFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A lease no pause of a loaded machine outlasts: no job is rescued,
	// so none asks a call again (its cost is checked).
	nodes := twoNodesRunJobs(t, s, 30*time.Second)
	keys := []ed25519.PublicKey{nodes[0].key.Public(), nodes[1].key.Public()}
	js, err := s.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		m, err := manifest.ReadFile(filepath.Join(dir, j.ID, "job.json"))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := verify.Job(j.ID, filepath.Join(dir, j.ID), verify.Options{Public: keys[0], Keyring: keys[1:], Manifest: m})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() || rep.Responses != 4 || m.Status != lifecycle.Success {
			t.Fatalf("job %s in the store's folder: %s, %d responses, %v", j.ID, m.Status, rep.Responses, rep.Problems)
		}
	}
}

// twoNodesRunJobs runs eight scripted jobs on two nodes with leases of
// ttl, and checks that each ends once, spending what its script costs.
func twoNodesRunJobs(t *testing.T, s clusterstore.Store, ttl time.Duration) []*Node {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const jobs = 8
	for i := range jobs {
		if _, err := Submit(ctx, s, scripted(fmt.Sprintf("job-%d", i), 10)); err != nil {
			t.Fatal(err)
		}
	}
	nodes := []*Node{newNode(t, s, "n1", ttl), newNode(t, s, "n2", ttl)}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			if err := n.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	js := waitAll(t, s, jobs, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 60*time.Second)
	cancel()
	wg.Wait()
	for _, j := range js {
		if j.Owner != "" {
			t.Errorf("finished job %s holds a lease of %s", j.ID, j.Owner)
		}
		if j.SpentMicros != 60_000 {
			t.Errorf("job %s spent %d µ$, want 60000", j.ID, j.SpentMicros)
		}
		rep := verifyExport(t, s, j.ID)
		if rep.Responses != 4 {
			t.Errorf("job %s: %d responses, want 4", j.ID, rep.Responses)
		}
	}
	c1, _, _, _, _ := nodes[0].Stats.Snapshot()
	c2, _, _, _, _ := nodes[1].Stats.Snapshot()
	if c1+c2 < jobs {
		t.Fatalf("claims %d+%d < %d jobs", c1, c2, jobs)
	}
	return nodes
}
