package runner

// Faults under a running scheduler (docs/hostile-inputs.md, "Faults"): the
// disk fills up, the history is deleted or corrupted, the wall clock jumps,
// the workspace is swapped for a symlink between calls.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/regfile"
	"github.com/logist/logist/internal/testkit"
	"github.com/logist/logist/internal/verify"
)

// logBuffer collects JSON log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}

// checkSeedLines checks every line of seed 004 §7 (one with a type or an
// error_code) the scheduler and the engine logged (joblog.Check) and
// returns how many there were.
func (l *logBuffer) checkSeedLines(t *testing.T) int {
	t.Helper()
	n := 0
	for _, line := range joblog.Lines(l.bytes()) {
		if line["type"] == nil && line["error_code"] == nil {
			continue
		}
		n++
		if err := joblog.Check(line); err != nil {
			t.Errorf("%v: %v", err, line)
		}
	}
	return n
}

// count is how many lines for job id carry error_code code (and msg, if
// given).
func (l *logBuffer) count(id, code, msg string) int {
	l.mu.Lock()
	data := append([]byte(nil), l.b.Bytes()...)
	l.mu.Unlock()
	n := 0
	for _, line := range bytes.Split(data, []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		if m["job_id"] == id && m["error_code"] == code && (msg == "" || m["msg"] == msg) {
			n++
		}
	}
	return n
}

// faultFixture is a fixture whose engine logs to a buffer, run by a
// scheduler that retries storage errors quickly.
func faultFixture(t *testing.T) (*fixture, *Scheduler, *logBuffer) {
	t.Helper()
	f := newFixture(t)
	lb := &logBuffer{}
	f.Env.Logger = slog.New(slog.NewJSONHandler(lb, nil))
	s := NewScheduler(context.Background(), f.Engine, 4, f.Env.Logger)
	s.StorageRetryInitial, s.StorageRetryMax = 10*time.Millisecond, 40*time.Millisecond
	t.Cleanup(func() { s.Stop(ErrShutdown) })
	return f, s, lb
}

const pausedMsg = "storage error: job paused, will run again"

// checkIntact asserts a job's history parses completely, ends on a record
// boundary, and verifies as one unbroken chain whose replay agrees with it.
func checkIntact(t *testing.T, f *fixture, id string) {
	t.Helper()
	dir := filepath.Join(f.Dir, id)
	b, err := os.ReadFile(history.Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("%s: history ends in a partial record", id)
	}
	if _, err := history.ReadEntries(dir); err != nil {
		t.Errorf("%s: history unreadable: %v", id, err)
	}
	rep, err := verify.Job(id, dir, verify.Options{Manifest: f.Load(id)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("%s: history does not verify: %v", id, rep.Problems)
	}
}

// responsesOnce asserts every interaction was answered exactly once.
func responsesOnce(t *testing.T, f *fixture, id string, want int) {
	t.Helper()
	seen := map[int]int{}
	for _, r := range testkit.OfType(f.Records(id), history.TypeResponse) {
		seen[*r.Interaction]++
	}
	if len(seen) != want {
		t.Errorf("%s: responses for %d interactions, want %d: %v", id, len(seen), want, seen)
	}
	for in, n := range seen {
		if n != 1 {
			t.Errorf("%s: interaction %d answered %d times", id, in, n)
		}
	}
}

// H86: the disk is full while the history is appended to. The job pauses
// with HISTORY_WRITE logged at each attempt, keeps no partial record, and
// goes on once space is back; the other job does not wait for it.
func TestDiskFullPausesJobAndResumes(t *testing.T) {
	t.Parallel()
	f, s, lb := faultFixture(t)
	f.WriteJob("full", job(okSupervisor(), okSupervisor()))
	f.WriteJob("other", job(okSupervisor(), okSupervisor()))
	var full atomic.Bool
	full.Store(true)
	var refused atomic.Int32
	f.Env.History.Write = func(file *os.File, line []byte) (int, error) {
		if full.Load() && strings.Contains(file.Name(), string(filepath.Separator)+"full"+string(filepath.Separator)) {
			refused.Add(1)
			// The disk took part of the record before it filled up.
			n, _ := file.Write(line[:len(line)/2])
			return n, &os.PathError{Op: "write", Path: file.Name(), Err: syscall.ENOSPC}
		}
		return file.Write(line)
	}
	before, _ := os.ReadFile(filepath.Join(f.Dir, "full", "job.json"))
	s.Nudge("full")
	s.Nudge("other")

	testkit.WaitFor(t, "the other job to succeed", 10*time.Second, func() bool { return f.Load("other").Status == lifecycle.Success })
	testkit.WaitFor(t, "three paused attempts", 10*time.Second, func() bool { return lb.count("full", "HISTORY_WRITE", pausedMsg) >= 3 })
	// The paused job keeps its place in the scheduler (a --once daemon
	// waits for it) but not a slot: the other job got one.
	testkit.WaitFor(t, "only the paused job left in the scheduler", 5*time.Second, func() bool { return s.Running() == 1 })
	if n := lb.count("full", "RUN_FAILED", ""); n != 0 {
		t.Errorf("the paused job was logged as failed %d times", n)
	}
	// While paused: nothing is half-written and the job is not failed.
	if after, _ := os.ReadFile(filepath.Join(f.Dir, "full", "job.json")); !bytes.Equal(before, after) {
		t.Errorf("the manifest changed while no history could be written")
	}
	if b, _ := os.ReadFile(history.Path(filepath.Join(f.Dir, "full"))); len(b) != 0 {
		t.Errorf("history holds %d bytes of refused records", len(b))
	}

	full.Store(false)
	testkit.WaitFor(t, "the paused job to succeed once space is back", 10*time.Second, func() bool { return f.Load("full").Status == lifecycle.Success })
	waitIdle(t, s, 5*time.Second)
	checkIntact(t, f, "full")
	responsesOnce(t, f, "full", 2)
	checkIntact(t, f, "other")
	if n := lb.count("full", "HISTORY_WRITE", ""); n < 6 {
		t.Errorf("HISTORY_WRITE logged %d times, want the append's and the scheduler's line at every attempt", n)
	}
	if refused.Load() < 3 {
		t.Errorf("the hook refused %d writes", refused.Load())
	}
	lb.checkSeedLines(t) // the scheduler's "storage error: job paused" lines among them
}

// H104: a job's files refuse access for a while (EACCES: a folder made
// read-only, an ownership being fixed). The run used to end in RUN_FAILED
// and leave the job RUNNING until a restart; it is stalled and retried
// with backoff like a full disk, the reason noted for logist status and
// counted for the metrics, and it runs on once access is back.
func TestAccessDeniedStallsJobAndResumes(t *testing.T) {
	t.Parallel()
	f, s, lb := faultFixture(t)
	f.WriteJob("ro", job(okSupervisor(), okSupervisor()))
	var denied atomic.Bool
	denied.Store(true)
	f.Env.History.Write = func(file *os.File, line []byte) (int, error) {
		if denied.Load() && strings.Contains(file.Name(), string(filepath.Separator)+"ro"+string(filepath.Separator)) {
			return 0, &os.PathError{Op: "write", Path: file.Name(), Err: syscall.EACCES}
		}
		return file.Write(line)
	}
	var mu sync.Mutex
	var heard []string
	s.OnStall = func(id, code string) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, id+":"+code)
	}
	s.Nudge("ro")
	testkit.WaitFor(t, "three stalled attempts", 10*time.Second, func() bool { return lb.count("ro", "STORAGE_DENIED", pausedMsg) >= 3 })
	if n := lb.count("ro", "RUN_FAILED", ""); n != 0 {
		t.Errorf("the stalled job was logged as failed %d times", n)
	}
	st, ok := f.Env.Store.ReadStall("ro")
	if !ok || st.Code != "STORAGE_DENIED" || !strings.Contains(st.Reason, "permission denied") || st.Attempt < 1 || st.Since == "" {
		t.Errorf("stall note %+v, %v", st, ok)
	}
	denied.Store(false)
	testkit.WaitFor(t, "the stalled job to succeed once access is back", 10*time.Second, func() bool { return f.Load("ro").Status == lifecycle.Success })
	waitIdle(t, s, 5*time.Second)
	checkIntact(t, f, "ro")
	responsesOnce(t, f, "ro", 2)
	if _, ok := f.Env.Store.ReadStall("ro"); ok {
		t.Error("the stall note outlived the stall")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) < 2 || heard[0] != "ro:STORAGE_DENIED" || heard[len(heard)-1] != "ro:" {
		t.Errorf("OnStall heard %v", heard)
	}
}

