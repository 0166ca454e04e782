package runner

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/testkit"
)

// fixture is testkit's jobs folder with an engine whose backoff sleeps
// are recorded instead of slept.
type fixture struct {
	*testkit.Fixture
	Engine *Engine

	mu     sync.Mutex
	sleeps []time.Duration
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	k := testkit.New(t)
	f := &fixture{Fixture: k, Engine: NewEngine(k.Env, builtins.Effects())}
	k.Runner = f.Engine
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

// job is a manifest with the two supervised roles.
func job(worker, supervisor map[string]any) map[string]any {
	return map[string]any{"agents": map[string]any{"worker": worker, "supervisor": supervisor}}
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
func okSupervisor() map[string]any { return testkit.Script(testkit.Step("COMPLETED", "Looks good.")) }

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
