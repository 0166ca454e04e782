package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/pgstore"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/steward"
)

// movingJob: the worker writes greet.py (v1); the supervisor, slowly,
// sends it back naming greet.py as evidence; the worker rewrites it (v2);
// the supervisor accepts.
const movingJob = `{
  "schema_version": 1,
  "job_id": "moving",
  "task_description": "Write greet.py.",
  "agents": {
    "worker": {"provider": "script", "script": [
      {"action": "COMPLETED", "summary": "Wrote v1.", "evidence_files": ["greet.py"], "files": {"greet.py": "v1"}, "cost_usd": 0.01},
      {"action": "COMPLETED", "summary": "Wrote v2.", "evidence_files": ["greet.py"], "files": {"greet.py": "v2"}, "cost_usd": 0.01}]},
    "supervisor": {"provider": "script", "script": [
      {"action": "RETRY", "summary": "Say hello louder.", "evidence_files": ["greet.py"], "cost_usd": 0.01, "delay_ms": 4000},
      {"action": "COMPLETED", "summary": "Good.", "evidence_files": ["greet.py"], "cost_usd": 0.01}]}
  },
  "cost_threshold": 100,
  "metrics": {"cumulative_cost": 0, "cumulative_time_seconds": 0}
}`

func records(t *testing.T, s clusterstore.Store, id string) []history.Entry {
	t.Helper()
	lines, err := s.History(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []history.Entry
	for _, l := range lines {
		e, err := history.ParseLine(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWorkspaceMovesWithJob: node A runs the worker's phase, which writes
// greet.py, and dies during the supervisor's call. Node B rescues the job:
// its workspace is restored from the recovery point A stored, so the
// supervisor's call asked again sees greet.py; B finishes the job. Then a
// rollback on B's side returns the workspace to A's version from the
// store's snapshots, and the next claim of the job restores what the
// rollback chose.
func TestWorkspaceMovesWithJob(t *testing.T) {
	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Submit(ctx, s, []byte(movingJob)); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	ga := &gate{Store: s}
	a := newNode(t, ga, "a", ttl)
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(ctx) })
	// A has stored the worker's recovery point and started the
	// supervisor's call.
	waitAll(t, s, 1, func(j *clusterstore.Job) bool {
		ps, err := s.Points(ctx, j.ID)
		if err != nil || len(ps) < 2 {
			return false
		}
		recs := records(t, s, j.ID)
		return recs[len(recs)-1].Type == history.TypeIntent && recs[len(recs)-1].Role == "supervisor"
	}, 30*time.Second)
	ga.freeze() // A dies (its packets held: the zombie case on top)
	b := newNode(t, s, "b", ttl)
	wg.Go(func() { _ = b.Run(ctx) })
	waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 60*time.Second)
	ga.thaw()
	cancel()
	wg.Wait()
	ctx = context.Background()

	// The supervisor's call as B asked it saw A's greet.py.
	var answers []string
	for _, e := range records(t, s, "moving") {
		if e.Type == history.TypeResponse && e.Role == "supervisor" && e.Response != nil {
			answers = append(answers, strings.Join(e.Response.Warnings, " | "))
		}
	}
	if len(answers) != 2 {
		t.Fatalf("supervisor answers %q, want 2", answers)
	}
	for _, w := range answers {
		if strings.Contains(w, "greet.py") {
			t.Fatalf("the supervisor on node b did not see greet.py: %s", w)
		}
	}
	if got := readFile(t, filepath.Join(b.Dir, "moving", jobstore.WorkspaceDir, "greet.py")); got != "v2" {
		t.Fatalf("b's greet.py %q, want v2", got)
	}
	ps, err := s.Points(ctx, "moving")
	if err != nil {
		t.Fatal(err)
	}
	var first string // the worker's first point: greet.py v1
	for _, p := range ps {
		if p.ID != "cp-start" && first == "" {
			first = p.ID
		}
	}
	if first == "" || len(ps) < 3 {
		t.Fatalf("points %v", ps)
	}

	// A claim reads the objects of the current checkpoint only, not
	// every point's.
	cs := &countingStore{Store: s}
	if _, _, err := writeFolder(ctx, cs, filepath.Join(t.TempDir(), "c"), "moving", nil, true); err != nil {
		t.Fatal(err)
	}
	v1, v2 := sumOf("v1"), sumOf("v2")
	if !slices.Contains(cs.asked, v2) || slices.Contains(cs.asked, v1) {
		t.Fatalf("a claim read objects %v; want v2's (%s) only, not v1's (%s) of an older point", cs.asked, v2[:8], v1[:8])
	}

	// Rollback on B's side: the job's folder as B writes it for the
	// rollback holds the snapshot of the point it returns to; the
	// steward's rollback restores it.
	dir := filepath.Join(t.TempDir(), "b")
	if _, _, err := writeFolder(ctx, s, dir, "moving", func(cp string) bool { return cp == first }, true); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "moving", jobstore.WorkspaceDir, "greet.py")); got != "v2" {
		t.Fatalf("restored greet.py %q, want v2 (the newest point)", got)
	}
	key, err := signing.LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	env := &jobtx.Env{Store: jobstore.New(dir), Logger: slog.New(slog.DiscardHandler), History: history.Options{Signer: key, MaxBytes: -1}}
	if _, _, err := steward.New(env, builtins.Effects()).Rollback("moving", first, steward.RollbackOptions{Reason: "v1 was better"}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "moving", jobstore.WorkspaceDir, "greet.py")); got != "v1" {
		t.Fatalf("greet.py after the rollback %q, want v1", got)
	}
	// A claim after the rollback restores the checkpoint it chose.
	hist, err := os.ReadFile(history.Path(filepath.Join(dir, "moving")))
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for _, l := range bytes.SplitAfter(hist, []byte("\n")) {
		if len(l) > 0 {
			lines = append(lines, l)
		}
	}
	next := filepath.Join(t.TempDir(), "moving")
	if _, err := restoreWorkspace(ctx, s, next, "moving", lines, nil, true); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(next, jobstore.WorkspaceDir, "greet.py")); got != "v1" {
		t.Fatalf("greet.py at the claim after the rollback %q, want v1", got)
	}
}