// H87: the disk fills up just after an agent answered: its response cannot
// be recorded. Nothing is recorded for it, so (as after a crash) the call is
// asked again with the same stored request, and each interaction ends up
// answered exactly once.
func TestDiskFullAfterCallReasksWithSameRequest(t *testing.T) {
	t.Parallel()
	f, s, lb := faultFixture(t)
	obs := &obsCalls{}
	f.Env.Obs = obs
	f.WriteJob("j", job(okSupervisor(), okSupervisor()))
	var (
		mu   sync.Mutex
		reqs []agent.Request
	)
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		mu.Lock()
		reqs = append(reqs, *req)
		mu.Unlock()
		return answer("COMPLETED", req.Role+" done"), nil
	})
	var failures atomic.Int32
	f.Env.History.Write = func(file *os.File, line []byte) (int, error) {
		// The first two attempts to record the worker's answer hit a full disk.
		if bytes.Contains(line, []byte(`"type":"response"`)) && bytes.Contains(line, []byte(`"role":"worker"`)) && failures.Add(1) <= 2 {
			n, _ := file.Write(line[:len(line)-10])
			return n, syscall.ENOSPC
		}
		return file.Write(line)
	}
	s.Nudge("j")
	testkit.WaitFor(t, "the job to succeed", 10*time.Second, func() bool { return f.Load("j").Status == lifecycle.Success })
	waitIdle(t, s, 5*time.Second)

	mu.Lock()
	defer mu.Unlock()
	var roles []string
	for _, r := range reqs {
		roles = append(roles, r.Role)
	}
	if strings.Join(roles, ",") != "worker,worker,worker,supervisor" {
		t.Fatalf("calls %v, want the worker asked three times (two answers lost to the full disk), then the supervisor", roles)
	}
	for _, again := range reqs[1:3] {
		if again.Interaction != reqs[0].Interaction || again.Prompt != reqs[0].Prompt {
			t.Errorf("re-asked with another request (interaction %d vs %d)", again.Interaction, reqs[0].Interaction)
		}
	}
	if n := len(testkit.OfType(f.Records("j"), history.TypeIntent)); n != 2 {
		t.Errorf("%d intents, want 2: the re-asks reuse the stored request", n)
	}
	if n := lb.count("j", "HISTORY_WRITE", pausedMsg); n != 2 {
		t.Errorf("%d paused lines, want 2", n)
	}
	responsesOnce(t, f, "j", 2)
	checkIntact(t, f, "j")
	// The metrics count each call once, as recorded: the answers the full
	// disk lost are the storage's retries, not the agents' calls (nor
	// their errors).
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if strings.Join(obs.outcomes, ",") != "worker:ok,supervisor:ok" {
		t.Errorf("agent calls counted %v, want worker:ok,supervisor:ok", obs.outcomes)
	}
}

