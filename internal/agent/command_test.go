package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/manifest"
	"golang.org/x/sys/unix"
)

func request(t *testing.T, n int) *Request {
	job := t.TempDir()
	ws := filepath.Join(job, "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	return &Request{JobID: "j", Phase: "work", Role: "worker", Workspace: ws, JobDir: job, Interaction: n}
}

// Many agents at once, each answering a large stdout right before it
// exits: every answer arrives whole (no deadline on reading the pipes).
func TestAnswersAreNeverCutUnderLoad(t *testing.T) {
	answer := `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"` + strings.Repeat("x", 400) + `"}`
	c := &Command{Cfg: manifest.Command{Argv: []string{"sh", "-c", "head -c 200000 /dev/zero | tr '\\0' ' ' >&2; printf '%s' '" + answer + "'"}}}
	var wg sync.WaitGroup
	errs := make(chan string, 200)
	sem := make(chan struct{}, 16)
	for i := 0; i < 120; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := c.Call(context.Background(), request(t, i))
			if err != nil {
				errs <- err.Error()
				return
			}
			if string(res.Raw) != answer || len(res.Stderr) != 200000 {
				errs <- fmt.Sprintf("call %d: answer %d bytes, stderr %d bytes", i, len(res.Raw), len(res.Stderr))
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// A child left in the background does not hold the call open: once the
// agent exits, its group is killed and the call returns with the answer.
func TestLingeringChildIsKilled(t *testing.T) {
	req := request(t, 1)
	c := &Command{Cfg: manifest.Command{Argv: []string{"sh", "-c", "sleep 60 & echo $! > child.pid; echo '{\"a\":1}'"}}}
	start := time.Now()
	res, err := c.Call(context.Background(), req)
	if err != nil || strings.TrimSpace(string(res.Raw)) != `{"a":1}` {
		t.Fatalf("res %q err %v", res.Raw, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("call took %s", d)
	}
	b, _ := os.ReadFile(filepath.Join(req.Workspace, "child.pid"))
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	// The call's line stays in the pid log, naming a process that is gone.
	b, err = os.ReadFile(filepath.Join(req.JobDir, "requests", PidLog))
	var in, agentPid int
	if _, serr := fmt.Sscanf(strings.TrimSpace(string(b)), "%d %d", &in, &agentPid); err != nil || serr != nil || in != 1 {
		t.Fatalf("pid log %q (%v): want a line for interaction 1", b, err)
	}
	if _, ok := procStart(agentPid); ok {
		t.Errorf("agent %d still runs after the call", agentPid)
	}
	if KillOrphan(req.JobDir, 1) {
		t.Error("KillOrphan killed something after the call had ended")
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, ok := procStart(pid); !ok {
			return
		}
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(b), ") Z ") {
			return // dead, waiting to be reaped by its adopter
		}
	}
	t.Fatalf("process %d still runs", pid)
}

// An agent left running by a killed daemon is killed before its call is
// re-attempted; a recycled pid, another call's line and a torn line are
// left alone.
func TestKillOrphan(t *testing.T) {
	req := request(t, 7)
	if err := os.MkdirAll(filepath.Join(req.JobDir, "requests"), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	go cmd.Wait()
	pid := cmd.Process.Pid
	log := filepath.Join(req.JobDir, "requests", PidLog)

	// Wrong start time: someone else's process now has that pid. Another
	// interaction's line, and a line a crash cut short, name it too.
	if err := os.WriteFile(log, []byte(fmt.Sprintf("7 %d 1\n6 %d", pid, pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	recordPid(context.Background(), log, 8, pid)
	if KillOrphan(req.JobDir, 7) {
		t.Fatal("killed a process whose start time does not match")
	}
	if _, ok := procStart(pid); !ok {
		t.Fatal("process gone")
	}
	recordPid(context.Background(), log, 7, pid)
	if !KillOrphan(req.JobDir, 7) {
		t.Fatal("orphan not killed")
	}
	waitGone(t, pid)
	if KillOrphan(req.JobDir, 7) {
		t.Error("a process already killed was reported killed again")
	}
}

// The agent reads its request from the file; one the engine already wrote
// (FileWritten) is used as it is, and one it did not is written by Call.
func TestRequestFileWrittenOnce(t *testing.T) {
	c := &Command{Cfg: manifest.Command{Argv: []string{"sh", "-c", `cat "$1"`, "agent", "{request_file}"}}}
	req := request(t, 3)
	req.Prompt = "from Call"
	res, err := c.Call(context.Background(), req)
	if err != nil || !strings.Contains(string(res.Raw), `"prompt": "from Call"`) {
		t.Fatalf("request file the agent read: %q, err %v", res.Raw, err)
	}
	req.Prompt = "changed after the file was written"
	if err := WriteRequest(req.JobDir, req.Interaction, []byte(`{"prompt": "prewritten"}`)); err != nil {
		t.Fatal(err)
	}
	req.FileWritten = true
	res, err = c.Call(context.Background(), req)
	if err != nil || string(res.Raw) != `{"prompt": "prewritten"}` {
		t.Fatalf("request file the agent read: %q, err %v; want the prewritten one", res.Raw, err)
	}
	if RequestFile(req.JobDir, 3) != filepath.Join(req.JobDir, "requests", "000003.json") {
		t.Errorf("RequestFile = %s", RequestFile(req.JobDir, 3))
	}
}

// A stale answer file that cannot be removed refuses the call before the
// agent runs: left in place, it could be read as this call's answer.
func TestStaleAnswerThatCannotGoRefusesTheCall(t *testing.T) {
	req := request(t, 4)
	// A folder with something in it is what os.Remove cannot remove.
	if err := os.MkdirAll(filepath.Join(req.JobDir, "requests", "000004.answer.json", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(req.Workspace, "ran")
	c := &Command{Cfg: manifest.Command{Argv: []string{"sh", "-c", `touch "$1"; echo '{}' > "$2"`, "agent", ran, "{answer_file}"}, Answer: "file"}}
	_, err := c.Call(context.Background(), req)
	if ae, ok := AsError(err); !ok || ae.Code != codes.AgentStart {
		t.Fatalf("error %v, want %s", err, codes.AgentStart)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the agent ran")
	}
}

// A stale answer file an earlier attempt of the interaction left is
// removed before the agent runs: never read as this call's answer.
func TestStaleAnswerIsRemovedBeforeTheCall(t *testing.T) {
	req := request(t, 5)
	stale := filepath.Join(req.JobDir, "requests", "000005.answer.json")
	if err := os.MkdirAll(filepath.Dir(stale), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte(`{"action": "COMPLETED"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Command{Cfg: manifest.Command{Argv: []string{"true"}, Answer: "file"}}
	res, err := c.Call(context.Background(), req)
	if err != nil || len(res.Raw) != 0 || res.NoAnswer == "" {
		t.Fatalf("answer %q (%v) read from a file this call's agent never wrote", res.Raw, err)
	}
	if _, err := os.Lstat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale answer still there: %v", err)
	}
}

// An agent that has exited before its line is written (a zombie until the
// call reaps it) still gets its line in the pid log.
func TestPidLineOfAnAgentAlreadyExited(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Wait() //nolint:errcheck // reaped at the end: a zombie until then
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(b), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("true did not exit")
		}
	}
	log := filepath.Join(t.TempDir(), PidLog)
	recordPid(context.Background(), log, 3, pid)
	b, err := os.ReadFile(log)
	var in, got int
	if _, serr := fmt.Sscanf(strings.TrimSpace(string(b)), "%d %d", &in, &got); err != nil || serr != nil || in != 3 || got != pid {
		t.Fatalf("pid log %q (%v): want a line for interaction 3, pid %d", b, err, pid)
	}
}

// specExec is an Executor of the given layer that records the spec it is
// given and answers COMPLETED without running anything.
type specExec struct {
	layer string
	got   *ProcSpec
}

func (e specExec) Run(_ context.Context, spec ProcSpec) (*ProcResult, error) {
	*e.got = spec
	return &ProcResult{Stdout: []byte(`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}`)}, nil
}

func (e specExec) Layer() string { return e.layer }

// What a sandbox binds (ProcSpec.ReadOnly: a stat per argument naming a
// file, an lstat per read-only workspace file) is looked up for a
// contained call only; an uncontained call's stale answer goes even when
// its call folder holds a contained run (an uncontained run is never
// adopted).
func TestReadOnlyLookedUpForContainedCallsOnly(t *testing.T) {
	for _, layer := range []string{LayerNone, "bwrap+landlock"} {
		req := request(t, 3)
		script := filepath.Join(req.JobDir, "agent.sh")
		if err := os.WriteFile(script, []byte("exit 0\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(req.Workspace, "README.md"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		req.ReadOnly = []string{"README.md"}
		// A run a previous daemon left in the call folder, and an old
		// answer where an uncontained call answers.
		callDir := CallDir(req.JobDir, req.Interaction)
		if err := os.MkdirAll(callDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(callDir, "launcher.pid"), []byte("1"), 0o600); err != nil {
			t.Fatal(err)
		}
		stale := filepath.Join(req.JobDir, "requests", "000003.answer.json")
		if err := os.WriteFile(stale, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		var spec ProcSpec
		c := &Command{Cfg: manifest.Command{Argv: []string{"sh", script}}, Getenv: func(string) string { return "" }}
		if _, err := c.Call(WithExecutor(context.Background(), specExec{layer, &spec}), req); err != nil {
			t.Fatal(err)
		}
		if layer == LayerNone {
			if spec.ReadOnly != nil || spec.ReadWrite != nil {
				t.Errorf("uncontained: ReadOnly %v, ReadWrite %v: want none", spec.ReadOnly, spec.ReadWrite)
			}
			if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("uncontained: the stale answer is still there (%v)", err)
			}
			continue
		}
		want := []string{script, RequestFile(req.JobDir, 3), filepath.Join(req.Workspace, "README.md")}
		if strings.Join(spec.ReadOnly, ",") != strings.Join(want, ",") || len(spec.ReadWrite) != 1 {
			t.Errorf("contained: ReadOnly %v, ReadWrite %v: want %v and the answer folder", spec.ReadOnly, spec.ReadWrite, want)
		}
	}
}

// A run given no stdin reads the one descriptor devNull opened for every
// run (here a file that says so), not a /dev/null exec would open per run.
func TestRunsWithoutStdinShareOneDescriptor(t *testing.T) {
	p := filepath.Join(t.TempDir(), "stdin")
	if err := os.WriteFile(p, []byte("shared\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	was := devNull
	devNull = func() (*os.File, error) { return f, nil }
	t.Cleanup(func() { devNull = was })
	for range 2 {
		if _, err := f.Seek(0, 0); err != nil {
			t.Fatal(err)
		}
		pr, err := runDirect(context.Background(), ProcSpec{Argv: []string{"cat"}, Dir: t.TempDir()})
		if err != nil || string(pr.Stdout) != "shared\n" {
			t.Fatalf("the run read %q from its stdin (%v), want the shared descriptor's", pr.Stdout, err)
		}
	}
	// The real one: /dev/null, opened once.
	a, errA := was()
	b, errB := was()
	if errA != nil || errB != nil || a != b || a.Name() != os.DevNull {
		t.Fatalf("devNull: %v %v, %v %v", a, errA, b, errB)
	}
}

// A child's output pipe: the daemon's read end is polled (a Close wakes a
// read blocked on it) and the child's write end is blocking from the
// start, so that exec need not make it so (two fcntl) and it is never put
// in the poller (two epoll_ctl).
func TestOutputPipeEnds(t *testing.T) {
	r, w, err := outputPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, c := range []struct {
		f           *os.File
		nonblocking bool
	}{{r, true}, {w, false}} {
		fl, err := unix.FcntlInt(c.f.Fd(), syscall.F_GETFL, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := fl&syscall.O_NONBLOCK != 0; got != c.nonblocking {
			t.Errorf("%s: O_NONBLOCK %v, want %v", c.f.Name(), got, c.nonblocking)
		}
		fd, err := unix.FcntlInt(c.f.Fd(), syscall.F_GETFD, 0)
		if err != nil || fd&syscall.FD_CLOEXEC == 0 {
			t.Errorf("%s: not close-on-exec (%v)", c.f.Name(), err)
		}
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	if n, err := r.Read(b); err != nil || string(b[:n]) != "x" {
		t.Fatalf("read %q, %v", b[:n], err)
	}
	done := make(chan error, 1)
	go func() { _, err := r.Read(b); done <- err }()
	time.Sleep(10 * time.Millisecond)
	_ = r.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("a read woken by Close: %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close of the read end did not wake the read blocked on it")
	}
}

// An agent that answers in a file but prints its answer on stdout, and
// exits 0, answered nothing (no error of the call: AGENT_EMPTY is the
// answer's, judged like an empty file's), and is told why: no answer file,
// and its stdout looks like the answer that belonged in it. What it
// printed is kept, whichever way it answered.
func TestAnswerFileAgentThatPrintsItsAnswer(t *testing.T) {
	answer := `{"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "done"}`
	c := &Command{Cfg: manifest.Command{Argv: []string{"sh", "-c", `echo "$1"`, "agent", answer, "{answer_file}"}, Answer: "file"}}
	res, err := c.Call(context.Background(), request(t, 6))
	if err != nil || len(res.Raw) != 0 {
		t.Fatalf("res %+v, err %v; want no answer and no call error", res, err)
	}
	for _, w := range []string{"the agent wrote no answer file", "its stdout holds what looks like a JSON answer", "{answer_file}"} {
		if !strings.Contains(res.NoAnswer, w) {
			t.Errorf("NoAnswer %q lacks %q", res.NoAnswer, w)
		}
	}
	if !strings.Contains(string(res.Stdout), `"summary_for_supervisor": "done"`) {
		t.Errorf("stdout not kept: %q", res.Stdout)
	}
	// Prose on stdout is not taken for an answer.
	c = &Command{Cfg: manifest.Command{Argv: []string{"sh", "-c", `echo working`, "agent", "{answer_file}"}, Answer: "file"}}
	if res, err = c.Call(context.Background(), request(t, 7)); err != nil || strings.Contains(res.NoAnswer, "stdout") || !strings.Contains(res.NoAnswer, "no answer file") {
		t.Errorf("res %+v, err %v; want no answer file, nothing said of stdout", res, err)
	}
	// Both: the file is the answer, stdout is kept beside it.
	c = &Command{Cfg: manifest.Command{Argv: []string{"sh", "-c", `echo "$1" > "$2"; echo from stdout`, "agent", answer, "{answer_file}"}, Answer: "file"}}
	if res, err = c.Call(context.Background(), request(t, 8)); err != nil || !strings.Contains(string(res.Raw), `"done"`) || string(res.Stdout) != "from stdout\n" || res.NoAnswer != "" {
		t.Errorf("res %+v (raw %q, stdout %q), err %v; want the file's answer and stdout kept", res, res.Raw, res.Stdout, err)
	}
}
