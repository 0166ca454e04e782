package runner

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/testkit"
)

// fsyncBudget is what a two-call job (a command worker, then a command
// supervisor, both answering COMPLETED at once) may cost in fsyncs, as
// measured: history appends (one per call's unit — the first with the
// job's start, the second with the first call's outcome, the third with
// the last call's outcome and the job's end), files written through
// atomicfile (jobHistory.json, once the job stops), and folders (the job's
// folder and its parent, once each, beside the first append's fsync).
// Issue 21 asks for at most one fsync per call on the critical path (a
// response and the next call's intent as one durable unit, reached) and at
// most 4 per two-call job (not reached: jobHistory.json and the two
// folders): whoever cuts one lowers its figure here, so that it cannot
// come back unnoticed.
var fsyncBudget = struct{ history, file, folder, total int64 }{history: 3, file: 1, folder: 2, total: 6}

// TestTwoCallJobFsyncs counts the fsyncs of a whole two-call job. It does
// not run in parallel: the file and folder counters are the process's.
func TestTwoCallJobFsyncs(t *testing.T) {
	f := newFixture(t)
	var appends atomic.Int64
	f.Env.History.Observe = func(int, time.Duration) { appends.Add(1) }
	answer := `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}`
	agentCmd := command(0, "sh", "-c", `echo "$1"`, "agent", answer)
	f.WriteJob("j", job(agentCmd, agentCmd))
	files, folders := atomicfile.FileSyncs.Load(), atomicfile.DirSyncs.Load()
	f.Run("j")
	calls := len(testkit.OfType(f.Records("j"), history.TypeIntent))
	if m := f.Load("j"); m.Status != lifecycle.Success || calls != 2 {
		t.Fatalf("status %s after %d calls (%s): want SUCCESS after 2", m.Status, calls, m.Run.Reason)
	}
	got := struct{ history, file, folder, total int64 }{history: appends.Load(),
		file: atomicfile.FileSyncs.Load() - files, folder: atomicfile.DirSyncs.Load() - folders}
	got.total = got.history + got.file + got.folder
	t.Logf("two-call job: %d fsyncs (%d history, %d file, %d folder); budget %+v", got.total, got.history, got.file, got.folder, fsyncBudget)
	if got.history > fsyncBudget.history || got.file > fsyncBudget.file || got.folder > fsyncBudget.folder || got.total > fsyncBudget.total {
		t.Fatalf("two-call job: %+v fsyncs, over the budget %+v", got, fsyncBudget)
	}
}