// The disk refuses a command agent's request file (requests/NNNNNN.json),
// or access to it is denied (EACCES, EPERM: requests/ made read-only, an
// ownership being fixed). That is the job's storage failing, not its
// agent: the job stalls with STORAGE_WRITE (STORAGE_DENIED) and is run
// again with backoff like any write the storage refuses; the agent is not
// started, and no call, agent error or retry is counted, while the
// storage refuses it. Once it takes the file, the agent is asked once,
// with the request the intent recorded. (A denied write went to the
// provider, which failed with AGENT_START.)
func TestRequestFileRefusedStallsJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		errno syscall.Errno
		code  string
	}{{syscall.ENOSPC, codes.StorageWrite}, {syscall.EACCES, codes.StorageDenied}, {syscall.EPERM, codes.StorageDenied}} {
		t.Run(tc.errno.Error(), func(t *testing.T) {
			t.Parallel()
			requestFileRefused(t, tc.errno, tc.code)
		})
	}
}

func requestFileRefused(t *testing.T, errno syscall.Errno, code string) {
	f, s, lb := faultFixture(t)
	obs := &obsCalls{}
	f.Env.Obs = obs
	var full atomic.Bool
	full.Store(true)
	var refused atomic.Int32
	f.Engine.WriteRequest = func(jobDir string, n int, body []byte) error {
		if full.Load() {
			refused.Add(1)
			return &os.PathError{Op: "open", Path: agent.RequestFile(jobDir, n), Err: errno}
		}
		return agent.WriteRequest(jobDir, n, body)
	}
	var asked atomic.Int32
	f.Engine.NewProvider = func(cfg manifest.AgentConfig) (agent.Provider, error) {
		p, err := agent.New(cfg)
		if err != nil {
			return nil, err
		}
		return providerFunc(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
			if cfg.Provider == "command" {
				asked.Add(1)
			}
			return p.Call(ctx, req)
		}), nil
	}
	var mu sync.Mutex
	var heard []string
	s.OnStall = func(id, code string) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, id+":"+code)
	}
	answer := `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}`
	f.WriteJob("j", job(command(0, "sh", "-c", `cat "$1" >/dev/null && echo "$2"`, "agent", "{request_file}", answer), okSupervisor()))
	s.Nudge("j")

	// (Or the agent asked: it would not be again.)
	testkit.WaitFor(t, "three stalled attempts", 10*time.Second, func() bool {
		return lb.count("j", code, pausedMsg) >= 3 || asked.Load() > 0
	})
	if n := asked.Load(); n != 0 {
		t.Errorf("the agent was asked %d times while the storage refused its request file", n)
	}
	st, ok := f.Env.Store.ReadStall("j")
	if !ok || st.Code != code || st.Refused || !strings.Contains(st.Reason, "request file") ||
		!strings.Contains(st.Reason, errno.Error()) {
		t.Errorf("stall note %+v, %v", st, ok)
	}
	if m := f.Load("j"); m.Run.APIFailures != 0 || m.Run.ErrorCode != "" || m.Metrics.AgentCalls != 0 || !m.Status.Active() {
		t.Errorf("while stalled: %s, error code %q, api failures %d, agent calls %d", m.Status, m.Run.ErrorCode, m.Run.APIFailures, m.Metrics.AgentCalls)
	}
	if n := len(testkit.OfType(f.Records("j"), history.TypeIntent)); n != 1 {
		t.Errorf("%d intents while stalled, want 1: a retry asks again with the stored request", n)
	}

	full.Store(false)
	testkit.WaitFor(t, "the job to succeed once the disk takes the file", 10*time.Second, func() bool { return f.Load("j").Status == lifecycle.Success })
	waitIdle(t, s, 5*time.Second)
	if n := asked.Load(); n != 1 {
		t.Errorf("the agent was asked %d times, want once", n)
	}
	for _, code := range []string{codes.AgentStart, codes.RunFailed} {
		if n := lb.count("j", code, ""); n != 0 {
			t.Errorf("%s logged %d times", code, n)
		}
	}
	for _, r := range f.Records("j") {
		if r.Response != nil && r.Response.Status == history.StatusError {
			t.Errorf("an error response was recorded: %s %s", r.Response.ErrorCode, r.Response.Error)
		}
	}
	if m := f.Load("j"); m.Run.APIFailures != 0 || m.Metrics.AgentCalls != 2 {
		t.Errorf("api failures %d, agent calls %d; want 0 and 2", m.Run.APIFailures, m.Metrics.AgentCalls)
	}
	if _, ok := f.Env.Store.ReadStall("j"); ok {
		t.Error("the stall note outlived the stall")
	}
	responsesOnce(t, f, "j", 2)
	checkIntact(t, f, "j")
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if strings.Join(obs.outcomes, ",") != "worker:ok,supervisor:ok" || len(obs.retries) != 0 {
		t.Errorf("agent calls counted %v and retries %v, want worker:ok,supervisor:ok and none", obs.outcomes, obs.retries)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) < 2 || heard[0] != "j:"+code || heard[len(heard)-1] != "j:" {
		t.Errorf("OnStall heard %v", heard)
	}
	if refused.Load() < 3 {
		t.Errorf("the storage refused %d writes", refused.Load())
	}
}

