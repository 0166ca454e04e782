package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/cluster"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/pgstore"
)

// Cluster mode: with --database-url (or LOGISTD_DATABASE_URL, or the
// config file's database_url) the commands read and write the cluster's
// database instead of a jobs folder, each through its cluster form; a
// command without one would refuse rather than act on a folder the
// cluster does not use (TestEveryCommandHasAClusterForm).

// errNoClusterForm is a command cluster mode does not offer yet.
type errNoClusterForm struct{ name string }

func (e *errNoClusterForm) Error() string {
	return fmt.Sprintf("logist %s does not work in cluster mode yet (a database URL is set: --database-url, LOGISTD_DATABASE_URL or the config file); see docs/cluster.md", e.name)
}

// runCluster runs c's cluster form against the database at url.
func runCluster(e *env, c *command, url string, args []string) (*Result, error) {
	if c.cluster == nil {
		return nil, usagef("%s", (&errNoClusterForm{c.name}).Error())
	}
	s, err := pgstore.Open(e.ctx, url)
	if err != nil {
		return nil, fmt.Errorf("cluster database: %w", err)
	}
	defer s.Close()
	return c.cluster(e, s, args)
}

// clusterExit maps the cluster store's errors to exit codes (ExitCode).
func clusterExit(err error) (int, bool) {
	switch {
	case errors.Is(err, clusterstore.ErrNotFound):
		return ExitNotFound, true
	case errors.Is(err, clusterstore.ErrExists), errors.Is(err, clusterstore.ErrConflict),
		errors.Is(err, clusterstore.ErrIdempotency), errors.Is(err, clusterstore.ErrFenced):
		return ExitOutOfOrder, true
	}
	return 0, false
}

func clusterSubmit(e *env, s clusterstore.Store, args []string) (*Result, error) {
	if len(args) != 1 {
		return nil, usagef("expected one FILE argument")
	}
	jf, err := cluster.ReadJobFolder(args[0])
	if err != nil {
		return nil, err
	}
	key, _ := e.fs.GetString(idempotencyFlag)
	id, repeat, err := cluster.SubmitKeyed(e.ctx, s, key, jf)
	if err != nil {
		return nil, err
	}
	r := &Result{Message: fmt.Sprintf("Job %s submitted to the cluster", id), Fields: []Field{{"job_id", "Job", id}}, Data: map[string]any{}}
	if repeat {
		r.Message = fmt.Sprintf("Job %s already submitted with idempotency key %s; nothing changed", id, key)
		r.Data["repeat"] = true
	}
	if key != "" {
		r.Fields = append(r.Fields, Field{"idempotency_key", "Idempotency key", key})
		r.Data["idempotency_key"] = key
	}
	if e.format == "text" {
		r.Text = id + "\n" // what scripts read, a repeat's too
		if repeat {
			fmt.Fprintf(e.stderr, "logist: %s\n", r.Message)
		}
	}
	return r, nil
}

func micros(m int64) string { return fmt.Sprintf("$%.4f", float64(m)/1e6) }

func clusterList(e *env, s clusterstore.Store, args []string) (*Result, error) {
	if len(args) != 0 {
		return nil, usagef("list takes no arguments")
	}
	js, err := s.Jobs(e.ctx)
	if err != nil {
		return nil, err
	}
	r := &Result{Columns: []string{"JOB", "STATUS", "EPOCH", "NODE", "RECORDS", "SPENT", "NOTE"}}
	var items []map[string]any
	for _, j := range js {
		note := ""
		if clusterManifest(&j).Run.Sandbox == agent.LayerNone {
			note = uncontainedNote // an opt-out shows where the job is listed
		}
		r.Rows = append(r.Rows, []string{j.ID, string(j.Status), fmt.Sprint(j.Epoch), j.Owner, fmt.Sprint(j.NextSeq), micros(j.SpentMicros), note})
		items = append(items, clusterItem(&j))
	}
	r.Items = items
	return r, nil
}

// clusterManifest is the manifest the job's row holds (the one last
// committed); what it cannot decode reads as an empty one.
func clusterManifest(j *clusterstore.Job) *manifest.Manifest {
	var m manifest.Manifest
	_ = json.Unmarshal(j.Manifest, &m)
	return &m
}

