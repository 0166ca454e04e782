package runner

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/manifest"
)

// fixture is a temporary jobs folder with an engine whose backoff sleeps
// are recorded instead of slept.
type fixture struct {
	t      *testing.T
	Dir    string
	Env    *jobtx.Env
	Engine *Engine

	mu     sync.Mutex
	sleeps []time.Duration
}

func testLogger() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	env := &jobtx.Env{Store: jobstore.New(dir), Logger: testLogger(), Obs: jobtx.Nop{}}
	f := &fixture{t: t, Dir: dir, Env: env, Engine: NewEngine(env, builtins.Effects())}
	f.Engine.Sleep = func(ctx context.Context, d time.Duration) error {
		f.mu.Lock()
		f.sleeps = append(f.sleeps, d)
		f.mu.Unlock()
		return ctx.Err()
	}
	return f
}

func (f *fixture) backoffs() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.sleeps...)
}

// writeJob writes jobs/<id>/job.json from m (job_id, task_description and
// metrics are filled in when missing) and checks it is a valid manifest.
func (f *fixture) writeJob(id string, m map[string]any) {
	f.t.Helper()
	writeJobIn(f.t, f.Dir, id, m)
}

func writeJobIn(t *testing.T, dir, id string, m map[string]any) {
	t.Helper()
	if _, ok := m["job_id"]; !ok {
		m["job_id"] = id
	}
	if _, ok := m["task_description"]; !ok {
		m["task_description"] = "Test task for " + id + "."
	}
	if _, ok := m["metrics"]; !ok {
		m["metrics"] = map[string]any{"cumulative_cost": 0, "cumulative_time_seconds": 0}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	jd := filepath.Join(dir, id)
	if err := os.MkdirAll(jd, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(jd, jobstore.ManifestFile)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := manifest.ReadFile(p); err != nil {
		t.Fatalf("test manifest %s is invalid: %v", id, err)
	}
}

func (f *fixture) load(id string) *manifest.Manifest {
	f.t.Helper()
	m, err := f.Env.Store.Load(id)
	if err != nil {
		f.t.Fatalf("load %s: %v", id, err)
	}
	return m
}

func (f *fixture) run(id string) {
	f.t.Helper()
	if err := f.Engine.Run(context.Background(), id); err != nil {
		f.t.Fatalf("Run(%s): %v", id, err)
	}
}

func (f *fixture) records(id string) []history.Record {
	f.t.Helper()
	return readRecords(f.t, filepath.Join(f.Dir, id))
}

func readRecords(t *testing.T, jobDir string) []history.Record {
	t.Helper()
	recs, err := history.ReadAll(jobDir)
	if err != nil {
		t.Fatalf("read history of %s: %v", jobDir, err)
	}
	return recs
}

func ofType(recs []history.Record, typ string) []history.Record {
	var out []history.Record
	for _, r := range recs {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

// job is a manifest with the two supervised roles.
func job(worker, supervisor map[string]any) map[string]any {
	return map[string]any{"agents": map[string]any{"worker": worker, "supervisor": supervisor}}
}

func script(steps ...map[string]any) map[string]any {
	return map[string]any{"provider": "script", "script": steps}
}

func step(action, summary string, evidence ...string) map[string]any {
	s := map[string]any{"action": action, "summary": summary}
	if len(evidence) > 0 {
		s["evidence_files"] = evidence
	}
	return s
}

func rawStep(raw string) map[string]any { return map[string]any{"raw": raw} }

func command(timeout float64, argv ...string) map[string]any {
	a := map[string]any{"provider": "command", "command": map[string]any{"argv": argv}}
	if timeout > 0 {
		a["timeout_seconds"] = timeout
	}
	return a
}

// okSupervisor always approves.
func okSupervisor() map[string]any { return script(step("COMPLETED", "Looks good.")) }

// providerFunc is a fake agent.Provider.
type providerFunc func(ctx context.Context, req *agent.Request) (*agent.Result, error)

func (p providerFunc) Call(ctx context.Context, req *agent.Request) (*agent.Result, error) {
	return p(ctx, req)
}

func (f *fixture) fake(p providerFunc) {
	f.Engine.NewProvider = func(manifest.AgentConfig) (agent.Provider, error) { return p, nil }
}

func answer(action, summary string, evidence ...string) *agent.Result {
	if evidence == nil {
		evidence = []string{}
	}
	b, _ := json.Marshal(map[string]any{"action": action, "evidence_files": evidence, "summary_for_supervisor": summary})
	return &agent.Result{Raw: b}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processGone reports whether pid no longer runs: it does not exist, or it
// is a zombie (killed, waiting to be reaped by a parent that is not us).
func processGone(pid int) bool {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, rerr := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if rerr != nil {
		return errors.Is(rerr, os.ErrNotExist)
	}
	// /proc/<pid>/stat: "pid (comm) S ..."; comm may contain spaces.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}

// tryPID reads a pid file; false if it is missing or not (yet) written.
func tryPID(p string) (int, bool) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}