// H88: the same, on a real file system that is full: a 512 KiB tmpfs. Skipped
// where mounting is not allowed (not root, no CAP_SYS_ADMIN).
func TestDiskFullOnRealTmpfs(t *testing.T) {
	dir := t.TempDir()
	mountTmpfs(t, dir, "TestDiskFullPausesJobAndResumes")

	f, s, lb := faultFixture(t)
	f.Dir = dir
	f.Env.Store.Dir = dir
	f.WriteJob("j", job(okSupervisor(), okSupervisor()))
	// As logistd does at start: the stall notes' reserve, made while
	// there is space.
	if err := f.Env.Store.ReserveStallSpace(); err != nil {
		t.Fatal(err)
	}
	filler := fillDisk(t, dir)

	s.Nudge("j")
	testkit.WaitFor(t, "two paused attempts", 10*time.Second, func() bool {
		return lb.count("j", "HISTORY_WRITE", pausedMsg)+lb.count("j", "MANIFEST_WRITE", pausedMsg)+lb.count("j", "STORAGE_WRITE", pausedMsg) >= 2
	})
	if m := f.Load("j"); m.Status != lifecycle.Pending {
		t.Errorf("status %s while the disk is full, want PENDING (nothing could be recorded)", m.Status)
	}
	// logist status learns of the stall although the disk is full.
	if st, ok := f.Env.Store.ReadStall("j"); !ok || st.Refused || !strings.Contains(st.Reason, "no space left on device") {
		t.Errorf("stall note on the full disk: %+v, %v; log:\n%s", st, ok, string(lb.bytes()))
	}
	if strings.Contains(string(lb.bytes()), "cannot note the job's stall") {
		t.Errorf("a stall note was refused by the full disk:\n%s", string(lb.bytes()))
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the job to succeed once space is back", 10*time.Second, func() bool { return f.Load("j").Status == lifecycle.Success })
	waitIdle(t, s, 5*time.Second)
	responsesOnce(t, f, "j", 2)
	checkIntact(t, f, "j")
}

// mountTmpfs mounts a 512 KiB tmpfs on dir until the test ends, or skips
// the test where mounting is not allowed (not root, no CAP_SYS_ADMIN);
// injected names the test that covers the same by injection.
func mountTmpfs(t *testing.T, dir, injected string) {
	t.Helper()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", dir).Run(); err != nil {
		if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
			t.Fatalf("CI runs as root but cannot mount a tmpfs: %v", err)
		}
		t.Skipf("SKIPPED: cannot mount a tmpfs here (%v); %s covers ENOSPC by injection", err, injected)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
}

// fillDisk fills the file system of dir with a file, which it returns:
// removing it gives the space back.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	filler := filepath.Join(dir, "filler")
	fill, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	defer fill.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := fill.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return filler
		}
	}
}

// The same as TestRequestFileRefusedStallsJob, on a real file
// system that is full: the job's requests/ folder is a full 512 KiB tmpfs,
// while its history and manifest have space. The job stalls on the
// request file; it is not the agent's failure (AGENT_START, counted and
// retried as the agent's), as it was.
func TestDiskFullForRequestFileOnRealTmpfs(t *testing.T) {
	f, s, lb := faultFixture(t)
	obs := &obsCalls{}
	f.Env.Obs = obs
	answer := `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}`
	f.WriteJob("j", job(command(0, "sh", "-c", `cat "$1" >/dev/null && echo "$2"`, "agent", "{request_file}", answer), okSupervisor()))
	requests := filepath.Join(f.Dir, "j", "requests")
	if err := os.Mkdir(requests, 0o700); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, requests, "TestRequestFileRefusedStallsJob")
	filler := fillDisk(t, requests)

	s.Nudge("j")
	// (Or the agent's failure: the agent is not to blame.)
	testkit.WaitFor(t, "two stalled attempts", 10*time.Second, func() bool {
		return lb.count("j", codes.StorageWrite, pausedMsg) >= 2 || lb.count("j", codes.AgentStart, "") > 0
	})
	if n := lb.count("j", codes.AgentStart, ""); n != 0 {
		t.Fatalf("AGENT_START logged %d times: the full disk was blamed on the agent", n)
	}
	if st, ok := f.Env.Store.ReadStall("j"); !ok || st.Code != codes.StorageWrite || !strings.Contains(st.Reason, "no space left on device") {
		t.Errorf("stall note %+v, %v", st, ok)
	}
	if m := f.Load("j"); m.Run.APIFailures != 0 || m.Run.ErrorCode != "" || m.Metrics.AgentCalls != 0 {
		t.Errorf("while stalled: error code %q, api failures %d, agent calls %d", m.Run.ErrorCode, m.Run.APIFailures, m.Metrics.AgentCalls)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the job to succeed once space is back", 10*time.Second, func() bool { return f.Load("j").Status == lifecycle.Success })
	waitIdle(t, s, 5*time.Second)
	if n := lb.count("j", codes.AgentStart, ""); n != 0 {
		t.Errorf("AGENT_START logged %d times:\n%s", n, lb.bytes())
	}
	if m := f.Load("j"); m.Run.APIFailures != 0 || m.Metrics.AgentCalls != 2 {
		t.Errorf("api failures %d, agent calls %d; want 0 and 2", m.Run.APIFailures, m.Metrics.AgentCalls)
	}
	responsesOnce(t, f, "j", 2)
	checkIntact(t, f, "j")
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if strings.Join(obs.outcomes, ",") != "worker:ok,supervisor:ok" || len(obs.retries) != 0 {
		t.Errorf("agent calls counted %v and retries %v, want worker:ok,supervisor:ok and none", obs.outcomes, obs.retries)
	}
}

