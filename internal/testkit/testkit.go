// Package testkit is the jobs-folder fixture the tests of the engine, the
// steward, the workflows and the verifier share, so that each writes,
// runs and reads jobs the same way: a temporary jobs folder with an Env
// whose logger is silent, manifests filled in and checked as they are
// written, an engine run to its stop, histories read back.
//
// Only tests import it: it fails them (t.Fatal) instead of returning
// errors. It imports what the jobs folder is made of (jobtx, jobstore,
// manifest, history, signing) and never the engine, whose own tests use
// it: a fixture holds the engine as a Runner that the test's package sets.
// The tests of jobtx and of the packages below it cannot import it (an
// import cycle); their fixtures stay their own.
package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/signing"
)

// Runner runs a job until it stops: the engine (runner.Engine).
type Runner interface {
	Run(ctx context.Context, id string) error
}

// Fixture is a temporary jobs folder and the Env of its transactions.
type Fixture struct {
	T   testing.TB
	Dir string // the jobs folder
	Env *jobtx.Env
	// Runner is the engine Run uses; the test's package sets it.
	Runner Runner
}

// New makes a fixture on a new temporary jobs folder. Its Env logs
// nowhere and observes nothing; its histories are unsigned (see Sign).
func New(t testing.TB) *Fixture {
	t.Helper()
	dir := t.TempDir()
	return &Fixture{T: t, Dir: dir, Env: &jobtx.Env{Store: jobstore.New(dir), Logger: Logger(), Obs: jobtx.Nop{}}}
}

// Logger is a JSON logger that writes nowhere.
func Logger() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// Sign makes the jobs folder's signing key and has the fixture's
// histories signed with it.
func (f *Fixture) Sign() *signing.Key {
	f.T.Helper()
	key, err := signing.LoadOrCreate(f.Dir)
	if err != nil {
		f.T.Fatal(err)
	}
	f.Env.History.Signer = key
	return key
}

