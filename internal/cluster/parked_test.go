package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/pgstore"
	"github.com/logist/logist/internal/snapshot"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
)

// stoppingJob: the worker writes notes.txt and stops the job for a
// steward before its phase completes (no recovery point holds the file):
// STUCK, or a RETRY whose cost spends the budget (HALTED_COST). Resumed,
// it answers COMPLETED naming notes.txt; the supervisor accepts.
func stoppingJob(id, stop string) []byte {
	first, budget := `{"action": "STUCK", "summary": "Which greeting?", "files": {"notes.txt": "draft"}, "cost_usd": 0.01}`, 100.0
	if stop == "cost" {
		first, budget = `{"action": "RETRY", "summary": "Half done.", "files": {"notes.txt": "draft"}, "cost_usd": 0.10}`, 0.05
	}
	return fmt.Appendf(nil, `{
  "schema_version": 1,
  "job_id": %q,
  "task_description": "Write greet.py.",
  "agents": {
    "worker": {"provider": "script", "script": [
      %s,
      {"action": "COMPLETED", "summary": "Finished from my notes.", "evidence_files": ["notes.txt"], "files": {"greet.py": "hello"}, "cost_usd": 0.01}]},
    "supervisor": {"provider": "script", "script": [
      {"action": "COMPLETED", "summary": "Good.", "evidence_files": ["notes.txt", "greet.py"], "cost_usd": 0.01}]}
  },
  "cost_threshold": %v,
  "metrics": {"cumulative_cost": 0, "cumulative_time_seconds": 0}
}`, id, first, budget)
}

// TestStoppedJobsWorkspaceMovesWithIt: node A runs a job whose worker
// writes notes.txt and stops it for a steward (STUCK, or a budget halt)
// before any recovery point holds the file; A shuts down. A steward
// resumes the job; a node claims it — node B, or A started again on its
// working folder — and the resumed worker goes on from the workspace it
// left, as in file mode: notes.txt is there. A rollback instead returns
// to a recovery point: the parked work is what it discards.
func TestStoppedJobsWorkspaceMovesWithIt(t *testing.T) {
	for _, stop := range []string{"stuck", "cost"} {
		for _, next := range []string{"other", "same"} {
			t.Run(stop+"-"+next, func(t *testing.T) { stoppedJobResumes(t, stop, next) })
		}
	}
	t.Run("stuck-rollback", func(t *testing.T) { stoppedJobResumes(t, "stuck", "rollback") })
}

func stoppedJobResumes(t *testing.T, stop, next string) {
	s, _ := openStore(t)
	ctx := context.Background()
	id := "park-" + stop
	if _, err := Submit(ctx, s, stoppingJob(id, stop)); err != nil {
		t.Fatal(err)
	}
	want := lifecycle.InterventionRequired
	if stop == "cost" {
		want = lifecycle.HaltedCost
	}
	actx, stopA := context.WithCancel(ctx)
	defer stopA()
	a := newNode(t, s, "a", 5*time.Second)
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(actx) })
	waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == want }, 60*time.Second)
	stopA()
	wg.Wait()
	if got := readFile(t, filepath.Join(a.Dir, id, jobstore.WorkspaceDir, "notes.txt")); got != "draft" {
		t.Fatalf("a's notes.txt %q", got)
	}

	o := steward.ResumeOptions{Guidance: "Go on from your notes."}
	if stop == "cost" {
		more := 100.0
		o.CostThreshold = &more
	}
	steerStopped(ctx, t, s, id, next, o)

	n := newNode(t, s, "b", 5*time.Second)
	if next == "same" {
		n = newNode(t, s, "a", 5*time.Second)
		n.Dir = a.Dir
	}
	nctx, stopN := context.WithCancel(ctx)
	defer stopN()
	wg.Go(func() { _ = n.Run(nctx) })
	waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 60*time.Second)
	stopN()
	wg.Wait()

	if next == "rollback" {
		// Back at cp-start: the next node's workspace is the point's,
		// without the parked notes.txt.
		if _, err := os.Stat(filepath.Join(n.Dir, id, jobstore.WorkspaceDir, "notes.txt")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("notes.txt after a rollback to cp-start: %v", err)
		}
		keptDiscarded(t, s, id, "notes.txt", "draft")
		verifyExport(t, s, id)
		return
	}
	// The resumed worker's answer named notes.txt: it was there.
	for _, e := range records(t, s, id) {
		if e.Type == history.TypeResponse && e.Response != nil {
			if w := strings.Join(e.Response.Warnings, " | "); strings.Contains(w, `"notes.txt" does not exist`) {
				t.Errorf("%s's answer on node %s: %s", e.Role, n.ID, w)
			}
		}
	}
	if got := readFile(t, filepath.Join(n.Dir, id, jobstore.WorkspaceDir, "notes.txt")); got != "draft" {
		t.Fatalf("notes.txt on node %s %q, want the worker's draft", n.ID, got)
	}
	verifyExport(t, s, id)
}