// The same as TestRequestFileRefusedStallsJob's EACCES, really: the job's
// requests/ folder is made read-only (mode 0500) for a user the mode holds
// back, while its history and manifest may be written. The job stalls
// with STORAGE_DENIED before the agent starts (it was AGENT_START, the
// agent's error, counted and retried as the agent's), and runs on once
// the folder is writable again.
func TestReadOnlyRequestsFolderStallsJob(t *testing.T) {
	// As a user other than root in a user namespace of its own (uid
	// 1000, this user outside): a folder's mode holds it back, as it does
	// logistd's user. Where none can be made, TestRequestFileRefusedStallsJob
	// covers EACCES by injection.
	if !testkit.InUserNamespace(t, "a user a folder's mode holds back") {
		return
	}
	f, s, lb := faultFixture(t)
	obs := &obsCalls{}
	f.Env.Obs = obs
	answer := `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}`
	f.WriteJob("j", job(command(0, "sh", "-c", `cat "$1" >/dev/null && echo "$2"`, "agent", "{request_file}", answer), okSupervisor()))
	requests := filepath.Join(f.Dir, "j", "requests")
	if err := os.Mkdir(requests, 0o500); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(requests, "probe"), nil, 0o600); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("a file made in the read-only folder: %v, want EACCES (is the mode ignored?)", err)
	}

	s.Nudge("j")
	// (Or the agent's failure: the agent is not to blame.)
	testkit.WaitFor(t, "two stalled attempts", 10*time.Second, func() bool {
		return lb.count("j", codes.StorageDenied, pausedMsg) >= 2 || lb.count("j", codes.AgentStart, "") > 0
	})
	if n := lb.count("j", codes.AgentStart, ""); n != 0 {
		t.Fatalf("AGENT_START logged %d times: the read-only folder was blamed on the agent", n)
	}
	if st, ok := f.Env.Store.ReadStall("j"); !ok || st.Code != codes.StorageDenied || !strings.Contains(st.Reason, "request file") ||
		!strings.Contains(st.Reason, "permission denied") {
		t.Errorf("stall note %+v, %v", st, ok)
	}
	if m := f.Load("j"); m.Run.APIFailures != 0 || m.Run.ErrorCode != "" || m.Metrics.AgentCalls != 0 {
		t.Errorf("while stalled: error code %q, api failures %d, agent calls %d", m.Run.ErrorCode, m.Run.APIFailures, m.Metrics.AgentCalls)
	}
	if err := os.Chmod(requests, 0o700); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the job to succeed once the folder is writable", 10*time.Second, func() bool { return f.Load("j").Status == lifecycle.Success })
	waitIdle(t, s, 5*time.Second)
	if n := lb.count("j", codes.AgentStart, ""); n != 0 {
		t.Errorf("AGENT_START logged %d times:\n%s", n, lb.bytes())
	}
	if m := f.Load("j"); m.Run.APIFailures != 0 || m.Metrics.AgentCalls != 2 {
		t.Errorf("api failures %d, agent calls %d; want 0 and 2", m.Run.APIFailures, m.Metrics.AgentCalls)
	}
	responsesOnce(t, f, "j", 2)
	checkIntact(t, f, "j")
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if strings.Join(obs.outcomes, ",") != "worker:ok,supervisor:ok" || len(obs.retries) != 0 {
		t.Errorf("agent calls counted %v and retries %v, want worker:ok,supervisor:ok and none", obs.outcomes, obs.retries)
	}
}

// blockingAgent answers COMPLETED, except that the call named by block
// (role) waits for release.
type blockingAgent struct {
	block   string
	entered chan struct{}
	release chan struct{}
	calls   atomic.Int32
	once    sync.Once
}

// victimMidCall is a fault fixture with two jobs, victim and other, and
// victim's run held in its agent's call for role (released by closing
// ag.release); other is not started yet.
func victimMidCall(t *testing.T, role string) (*fixture, *Scheduler, *logBuffer, *blockingAgent) {
	t.Helper()
	f, s, lb := faultFixture(t)
	f.WriteJob("victim", job(okSupervisor(), okSupervisor()))
	f.WriteJob("other", job(okSupervisor(), okSupervisor()))
	ag := newBlockingAgent(role)
	f.fake(ag.call)
	s.Nudge("victim")
	ag.waitEntered(t)
	return f, s, lb, ag
}

func newBlockingAgent(role string) *blockingAgent {
	return &blockingAgent{block: role, entered: make(chan struct{}), release: make(chan struct{})}
}

func (b *blockingAgent) call(ctx context.Context, req *agent.Request) (*agent.Result, error) {
	if req.JobID == "victim" {
		b.calls.Add(1)
		if req.Role == b.block {
			first := false
			b.once.Do(func() { first = true })
			if first {
				close(b.entered)
				select {
				case <-b.release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		}
	}
	return answer("COMPLETED", req.Role+" of "+req.JobID+" done"), nil
}

func (b *blockingAgent) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-b.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent was never called")
	}
}

