package steward_test

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
	"testing"
	"time"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/steward"
)

type fixture struct {
	t      *testing.T
	Dir    string
	Env    *jobtx.Env
	St     *steward.Steward
	Engine *runner.Engine
}

func testLogger() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	env := &jobtx.Env{Store: jobstore.New(dir), Logger: testLogger(), Obs: jobtx.Nop{}}
	e := runner.NewEngine(env, builtins.Effects())
	e.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	return &fixture{t: t, Dir: dir, Env: env, St: steward.New(env, e.Effects), Engine: e}
}

// manifestJSON renders a manifest for job id with two scripted roles.
func manifestJSON(t *testing.T, id string, m map[string]any) []byte {
	t.Helper()
	if _, ok := m["job_id"]; !ok && id != "" {
		m["job_id"] = id
	}
	if _, ok := m["task_description"]; !ok {
		m["task_description"] = "Test task."
	}
	if _, ok := m["agents"]; !ok {
		m["agents"] = map[string]any{"worker": script(step("COMPLETED", "done")), "supervisor": script(step("COMPLETED", "ok"))}
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

func (f *fixture) writeJob(id string, m map[string]any) {
	f.t.Helper()
	jd := filepath.Join(f.Dir, id)
	if err := os.MkdirAll(jd, 0o700); err != nil {
		f.t.Fatal(err)
	}
	p := filepath.Join(jd, jobstore.ManifestFile)
	if err := os.WriteFile(p, manifestJSON(f.t, id, m), 0o600); err != nil {
		f.t.Fatal(err)
	}
	if _, err := manifest.ReadFile(p); err != nil {
		f.t.Fatalf("test manifest %s is invalid: %v", id, err)
	}
}

// withStatus is a manifest already in status st at phase (or none).
func withStatus(st, phase string) map[string]any {
	m := map[string]any{"status": st}
	if phase != "" {
		m["current_phase"] = phase
	}
	return m
}

func script(steps ...map[string]any) map[string]any {
	return map[string]any{"provider": "script", "script": steps}
}

func step(action, summary string) map[string]any {
	return map[string]any{"action": action, "summary": summary}
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
	recs, err := history.ReadAll(filepath.Join(f.Dir, id))
	if err != nil {
		f.t.Fatalf("history of %s: %v", id, err)
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

// snapshot is a job's manifest and history bytes, to prove a refused
// command changed nothing.
func (f *fixture) snapshot(id string) string {
	f.t.Helper()
	m, err := os.ReadFile(filepath.Join(f.Dir, id, jobstore.ManifestFile))
	if err != nil {
		f.t.Fatal(err)
	}
	h, err := os.ReadFile(history.Path(filepath.Join(f.Dir, id)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		f.t.Fatal(err)
	}
	return string(m) + "\x00" + string(h)
}

func isOutOfOrder(err error) (*jobtx.OutOfOrderError, bool) {
	var e *jobtx.OutOfOrderError
	ok := errors.As(err, &e)
	return e, ok
}

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

func readPID(p string) (int, bool) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}