// ManifestJSON renders m as job id's manifest, filling in what a test
// leaves out: job_id (unless id is ""), a task description, two scripted
// roles that complete, and zero metrics.
func ManifestJSON(t testing.TB, id string, m map[string]any) []byte {
	t.Helper()
	if _, ok := m["job_id"]; !ok && id != "" {
		m["job_id"] = id
	}
	if _, ok := m["task_description"]; !ok {
		m["task_description"] = "Test task."
		if id != "" {
			m["task_description"] = "Test task for " + id + "."
		}
	}
	if _, ok := m["agents"]; !ok {
		m["agents"] = map[string]any{"worker": Script(Step("COMPLETED", "done")), "supervisor": Script(Step("COMPLETED", "ok"))}
	}
	if _, ok := m["metrics"]; !ok {
		m["metrics"] = map[string]any{"cumulative_cost": 0, "cumulative_time_seconds": 0}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// WriteJob writes the fixture's jobs/<id>/job.json from m (see
// ManifestJSON) and checks that it is a valid manifest.
func (f *Fixture) WriteJob(id string, m map[string]any) {
	f.T.Helper()
	WriteJob(f.T, f.Dir, id, m)
}

// WriteJob writes dir/<id>/job.json from m (see ManifestJSON) and checks
// that it is a valid manifest.
func WriteJob(t testing.TB, dir, id string, m map[string]any) {
	t.Helper()
	jd := filepath.Join(dir, id)
	if err := os.MkdirAll(jd, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(jd, jobstore.ManifestFile)
	if err := os.WriteFile(p, ManifestJSON(t, id, m), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := manifest.ReadFile(p); err != nil {
		t.Fatalf("test manifest %s is invalid: %v", id, err)
	}
}

// Load reads job id's manifest.
func (f *Fixture) Load(id string) *manifest.Manifest {
	f.T.Helper()
	m, err := f.Env.Store.Load(id)
	if err != nil {
		f.T.Fatalf("load %s: %v", id, err)
	}
	return m
}

// Run runs job id on the fixture's Runner until it stops.
func (f *Fixture) Run(id string) {
	f.T.Helper()
	if err := f.Runner.Run(context.Background(), id); err != nil {
		f.T.Fatalf("Run(%s): %v", id, err)
	}
}

// Records reads job id's whole history.
func (f *Fixture) Records(id string) []history.Record {
	f.T.Helper()
	return Records(f.T, filepath.Join(f.Dir, id))
}

// Records reads the whole history of the job in jobDir.
func Records(t testing.TB, jobDir string) []history.Record {
	t.Helper()
	recs, err := history.ReadAll(jobDir)
	if err != nil {
		t.Fatalf("read history of %s: %v", jobDir, err)
	}
	return recs
}

// OfType is the records of type typ, in order.
func OfType(recs []history.Record, typ string) []history.Record {
	var out []history.Record
	for _, r := range recs {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

// Script is a scripted agent answering steps in turn.
func Script(steps ...map[string]any) map[string]any {
	return map[string]any{"provider": "script", "script": steps}
}

// Step is one scripted answer: action, summary and, if any, the evidence
// files.
func Step(action, summary string, evidence ...string) map[string]any {
	s := map[string]any{"action": action, "summary": summary}
	if len(evidence) > 0 {
		s["evidence_files"] = evidence
	}
	return s
}

// WaitFor polls cond until it holds, and fails the test if d passes first.
func WaitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ReadPID reads a pid file; false if it is missing or not (yet) written.
func ReadPID(p string) (int, bool) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}

// SyncBuffer is a bytes.Buffer that a writer goroutine (a daemon's or a
// node's log, a proxy's) and the test reading it may use at once.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// BenchScriptJobs runs b.N of scenario 3's jobs (logist-bench -only 3) in
// f.Runner, each a scripted Worker and Supervisor that answer COMPLETED at
// once: one op is a whole two-call job (its start, two calls, its end and
// jobHistory.json) with no agent process. It reports cpu-us/job, the
// process's user and system time in Run per job (getrusage: the fsyncs'
// kernel time included, the job's placement and check not), and
// user-us/job, its user time alone (the system's share follows the file
// system's state more than the code: ext4 after many deletions);
// -benchmem's allocations are per job, its placement and check included.
func (f *Fixture) BenchScriptJobs(b *testing.B) {
	script := func(summary string) map[string]any {
		return map[string]any{"provider": "script", "script": []any{map[string]any{"action": "COMPLETED", "summary": summary}}}
	}
	var cpu, user time.Duration
	var ru0, ru1 syscall.Rusage
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		id := "j" + strconv.Itoa(i)
		f.WriteJob(id, map[string]any{"agents": map[string]any{"worker": script("done"), "supervisor": script("ok")}})
		b.StartTimer()
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		if err := f.Runner.Run(context.Background(), id); err != nil {
			b.Fatal(err)
		}
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		b.StopTimer()
		u := time.Duration(syscall.TimevalToNsec(ru1.Utime) - syscall.TimevalToNsec(ru0.Utime))
		user += u
		cpu += u + time.Duration(syscall.TimevalToNsec(ru1.Stime)-syscall.TimevalToNsec(ru0.Stime))
		if m := f.Load(id); m.Status != "SUCCESS" || m.Metrics.AgentCalls != 2 {
			b.Fatalf("job %s: %s after %d calls (%s)", id, m.Status, m.Metrics.AgentCalls, m.Run.Reason)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/job")
	b.ReportMetric(float64(user.Microseconds())/float64(b.N), "user-us/job")
}

// SelfCopy copies this test binary into a new folder that every user may
// enter, as name, and returns its path: a test that runs it as another
// user (nobody) cannot reach the go tool's own folder. Removed when the
// test ends.
func SelfCopy(t testing.TB, name string) string {
	t.Helper()
	bin, err := os.MkdirTemp("", "logist-self-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(bin) }) // best effort: a temporary folder
	self, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close() //nolint:errcheck // read-only
	exe := filepath.Join(bin, name)
	out, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, self); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// userNSChild is set in the environment of a test re-run by
// InUserNamespace: the run that plays the test's body.
const userNSChild = "LOGIST_TEST_USERNS_CHILD"

// InUserNamespace re-runs the calling test (t.Name(), a top-level test) in
// a user namespace of its own as uid and gid 1000 there (this user
// outside), keeping only the capabilities caps: a user a file's or
// folder's mode holds back, as it does logistd's user, although the
// machine runs the tests as root. It reports whether this run is that
// child, which then plays the test's body; the parent waits for it and
// passes, fails with its output, or, where no user namespace can be made,
// skips loudly (fails under CI=true). why says what the test needs the
// namespace for, for the skip.
func InUserNamespace(t *testing.T, why string, caps ...uintptr) (child bool) {
	t.Helper()
	if os.Getenv(userNSChild) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), userNSChild+"="+t.Name())
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 1000, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 1000, HostID: os.Getgid(), Size: 1}},
		Credential:  &syscall.Credential{Uid: 1000, Gid: 1000, NoSetGroups: true},
		AmbientCaps: caps,
	}
	out, err := cmd.CombinedOutput()
	var start *os.PathError // fork/exec: no user namespace to be had
	if errors.As(err, &start) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("a user namespace is needed for this test (%s): %v", why, err)
		}
		t.Skipf("SKIPPED (loud): no user namespace (%s): %v", why, err)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("in a user namespace: %v\n%s", err, out)
	}
	return false
}