// H89: history.jsonl deleted while the job's agent is running. The answer
// cannot be recorded, and the engine never starts a new, empty history over
// the lost one: the job is refused (HISTORY_MISSING) at every nudge until
// the file is restored, and then goes on with the same request.
func TestHistoryDeletedUnderRunningJob(t *testing.T) {
	t.Parallel()
	f, s, lb, ag := victimMidCall(t, "worker")

	hp := history.Path(filepath.Join(f.Dir, "victim"))
	saved, err := os.ReadFile(hp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(hp); err != nil {
		t.Fatal(err)
	}
	manifestBefore, _ := os.ReadFile(filepath.Join(f.Dir, "victim", "job.json"))
	close(ag.release)
	testkit.WaitFor(t, "the run to be refused", 10*time.Second, func() bool { return lb.count("victim", "HISTORY_MISSING", "job run failed") >= 1 })
	waitIdle(t, s, 5*time.Second)

	s.Nudge("other")
	s.Nudge("victim") // as a manifest change would
	testkit.WaitFor(t, "the other job to succeed", 10*time.Second, func() bool { return f.Load("other").Status == lifecycle.Success })
	testkit.WaitFor(t, "the nudged run to be refused", 10*time.Second, func() bool { return lb.count("victim", "HISTORY_MISSING", "job run failed") >= 2 })
	waitIdle(t, s, 5*time.Second)
	if _, err := os.Stat(hp); err == nil {
		t.Fatal("a new history was started over the deleted one")
	}
	if after, _ := os.ReadFile(filepath.Join(f.Dir, "victim", "job.json")); !bytes.Equal(manifestBefore, after) {
		t.Errorf("the manifest changed although nothing could be recorded")
	}
	if n := ag.calls.Load(); n != 1 {
		t.Errorf("the agent was called %d times while the history was missing, want 1", n)
	}

	// Restored: the interrupted call is asked again and the job finishes.
	if err := os.WriteFile(hp, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	s.Nudge("victim")
	testkit.WaitFor(t, "the job to succeed after the restore", 10*time.Second, func() bool { return f.Load("victim").Status == lifecycle.Success })
	waitIdle(t, s, 5*time.Second)
	responsesOnce(t, f, "victim", 2)
	checkIntact(t, f, "victim")
	if n := len(testkit.OfType(f.Records("victim"), history.TypeIntent)); n != 2 {
		t.Errorf("%d intents, want 2 (the re-ask reuses the stored request)", n)
	}
	lb.checkSeedLines(t) // the scheduler's "job run failed" lines among them
}

// H90: history.jsonl corrupted in the middle while the job's agent is running.
// The job stops with HISTORY_CORRUPT logged, the file is left exactly as it
// was for a human (never repaired, never appended to), later nudges are
// refused the same way, and the other job is not affected.
func TestHistoryCorruptedUnderRunningJob(t *testing.T) {
	t.Parallel()
	f, s, lb, ag := victimMidCall(t, "supervisor")

	hp := history.Path(filepath.Join(f.Dir, "victim"))
	b, err := os.ReadFile(hp)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines) < 4 {
		t.Fatalf("history has %d lines", len(lines))
	}
	lines[1] = []byte("garbage\n")
	corrupt := bytes.Join(lines, nil)
	if err := os.WriteFile(hp, corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	manifestBefore, _ := os.ReadFile(filepath.Join(f.Dir, "victim", "job.json"))
	close(ag.release)
	testkit.WaitFor(t, "the run to stop", 10*time.Second, func() bool { return lb.count("victim", "HISTORY_CORRUPT", "job run failed") >= 1 })
	waitIdle(t, s, 5*time.Second)

	s.Nudge("other")
	s.Nudge("victim")
	testkit.WaitFor(t, "the other job to succeed", 10*time.Second, func() bool { return f.Load("other").Status == lifecycle.Success })
	testkit.WaitFor(t, "the nudged run to be refused", 10*time.Second, func() bool { return lb.count("victim", "HISTORY_CORRUPT", "job run failed") >= 2 })
	waitIdle(t, s, 5*time.Second)
	if now, _ := os.ReadFile(hp); !bytes.Equal(now, corrupt) {
		t.Errorf("the corrupt history was changed (%d bytes, was %d)", len(now), len(corrupt))
	}
	if after, _ := os.ReadFile(filepath.Join(f.Dir, "victim", "job.json")); !bytes.Equal(manifestBefore, after) {
		t.Errorf("the manifest changed over a corrupt history")
	}
	if m := f.Load("victim"); m.Status != lifecycle.Reviewing {
		t.Errorf("status %s, want REVIEWING as it was", m.Status)
	}
	if n := ag.calls.Load(); n != 2 {
		t.Errorf("%d calls, want 2 (no call over a corrupt history)", n)
	}
}

// H94: the wall clock (jobtx.Env.Now) jumps a day back and forth between
// every reading. Call durations come from the monotonic clock, so budgets
// neither run out early nor stretch, and records keep their order.
func TestWallClockJumpsDoNotCorruptBudgetsOrOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var ticks atomic.Int64
	f.Env.Now = func() time.Time {
		n := ticks.Add(1)
		jump := time.Duration(n) * 24 * time.Hour
		if n%2 == 0 {
			jump = -jump
		}
		return time.Now().Add(jump)
	}
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		if err := sleepOrDone(ctx, 30*time.Millisecond); err != nil {
			return nil, err
		}
		if req.Role == "worker" && req.CallIndex < 2 {
			return answer("RETRY", "again"), nil
		}
		return answer("COMPLETED", "done"), nil
	})

	// A budget of 3 s of agent time: four 30 ms calls stay far inside it,
	// however far the wall clock jumps.
	j := job(okSupervisor(), okSupervisor())
	j["time_threshold_minutes"] = 0.05
	f.WriteJob("roomy", j)
	f.Run("roomy")
	m := f.Load("roomy")
	if m.Status != lifecycle.Success {
		t.Fatalf("status %s (%s), want SUCCESS", m.Status, m.Run.Reason)
	}
	sum := 0.0
	recs := f.Records("roomy")
	for _, r := range testkit.OfType(recs, history.TypeResponse) {
		d := r.Response.ExecutionTimeSeconds
		if d < 0.025 || d > 2 {
			t.Errorf("execution_time_seconds = %v, want about 0.03", d)
		}
		sum += d
	}
	if got := m.Metrics.CumulativeTimeSeconds; got < 0.1 || got > 2 || got-sum > 0.01 || sum-got > 0.01 {
		t.Errorf("cumulative_time_seconds = %v, want the sum of the calls, %v", got, sum)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Seq != recs[i-1].Seq+1 {
			t.Errorf("record %d has seq %d after %d", i, recs[i].Seq, recs[i-1].Seq)
		}
	}
	last := -1
	for _, r := range testkit.OfType(recs, history.TypeIntent) {
		if *r.Interaction <= last {
			t.Errorf("interaction %d after %d", *r.Interaction, last)
		}
		last = *r.Interaction
	}
	if ticks.Load() == 0 {
		t.Fatal("the jumping clock was never read")
	}
	started, _ := time.Parse(time.RFC3339Nano, m.Run.StartedAt)
	if d := time.Since(started); d > -time.Hour && d < time.Hour {
		t.Errorf("started_at %s is not off by the jumps: the test clock was not used", m.Run.StartedAt)
	}

	// A budget of 75 ms: it runs out after 75 ms of calls whatever the
	// wall clock says, not earlier and not later.
	f.WriteJob("tight", func() map[string]any {
		j := job(okSupervisor(), okSupervisor())
		j["time_threshold_minutes"] = 0.00125
		return j
	}())
	f.Run("tight")
	m = f.Load("tight")
	if m.Status != lifecycle.HaltedTime {
		t.Fatalf("status %s (%s), want HALTED_TIME", m.Status, m.Run.Reason)
	}
	if !strings.Contains(m.Run.Reason, "budget of 0.00125 minutes (0.075s)") {
		t.Errorf("reason %q does not name the budget", m.Run.Reason)
	}
	if n := m.Metrics.AgentCalls; n < 1 || n > 4 {
		t.Errorf("%d calls, want the 75 ms to be spent on two or three 30 ms calls", n)
	}
	if got := m.Metrics.CumulativeTimeSeconds; got < 0.075 || got > 1 {
		t.Errorf("cumulative_time_seconds = %v, want just past the 0.075 s budget: a wall-clock jump was counted", got)
	}
}

