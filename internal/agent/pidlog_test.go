package agent

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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

// startGroup starts a process group that runs until the test ends (a
// leader with a child, as an agent that started a helper), as an agent a
// crashed daemon left running; it returns the leader's pid, and a channel
// closed once the leader has ended and been reaped (as init reaps an
// orphan).
func startGroup(t *testing.T) (int, chan struct{}) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { _ = cmd.Wait(); close(reaped) }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-reaped })
	return cmd.Process.Pid, reaped
}

// pidLine is the pid log line (trimmed) of call n whose agent is pid.
func pidLine(t *testing.T, n, pid int) string {
	t.Helper()
	st, ok := startOf(pid, true)
	if !ok {
		t.Fatalf("process %d is gone", pid)
	}
	return fmt.Sprintf("%d %d %s", n, pid, st)
}

// hasLine reports whether pid log b holds line (trimmed) whole.
func hasLine(b []byte, line string) bool {
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// A long run of uncontained calls leaves a bounded pid log: it is
// compacted at PidLogMax bytes, keeping the lines of agents that may still
// run. Such an agent's line stays through compactions, both while its
// run goes on and in the next run's after a crash (the restarted daemon
// reads it), and KillOrphan still finds and kills the agent. A log the
// runs before left long, with a line a crash cut short at its end, is
// compacted at the next run's first line.
func TestPidLogIsCompactedAndKeepsOrphans(t *testing.T) {
	jobDir := t.TempDir()
	reqs := filepath.Join(jobDir, "requests")
	if err := os.Mkdir(reqs, 0o700); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(reqs, PidLog)
	orphan, reaped := startGroup(t)
	line := pidLine(t, 7, orphan)
	calls := func(ctx context.Context, from, n int) {
		t.Helper()
		for i := range n {
			if _, err := runDirect(ctx, ProcSpec{Argv: []string{"true"}, Dir: jobDir, PidLog: log, Interaction: from + i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(when string, wantOrphan bool) {
		t.Helper()
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > PidLogMax+64 {
			t.Errorf("%s: the pid log holds %d bytes (%d lines), want at most %d and a line", when, len(b), len(loggedCalls(b)), PidLogMax)
		}
		if hasLine(b, line) != wantOrphan {
			t.Errorf("%s: the running agent's line %q in the log: %v, want %v:\n%s", when, line, !wantOrphan, wantOrphan, b)
		}
	}

	// The crashed run: its call 7 started an agent and never reaped it.
	crashed := NewPidFile(jobDir)
	ctx := WithPidFile(context.Background(), crashed)
	_ = recordPid(ctx, log, 7, orphan)
	calls(ctx, 8, 100)
	check("the crashed run", true)
	_ = crashed.Close() // its process died: the descriptor with it

	// Before the next run, the log is as an older daemon left it: long,
	// its last line cut short.
	old, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		fmt.Fprintf(old, "\n%d %d 1\n", i, 4000000+i)
	}
	fmt.Fprintf(old, "\n9 %d", orphan)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	next := NewPidFile(jobDir)
	t.Cleanup(func() { _ = next.Close() })
	ctx = WithPidFile(context.Background(), next)
	calls(ctx, 108, 1)
	check("the next run's first call", true)
	calls(ctx, 109, 100)
	check("the next run", true)
	if !KillOrphan(jobDir, 7) {
		t.Fatal("the agent left running was not killed")
	}
	<-reaped
	calls(ctx, 209, 100)
	check("once it is killed", false)
}

// Calls that run side by side (a deliberation's turns) append to one
// PidFile while it compacts: no line of a call whose agent still runs is
// ever missing from the log a reader finds (every read sees one whole
// file), and the log stays bounded.
func TestCompactionLosesNoCallInFlight(t *testing.T) {
	jobDir := t.TempDir()
	reqs := filepath.Join(jobDir, "requests")
	if err := os.Mkdir(reqs, 0o700); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(reqs, PidLog)
	pf := NewPidFile(jobDir)
	t.Cleanup(func() { _ = pf.Close() })
	ctx := WithPidFile(context.Background(), pf)

	var mu sync.Mutex
	inFlight := map[string]bool{}
	stop := make(chan struct{})
	var reads, misses int
	read := make(chan struct{})
	go func() {
		defer close(read)
		for {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			before := maps.Clone(inFlight)
			mu.Unlock()
			b, err := os.ReadFile(log)
			if err != nil && !os.IsNotExist(err) {
				t.Error(err)
				return
			}
			mu.Lock()
			for l := range before {
				// In flight before the read and still after it: its line
				// was in the log all along.
				if inFlight[l] && !hasLine(b, l) {
					misses++
					t.Errorf("a read of the log misses the line %q of a call in flight:\n%s", l, b)
				}
			}
			reads++
			mu.Unlock()
		}
	}()

	const goroutines, calls, others = 4, 20, 10
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				n := 1000*g + 100*i
				cmd := exec.Command("sleep", "60")
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if err := cmd.Start(); err != nil {
					t.Error(err)
					return
				}
				pid := cmd.Process.Pid
				st, _ := startOf(pid, true)
				line := fmt.Sprintf("%d %d %s", n, pid, st)
				done := recordPid(ctx, log, n, pid)
				mu.Lock()
				inFlight[line] = true
				mu.Unlock()
				// Other calls come and go meanwhile.
				for k := range others {
					pf.add(fmt.Sprintf("\n%d %d 1\n", n+k+1, 4000000+n+k))()
				}
				mu.Lock()
				delete(inFlight, line)
				mu.Unlock()
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				_ = cmd.Wait()
				done()
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-read
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > PidLogMax+64 {
		t.Errorf("the pid log holds %d bytes after %d lines, want at most %d and a line", len(b), goroutines*calls*(others+1), PidLogMax)
	}
	t.Logf("%d reads of the log, %d missed a call in flight; %d bytes left", reads, misses, len(b))
}