func clusterItem(j *clusterstore.Job) map[string]any {
	it := map[string]any{"job_id": j.ID, "status": j.Status, "epoch": j.Epoch, "node": j.Owner, "records": j.NextSeq,
		"spent_usd": float64(j.SpentMicros) / 1e6, "rescues": j.Rescues, "sandbox": clusterManifest(j).Run.Sandbox}
	if j.Owner != "" {
		it["lease_until"] = j.LeaseUntil.UTC().Format(time.RFC3339Nano)
	}
	return it
}

func clusterStatus(e *env, s clusterstore.Store, args []string) (*Result, error) {
	id, err := oneJob(args)
	if err != nil {
		return nil, err
	}
	j, err := s.Job(e.ctx, id)
	if err != nil {
		return nil, err
	}
	node := j.Owner
	if node == "" {
		node = "none (no lease)"
	} else {
		node += " (lease until " + j.LeaseUntil.UTC().Format(time.RFC3339) + ")"
	}
	return &Result{Fields: []Field{
		{"job_id", "Job", j.ID}, {"status", "Status", string(j.Status)},
		{"epoch", "Epoch", fmt.Sprint(j.Epoch)}, {"node", "Node", node},
		{"records", "Records", fmt.Sprint(j.NextSeq)}, {"spent", "Spent", micros(j.SpentMicros)},
		{"rescues", "Rescues", fmt.Sprint(j.Rescues)}, {"sandbox", "Sandbox", sandboxText(clusterManifest(j))},
	}, Data: map[string]any{"job": clusterItem(j)}}, nil
}

var cmdExport = &command{
	name: "export", args: "JOB DIR", summary: "cluster mode: write a job in folder form (its manifest, signed history and seed view) and the nodes' keys into DIR, for offline verify",
	example: "  logist export fix-login /tmp/out && logist --jobs-dir /tmp/out verify fix-login\n",
	run: func(*env, []string) (*Result, error) {
		return nil, usagef("export reads a cluster's database: set --database-url or LOGISTD_DATABASE_URL")
	},
	cluster: func(e *env, s clusterstore.Store, args []string) (*Result, error) {
		if len(args) != 2 {
			return nil, usagef("expected JOB and DIR")
		}
		if _, err := oneJob(args[:1]); err != nil {
			return nil, err
		}
		if err := cluster.Export(e.ctx, s, args[0], args[1]); err != nil {
			return nil, err
		}
		return &Result{Message: fmt.Sprintf("Job %s exported to %s", args[0], filepath.Join(args[1], args[0])),
			Fields: []Field{{"job_id", "Job", args[0]}, {"path", "Folder", filepath.Join(args[1], args[0])}}}, nil
	},
}

// clusterVerify exports each job into a temporary jobs folder and verifies
// it there, with the nodes' keys from the database (or --key).
func clusterVerify(e *env, s clusterstore.Store, args []string) (*Result, error) {
	if all, _ := e.fs.GetBool("all"); all {
		return nil, usagef("--all walks a jobs folder: in cluster mode name the jobs (logist list shows them), or verify the folder logist export writes")
	}
	if len(args) == 0 {
		return nil, usagef("expected at least one JOB")
	}
	tmp, err := os.MkdirTemp("", "logist-verify-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	for _, id := range args {
		if _, err := oneJob([]string{id}); err != nil {
			return nil, err
		}
		if err := cluster.Export(e.ctx, s, id, tmp); err != nil {
			return nil, err
		}
	}
	e.store = jobstore.New(tmp)
	return cmdVerify.run(e, args)
}

func init() {
	cmdSubmit.cluster = clusterSubmit
	cmdList.cluster = clusterList
	cmdStatus.cluster = clusterStatus
	cmdVerify.cluster = clusterVerify
}

// databaseURLFlag adds the global --database-url flag.
func databaseURLFlag(fs *pflag.FlagSet, def string) *string {
	return fs.String("database-url", def, "cluster mode: the PostgreSQL database of a logistd cluster (env LOGISTD_DATABASE_URL, else the config file's database_url); empty: the jobs folder")
}