// H80: an agent replaces the workspace with a symlink out of the job folder
// during its call. The next call is not made: the job stops with
// WORKSPACE_UNSAFE, and nothing is written through the link.
func TestWorkspaceSwappedForSymlinkBetweenCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	outside := t.TempDir()
	f.WriteJob("j", job(okSupervisor(), okSupervisor()))
	var calls atomic.Int32
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		calls.Add(1)
		if err := os.RemoveAll(req.Workspace); err != nil {
			return nil, err
		}
		if err := os.Symlink(outside, req.Workspace); err != nil {
			return nil, err
		}
		return answer("COMPLETED", "moved the workspace elsewhere"), nil
	})
	f.Run("j")
	m := f.Load("j")
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.WorkspaceUnsafe {
		t.Fatalf("status %s/%s (%s), want INTERVENTION_REQUIRED/%s", m.Status, m.Run.ErrorCode, m.Run.Reason, codes.WorkspaceUnsafe)
	}
	if !strings.Contains(m.Run.Reason, outside) || !strings.Contains(m.Run.Reason, "outside the job folder") {
		t.Errorf("reason %q does not say where the link points", m.Run.Reason)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d calls, want 1: no agent may run in the linked folder", n)
	}
	if m.Phase() != "review" {
		t.Errorf("phase %q, want review (the worker's answer was accepted)", m.Phase())
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("something was written through the link: %v", ents)
	}
	trs := testkit.OfType(f.Records("j"), history.TypeTransition)
	if tr := trs[len(trs)-1].Transition; tr.To != string(lifecycle.InterventionRequired) || tr.Actor != "SYSTEM" || tr.Event != string(lifecycle.EvAgentFailed) {
		t.Errorf("last transition %+v", tr)
	}
	// A steward who replaces the link with a real folder can resume.
	ws := f.Env.Store.Workspace("j")
	if err := os.Remove(ws); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if seen, err := checkWorkspace(filepath.Join(f.Dir, "j")); err != nil || seen != seenFolder {
		t.Errorf("a real workspace is refused: %v, %v", seen, err)
	}
}

// The storage-error classification the scheduler relies on.
func TestRunErrorCode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err   error
		code  string
		retry bool
	}{
		{fmt.Errorf("append history: %w", &os.PathError{Op: "write", Path: "h", Err: syscall.ENOSPC}), "HISTORY_WRITE", true},
		{fmt.Errorf("fsync history: %w", syscall.EIO), "HISTORY_WRITE", true},
		{fmt.Errorf("save manifest: %w", &os.PathError{Op: "write", Path: "m", Err: syscall.EDQUOT}), "MANIFEST_WRITE", true},
		{fmt.Errorf("mkdir /srv/history/manifest/ws: %w", syscall.EROFS), "STORAGE_WRITE", true},
		{fmt.Errorf("stat history: %w", &os.PathError{Op: "stat", Path: "h", Err: syscall.ENOENT}), "HISTORY_MISSING", false},
		{jobtx.HistoryGone(t.TempDir(), &manifest.Manifest{Run: manifest.RunState{UpdatedAt: "2026-01-01T00:00:00Z"}}), "HISTORY_MISSING", false},
		{errors.New("history /x: record at byte 10 is corrupt: bad"), "HISTORY_CORRUPT", false},
		{fmt.Errorf("open history: %w", &history.NotFileError{Path: "h", Err: regfile.ErrNotRegular}), "HISTORY_CORRUPT", false},
		{errors.New("history /x: record version 3 is newer than this logist supports (2); upgrade logist"), "HISTORY_TOO_NEW", false},
		{errors.New(`job j: phase "" is not in workflow supervised`), "RUN_FAILED", false},
	} {
		code, retry := runErrorCode(c.err)
		if code != c.code || retry != c.retry {
			t.Errorf("%v: %s/%v, want %s/%v", c.err, code, retry, c.code, c.retry)
		}
	}
	s := &Scheduler{StorageRetryInitial: 10 * time.Millisecond, StorageRetryMax: 50 * time.Millisecond}
	var got []time.Duration
	for n := 1; n <= 5; n++ {
		got = append(got, s.storageBackoff(n))
	}
	if fmt.Sprint(got) != "[10ms 20ms 40ms 50ms 50ms]" {
		t.Errorf("storage backoff %v", got)
	}
}