// countingStore records the objects read from its store.
type countingStore struct {
	clusterstore.Store
	asked []string
}

func (c *countingStore) Objects(ctx context.Context, sums []string) (map[string][]byte, error) {
	c.asked = append(c.asked, sums...)
	return c.Store.Objects(ctx, sums)
}

func sumOf(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// dropOnce deletes, once, the stored objects a point names but its unit
// does not send (the node took them as held): what a sweep after a point
// was replaced may do to a node's knowledge.
type dropOnce struct {
	*pgstore.Store
	once    sync.Once
	dropped []string
}

func (d *dropOnce) Commit(ctx context.Context, l *clusterstore.Lease, u clusterstore.Unit) error {
	if u.Point != nil {
		sums, _ := clusterstore.ListingSums(u.Point.Snapshot)
		var unsent []string
		for _, sum := range sums {
			if u.Objects[sum] == nil {
				unsent = append(unsent, sum)
			}
		}
		if len(unsent) > 0 {
			d.once.Do(func() {
				if _, err := d.Pool().Exec(ctx, "DELETE FROM logist_objects WHERE sha256 = ANY($1)", unsent); err == nil {
					d.dropped = unsent
				}
			})
		}
	}
	return d.Store.Commit(ctx, l, u)
}

// TestCollectedObjectSentAgain: a unit whose point names an object the
// node took as held, collected meanwhile, is refused (ErrMissingObject)
// and sent again with the point's objects: the job goes on as if nothing
// happened, and every point's objects are in the store.
func TestCollectedObjectSentAgain(t *testing.T) {
	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Submit(ctx, s, scripted("again", 10)); err != nil {
		t.Fatal(err)
	}
	d := &dropOnce{Store: s}
	n := newNode(t, d, "n1", 5*time.Second)
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.Run(ctx) })
	js := waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 60*time.Second)
	cancel()
	wg.Wait()
	if len(d.dropped) == 0 {
		t.Fatal("no unit named an object it did not send: the test dropped nothing")
	}
	if js[0].SpentMicros != 60_000 {
		t.Errorf("spent %d µ$, want 60000 (no call asked again)", js[0].SpentMicros)
	}
	if _, err := s.Objects(context.Background(), d.dropped); err != nil {
		t.Fatalf("the dropped objects were not sent again: %v", err)
	}
	if rep := verifyExport(t, s, "again"); rep.Responses != 4 {
		t.Errorf("%d responses, want 4", rep.Responses)
	}
}

// TestMissingObjectBacksOff: a job whose current recovery point names an
// object the store no longer holds cannot be started (its workspace
// cannot be restored). The node gives it back with a backoff of a lease's
// time, in the store (clusterstore.Unit.Backoff), instead of claiming it
// again at once in a loop.
func TestMissingObjectBacksOff(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	if _, err := Submit(ctx, s, []byte(movingJob)); err != nil {
		t.Fatal(err)
	}
	actx, stopA := context.WithCancel(ctx)
	defer stopA()
	a := newNode(t, s, "a", 5*time.Second)
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(actx) })
	// A has stored the worker's point (greet.py) and started the
	// supervisor's call; it shuts down, giving the job back.
	waitAll(t, s, 1, func(j *clusterstore.Job) bool {
		ps, err := s.Points(ctx, j.ID)
		if err != nil || len(ps) < 2 {
			return false
		}
		recs := records(t, s, j.ID)
		return recs[len(recs)-1].Type == history.TypeIntent && recs[len(recs)-1].Role == "supervisor"
	}, 30*time.Second)
	stopA()
	wg.Wait()
	if _, err := s.Pool().Exec(ctx, "DELETE FROM logist_objects"); err != nil {
		t.Fatal(err)
	}
	// A lease long enough that a loaded machine's failed start still
	// gives the job back before it runs out (a lease that expired while
	// b held it would be a rescue, which this test says never happens).
	const ttl = 4 * time.Second
	bctx, stopB := context.WithCancel(ctx)
	defer stopB()
	b := newNode(t, s, "b", ttl)
	wg.Go(func() { _ = b.Run(bctx) })
	claims := func() int64 { c, _, _, _, _ := b.Stats.Snapshot(); return c }
	var first time.Time
	deadline := time.Now().Add(3 * time.Minute)
	for claims() < 3 {
		if first.IsZero() && claims() >= 1 {
			first = time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("node b claimed the job %d times in 3 minutes; want it again after each backoff", claims())
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(first)
	stopB()
	wg.Wait()
	// Two backoffs of a lease's time lie between the first and the third
	// claim (the store's clock; a margin for this loop's own delays).
	if took < 3*ttl/2 {
		t.Fatalf("3 claims of the job in %s: it is claimed again without a backoff", took)
	}
	j, err := s.Job(ctx, "moving")
	if err != nil {
		t.Fatal(err)
	}
	if !j.Status.Active() || j.Rescues != 0 {
		t.Fatalf("job %s, %d rescues: want it runnable, given back each time, never rescued", j.Status, j.Rescues)
	}
}
