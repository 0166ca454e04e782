package runner

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/sandbox"
	"github.com/logist/logist/internal/testkit"
)

// fsyncBudget is what a two-call job (a command worker, then a command
// supervisor, both answering COMPLETED at once) may cost in fsyncs, as
// measured: history appends (one per call's unit — the first with the
// job's start, the second with the first call's outcome, the third with
// the last call's outcome and the job's end), files written through
// atomicfile (none: jobHistory.json, written when the job stops, is a view
// rebuilt from the history when a crash lost it), and folders (the job's
// folder and its parent, once each, started before the first append, which
// waits for them). Issue 21 asks for at most one fsync per call on the
// critical path (a response and the next call's intent as one durable
// unit, reached) and at most 4 per two-call job (not reached for a lone
// job: the two folders; docs/performance.md): whoever cuts one lowers its
// figure here, so that it cannot come back unnoticed. The daemon's own
// count, placement included, is TestTwoCallJobFsyncsThroughTheDaemon's.
var fsyncBudget = struct{ history, file, folder, total int64 }{history: 3, file: 0, folder: 2, total: 5}

// TestTwoCallJobFsyncs counts the fsyncs of a whole two-call job, run
// uncontained and in the host's sandbox (where each call's launcher leaves
// its result to the daemon that waits for it: the launcher's own fsyncs,
// in another process, are counted through Result.Synced). It does not run
// in parallel: the file and folder counters are the process's.
func TestTwoCallJobFsyncs(t *testing.T) {
	for _, contained := range []bool{false, true} {
		name := map[bool]string{false: "uncontained", true: "contained"}[contained]
		t.Run(name, func(t *testing.T) { twoCallJobFsyncs(t, contained) })
	}
}

func twoCallJobFsyncs(t *testing.T, contained bool) {
	f := newFixture(t)
	var appends atomic.Int64
	f.Env.History.Observe = func(int, time.Duration) { appends.Add(1) }
	answer := `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}`
	agentCmd := command(0, "sh", "-c", `echo "$1"`, "agent", answer)
	j := job(agentCmd, agentCmd)
	ex := &syncCounter{Executor: &sandbox.Local{}}
	if contained {
		st := sandbox.Probe()
		if _, err := st.Resolve(sandbox.LayerAuto); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("no sandbox layer under CI=true: %v", err)
			}
			t.Skipf("SKIP (loud): no sandbox layer on this host: %v", err)
		}
		f.Engine.Contain = &agent.Containment{Exec: ex, Status: st}
	} else {
		j["sandbox"] = "none"
	}
	f.WriteJob("j", j)
	files, folders := atomicfile.FileSyncs.Load(), atomicfile.DirSyncs.Load()
	f.Run("j")
	calls := len(testkit.OfType(f.Records("j"), history.TypeIntent))
	if m := f.Load("j"); m.Status != lifecycle.Success || calls != 2 {
		t.Fatalf("status %s after %d calls (%s): want SUCCESS after 2", m.Status, calls, m.Run.Reason)
	}
	if contained && ex.results.Load() != 2 {
		t.Fatalf("%d contained results, want 2", ex.results.Load())
	}
	got := struct{ history, file, folder, total int64 }{history: appends.Load(),
		file: atomicfile.FileSyncs.Load() - files, folder: atomicfile.DirSyncs.Load() - folders}
	got.total = got.history + got.file + got.folder
	t.Logf("two-call job: %d fsyncs (%d history, %d file, %d folder); budget %+v; %d results fsync'd by their launchers",
		got.total, got.history, got.file, got.folder, fsyncBudget, ex.synced.Load())
	if got.history > fsyncBudget.history || got.file > fsyncBudget.file || got.folder > fsyncBudget.folder || got.total > fsyncBudget.total {
		t.Fatalf("two-call job: %+v fsyncs, over the budget %+v", got, fsyncBudget)
	}
	if n := ex.synced.Load(); n > 0 {
		t.Fatalf("%d results fsync'd by their launchers while the daemon waited for them (about 5 fsyncs each), want 0", n)
	}
}

// syncCounter counts the contained calls' results, and those their
// launchers made durable themselves.
type syncCounter struct {
	sandbox.Executor
	results, synced atomic.Int64
}

func (s *syncCounter) Start(spec sandbox.Spec) (sandbox.Call, error) {
	c, err := s.Executor.Start(spec)
	if err != nil {
		return nil, err
	}
	return &countedCall{Call: c, s: s}, nil
}

type countedCall struct {
	sandbox.Call
	s *syncCounter
}

func (c *countedCall) Wait(ctx context.Context) (*sandbox.Result, error) {
	r, err := c.Call.Wait(ctx)
	if err == nil {
		c.s.results.Add(1)
		if r.Synced {
			c.s.synced.Add(1)
		}
	}
	return r, err
}