// A transaction that has seen the workspace (checkWorkspace's lstat)
// does not look again before a call: a missing one is made with its
// mkdir alone (jobstore.Store.MakeWorkspace), one already there costs
// nothing more. jobstore.Store.EnsureWorkspace, which stats it first, is
// left for a workspace made from its source meanwhile.
func TestWorkspaceSeenIsNotLookedAtAgain(t *testing.T) {
	mkdirs, ensures := 0, 0
	wsMkdir = func(s *jobstore.Store, id string) error { mkdirs++; return s.MakeWorkspace(id) }
	wsEnsure = func(s *jobstore.Store, id string) error { ensures++; return s.EnsureWorkspace(id) }
	t.Cleanup(func() { wsMkdir, wsEnsure = (*jobstore.Store).MakeWorkspace, (*jobstore.Store).EnsureWorkspace })
	for _, c := range []struct {
		name   string
		made   bool
		mkdirs int
	}{{"missing", false, 1}, {"there", true, 0}} {
		mkdirs, ensures = 0, 0
		f := newFixture(t)
		f.WriteJob("j", job(testkit.Script(testkit.Step("COMPLETED", "done")), okSupervisor()))
		ws := f.Env.Store.Workspace("j")
		if c.made {
			if err := os.Mkdir(ws, 0o700); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Remove(ws); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		f.Run("j")
		if m := f.Load("j"); m.Status != lifecycle.Success {
			t.Fatalf("%s: status %s (%s)", c.name, m.Status, m.Run.Reason)
		}
		if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
			t.Fatalf("%s: no workspace after the run: %v", c.name, err)
		}
		if mkdirs != c.mkdirs || ensures != 0 {
			t.Errorf("%s: %d mkdirs and %d stat-first ensures over two calls, want %d and 0", c.name, mkdirs, ensures, c.mkdirs)
		}
	}
}

// H150: a job's folder renamed (or removed) while its agent runs. The run
// stops with JOB_GONE logged; nothing is written at the old path or into
// the folder's new place; no refusal note is left in the stall folder for
// a job that is not there (it used to be RUN_FAILED with a note that
// outlived the job); the other job is not affected.
func TestJobFolderRenamedUnderRunningJob(t *testing.T) {
	t.Parallel()
	f, s, lb, ag := victimMidCall(t, "worker")

	old, moved := filepath.Join(f.Dir, "victim"), filepath.Join(f.Dir, "victim2")
	if err := os.Rename(old, moved); err != nil {
		t.Fatal(err)
	}
	hp := history.Path(moved)
	before, err := os.ReadFile(hp)
	if err != nil {
		t.Fatal(err)
	}
	close(ag.release)
	testkit.WaitFor(t, "the run to stop", 10*time.Second, func() bool { return lb.count("victim", codes.JobGone, "job run failed") >= 1 })
	waitIdle(t, s, 5*time.Second)
	s.Nudge("other")
	testkit.WaitFor(t, "the other job to succeed", 10*time.Second, func() bool { return f.Load("other").Status == lifecycle.Success })
	waitIdle(t, s, 5*time.Second)

	if _, err := os.Lstat(old); err == nil {
		t.Error("the old folder was made again")
	}
	if after, _ := os.ReadFile(hp); !bytes.Equal(before, after) {
		t.Error("the run wrote into the renamed folder's history")
	}
	if st, ok := f.Env.Store.ReadStall("victim"); ok {
		t.Errorf("a stall note was left for a job that is gone: %+v", st)
	}
	if n := lb.count("victim", codes.RunFailed, ""); n != 0 {
		t.Errorf("%d RUN_FAILED lines for a job whose folder went away", n)
	}
}

// H153: the disk fills up while a job's agent runs (jobs folder on a
// real 512 KiB tmpfs). The answer cannot be recorded; while the disk stays
// full the job's retries ask the storage first (jobstore.ProbeSpace) and
// call no agent: each would drop its answer, its cost not counted. It
// used to call the agent again at every retry (1 s, 2 s, 4 s … 1 min) for
// as long as the disk stayed full. Once space is back the interrupted
// call is asked again once and the job succeeds, its history intact.
func TestDiskFullingDuringACallDoesNotReaskUntilSpaceIsBack(t *testing.T) {
	dir := t.TempDir()
	mountTmpfs(t, dir, "TestDiskFullPausesJobAndResumes")
	f, s, lb := faultFixture(t)
	f.Dir = dir
	f.Env.Store.Dir = dir
	f.WriteJob("j", job(okSupervisor(), okSupervisor()))
	if err := f.Env.Store.ReserveStallSpace(); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	var filler atomic.Value
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		if calls.Add(1) == 1 {
			filler.Store(fillDisk(t, dir))
		}
		return answer("COMPLETED", "done"), nil
	})
	s.Nudge("j")
	paused := func() int {
		return lb.count("j", "HISTORY_WRITE", pausedMsg) + lb.count("j", "MANIFEST_WRITE", pausedMsg) + lb.count("j", "STORAGE_WRITE", pausedMsg)
	}
	testkit.WaitFor(t, "three paused attempts", 10*time.Second, func() bool { return paused() >= 3 })
	if n := calls.Load(); n != 1 {
		t.Errorf("the agent was called %d times while the disk stayed full, want 1", n)
	}
	if err := os.Remove(filler.Load().(string)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the job to succeed once space is back", 10*time.Second, func() bool { return f.Load("j").Status == lifecycle.Success })
	waitIdle(t, s, 5*time.Second)
	responsesOnce(t, f, "j", 2)
	checkIntact(t, f, "j")
}
