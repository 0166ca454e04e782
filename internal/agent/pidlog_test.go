package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run's calls append to the pid log through one descriptor (PidFile),
// opened at the first and closed with the run; every call's line is
// there, and the next run opens the file again. A pid log that is not the
// run's (a tool's) is opened per run, as is any without a PidFile.
func TestPidFileIsOpenedOncePerRun(t *testing.T) {
	opens := 0
	was := openPidLog
	openPidLog = func(p string) (*os.File, error) { opens++; return was(p) }
	t.Cleanup(func() { openPidLog = was })
	jobDir := t.TempDir()
	if err := os.Mkdir(filepath.Join(jobDir, "requests"), 0o700); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(jobDir, "requests", PidLog)
	other := filepath.Join(jobDir, "requests", "tool.pids")
	run := func(ctx context.Context, pidLog string, n int) {
		t.Helper()
		if _, err := runDirect(ctx, ProcSpec{Argv: []string{"true"}, Dir: jobDir, PidLog: pidLog, Interaction: n}); err != nil {
			t.Fatal(err)
		}
	}
	for r := range 2 {
		pf := NewPidFile(jobDir)
		ctx := WithPidFile(context.Background(), pf)
		opens = 0
		for n := range 3 {
			run(ctx, log, 3*r+n)
		}
		run(ctx, other, 0)
		if err := pf.Close(); err != nil {
			t.Fatal(err)
		}
		if opens != 2 {
			t.Errorf("run %d: %d opens of pid logs for 3 calls and a tool's run, want 2", r, opens)
		}
	}
	opens = 0
	run(context.Background(), log, 6)
	if opens != 1 {
		t.Errorf("a call with no PidFile: %d opens, want 1", opens)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	calls := loggedCalls(b)
	if strings.Join(calls, " ") != "0 1 2 3 4 5 6" {
		t.Errorf("the pid log names calls %v, want 0 to 6:\n%s", calls, b)
	}
}

// A run's pid log removed by hand while the run goes on (its requests/
// folder deleted, and made again as the next call's request makes it):
// the next call's line goes to the new file, where a restarted daemon
// looks, not to the unlinked one the run held open.
func TestPidFileOpensAgainOnceRemoved(t *testing.T) {
	jobDir := t.TempDir()
	reqs := filepath.Join(jobDir, "requests")
	if err := os.Mkdir(reqs, 0o700); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(reqs, PidLog)
	pf := NewPidFile(jobDir)
	t.Cleanup(func() { _ = pf.Close() })
	ctx := WithPidFile(context.Background(), pf)
	run := func(n int) {
		t.Helper()
		if _, err := runDirect(ctx, ProcSpec{Argv: []string{"true"}, Dir: jobDir, PidLog: log, Interaction: n}); err != nil {
			t.Fatal(err)
		}
	}
	run(1)
	if err := os.RemoveAll(reqs); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(reqs, 0o700); err != nil {
		t.Fatal(err)
	}
	run(2)
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("no pid log after the second call: %v", err)
	}
	calls := loggedCalls(b)
	if strings.Join(calls, " ") != "2" {
		t.Errorf("the new pid log names calls %v, want 2:\n%s", calls, b)
	}
}

// loggedCalls is the interaction of each line of pid log b, in order.
func loggedCalls(b []byte) []string {
	var calls []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			calls = append(calls, f[0])
		}
	}
	return calls
}