// keptDiscarded: the rollback of job id kept the work it discarded, as
// in file mode: its record names file and a snapshot, which the store
// holds as a point of the job (its objects survive a sweep), and which
// the job written in folder form (logist discarded, --into: the
// snapshot's objects too) lists and writes out with file's content want.
func keptDiscarded(t *testing.T, s clusterstore.Store, id, file, want string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.CollectObjects(ctx, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	m := &Mirror{Store: s, Dir: dir, Jobs: []string{id}, Also: func(cp string) bool { return strings.HasPrefix(cp, steward.DiscardedPrefix) }}
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := history.ReadAll(filepath.Join(dir, id))
	if err != nil {
		t.Fatal(err)
	}
	ds := jobview.Discards(recs)
	if len(ds) != 1 || !slices.Contains(ds[0].Files, file) || ds[0].Snapshot == "" || ds[0].NotKept != "" {
		t.Fatalf("discarded work of %s: %+v, want %s kept in a snapshot", id, ds, file)
	}
	ps, err := s.Points(ctx, id)
	if err != nil || !slices.ContainsFunc(ps, func(p clusterstore.RecoveryPoint) bool { return p.ID == ds[0].Snapshot && p.Snapshot != nil }) {
		t.Fatalf("the store's points %+v %v, want %s", ps, err, ds[0].Snapshot)
	}
	into := filepath.Join(t.TempDir(), "into")
	x, err := snapshot.Extract(filepath.Join(dir, id), ds[0].Snapshot, ds[0].Files, into)
	if err != nil || !slices.Contains(x.Written, file) {
		t.Fatalf("extract %s: %+v %v", ds[0].Snapshot, x, err)
	}
	if got := readFile(t, filepath.Join(into, file)); got != want {
		t.Fatalf("discarded %s %q, want %q", file, got, want)
	}
}

// steerStopped steers stopped job id as a steward would: next "rollback"
// rolls it back to cp-start, anything else resumes it with o; the job is
// then PENDING, or the test fails.
func steerStopped(ctx context.Context, t *testing.T, s clusterstore.Store, id, next string, o steward.ResumeOptions) {
	t.Helper()
	steerStoppedBy(ctx, t, s, stewardOf(t, s), "r1", id, next, o)
}

// steerStoppedBy is steerStopped by steward st (stewardOf) with
// idempotency key key.
func steerStoppedBy(ctx context.Context, t *testing.T, s clusterstore.Store, st func(jobsDir string) *steward.Steward, key, id, next string, o steward.ResumeOptions) {
	t.Helper()
	steering := Steering{Job: id, Key: key, Command: "resume " + id, Apply: func(dir string) error {
		_, err := st(dir).Resume(id, o)
		return err
	}}
	if next == "rollback" {
		steering = Steering{Job: id, Key: key, Command: "rollback " + id, Restore: "cp-start", Apply: func(dir string) error {
			_, _, err := st(dir).Rollback(id, "cp-start", steward.RollbackOptions{Reason: "start over"})
			return err
		}}
	}
	out, err := Steer(ctx, s, steering)
	if err != nil || out.Status != lifecycle.Pending {
		t.Fatalf("%s: %+v %v", steering.Command, out, err)
	}
}

// dropNamed deletes from the store, once, the objects a steering names
// (clusterstore.NamedObjects) but does not carry: a sweep that collected
// them between the steering's read of the job and its write.
type dropNamed struct {
	*pgstore.Store
	mu      sync.Mutex
	dropped []string
}

func (d *dropNamed) Steer(ctx context.Context, st clusterstore.Steering) (*clusterstore.Job, error) {
	d.mu.Lock()
	if d.dropped == nil {
		named, err := clusterstore.NamedObjects(st.Point, st.Files)
		if err != nil {
			d.mu.Unlock()
			return nil, err
		}
		for _, sum := range named {
			if st.Objects[sum] != nil {
				continue
			}
			if _, err := d.Pool().Exec(ctx, "DELETE FROM logist_objects WHERE sha256 = $1", sum); err != nil {
				d.mu.Unlock()
				return nil, err
			}
			d.dropped = append(d.dropped, sum)
		}
	}
	d.mu.Unlock()
	return d.Store.Steer(ctx, st)
}

// TestSteeringSendsCollectedObjectsAgain: a rollback of a stopped job
// keeps the work it discards as a snapshot whose objects the steward took
// as stored (the parked workspace's); a sweep collects them before the
// steering commits. The store refuses it (ErrMissingObject) and Steer
// sends it again with every object it names, as a node's unit is sent:
// the rollback succeeds and the discarded work is kept.
func TestSteeringSendsCollectedObjectsAgain(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	const id = "park-sweep"
	if _, err := Submit(ctx, s, stoppingJob(id, "stuck")); err != nil {
		t.Fatal(err)
	}
	runUntil(t, s, newNode(t, s, "a", 5*time.Second), stuck)

	d := &dropNamed{Store: s}
	steerStopped(ctx, t, d, id, "rollback", steward.ResumeOptions{})
	if len(d.dropped) == 0 {
		t.Fatal("the steering named no object it did not carry: the test dropped nothing")
	}
	if _, err := s.Objects(ctx, d.dropped); err != nil {
		t.Fatalf("the collected objects were not sent again: %v", err)
	}
	keptDiscarded(t, s, id, "notes.txt", "draft")
}

// twiceStoppingJob: the worker writes notes.txt and stops the job
// (STUCK); resumed, it rewrites notes.txt, writes big.txt, over the
// job's max_snapshot_bytes, and stops it again; resumed again, it ends.
func twiceStoppingJob(id string) []byte {
	big := strings.Repeat("x", 400)
	return fmt.Appendf(nil, `{
  "schema_version": 1,
  "job_id": %q,
  "task_description": "Write greet.py.",
  "limits": {"max_snapshot_bytes": 200},
  "agents": {
    "worker": {"provider": "script", "script": [
      {"action": "STUCK", "summary": "Which greeting?", "files": {"notes.txt": "draft"}, "cost_usd": 0.01},
      {"action": "STUCK", "summary": "Which size?", "files": {"notes.txt": "second", "big.txt": %q}, "cost_usd": 0.01},
      {"action": "COMPLETED", "summary": "Finished.", "evidence_files": ["greet.py"], "files": {"greet.py": "hello"}, "cost_usd": 0.01}]},
    "supervisor": {"provider": "script", "script": [
      {"action": "COMPLETED", "summary": "Good.", "evidence_files": ["greet.py"], "cost_usd": 0.01}]}
  },
  "cost_threshold": 100,
  "metrics": {"cumulative_cost": 0, "cumulative_time_seconds": 0}
}`, id, big)
}

// TestFailedStopSupersedesParked: a job stops for a steward (its
// workspace parked), is resumed, and stops again with a workspace over
// its max_snapshot_bytes: that stop's snapshot fails. The earlier stop's
// parked workspace is older than the work the failed stop lost, and no
// longer where the job goes on: the job written from the store (as a
// claim writes it) restores its current checkpoint, and the node logs
// why (SNAPSHOT_FAILED).
func TestFailedStopSupersedesParked(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	const id = "park-twice"
	if _, err := Submit(ctx, s, twiceStoppingJob(id)); err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	run := func(node string, until func(*clusterstore.Job) bool) {
		t.Helper()
		nctx, stop := context.WithCancel(ctx)
		defer stop()
		n := newNode(t, s, node, 5*time.Second)
		n.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		var wg sync.WaitGroup
		wg.Go(func() { _ = n.Run(nctx) })
		waitAll(t, s, 1, until, 60*time.Second)
		stop()
		wg.Wait()
	}
	stuck := func(j *clusterstore.Job) bool { return j.Status == lifecycle.InterventionRequired }
	st := stewardOf(t, s)
	resume := func(key string) {
		t.Helper()
		out, err := Steer(ctx, s, Steering{Job: id, Key: key, Command: "resume " + id + " " + key, Apply: func(dir string) error {
			_, err := st(dir).Resume(id, steward.ResumeOptions{Guidance: "Go on."})
			return err
		}})
		if err != nil || out.Status != lifecycle.Pending {
			t.Fatalf("resume: %+v %v", out, err)
		}
	}
	run("a", stuck)
	resume("r1")
	run("b", func(j *clusterstore.Job) bool { return stuck(j) && len(stops(t, s, id)) == 2 })
	second := stops(t, s, id)[1]
	ps, err := s.Points(ctx, id)
	if err != nil || !slices.ContainsFunc(ps, func(p clusterstore.RecoveryPoint) bool {
		return p.ID == unparkedPoint && p.Seq == second && p.Snapshot == nil
	}) {
		t.Fatalf("the store's points %+v %v, want %s at the failed stop's record %d", ps, err, unparkedPoint, second)
	}
	if l := logs.String(); !strings.Contains(l, `"error_code":"SNAPSHOT_FAILED"`) || !strings.Contains(l, "starts from its current checkpoint") || !strings.Contains(l, "max_snapshot_bytes") {
		t.Fatalf("the node did not log why the stop parked nothing:\n%s", l)
	}
	// As a claim writes the job: its current checkpoint's workspace
	// (cp-start: empty), not the first stop's notes.txt.
	jobs := t.TempDir()
	_, w, err := writeFolder(ctx, s, jobs, id, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"notes.txt", "big.txt"} {
		if b, err := os.ReadFile(filepath.Join(jobs, id, jobstore.WorkspaceDir, f)); err == nil || w.parked {
			t.Errorf("%s %q (parked %v): an earlier stop's parked workspace, after a stop that parked nothing", f, b, w.parked)
		}
	}
	// The job goes on from there and ends.
	resume("r2")
	run("c", func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success })
	verifyExport(t, s, id)
}

// stops are the sequences of job id's records that stopped it for a
// steward (INTERVENTION_REQUIRED).
func stops(t *testing.T, s clusterstore.Store, id string) []int64 {
	var out []int64
	for _, e := range records(t, s, id) {
		if e.Type == history.TypeTransition && e.Transition != nil && e.Transition.To == string(lifecycle.InterventionRequired) {
			out = append(out, e.Seq)
		}
	}
	return out
}
