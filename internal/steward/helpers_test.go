package steward_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
)

// fixture is testkit's jobs folder with an engine that does not sleep
// and a steward on the same Env.
type fixture struct {
	*testkit.Fixture
	St     *steward.Steward
	Engine *runner.Engine
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	k := testkit.New(t)
	e := runner.NewEngine(k.Env, builtins.Effects())
	e.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	k.Runner = e
	return &fixture{Fixture: k, St: steward.New(k.Env, e.Effects), Engine: e}
}

// withStatus is a manifest already in status st at phase (or none).
func withStatus(st, phase string) map[string]any {
	m := map[string]any{"status": st}
	if phase != "" {
		m["current_phase"] = phase
	}
	return m
}

// snapshot is a job's manifest and history bytes, to prove a refused
// command changed nothing.
func (f *fixture) snapshot(id string) string {
	f.T.Helper()
	m, err := os.ReadFile(filepath.Join(f.Dir, id, jobstore.ManifestFile))
	if err != nil {
		f.T.Fatal(err)
	}
	h, err := os.ReadFile(history.Path(filepath.Join(f.Dir, id)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		f.T.Fatal(err)
	}
	return string(m) + "\x00" + string(h)
}

func isOutOfOrder(err error) (*jobtx.OutOfOrderError, bool) {
	var e *jobtx.OutOfOrderError
	ok := errors.As(err, &e)
	return e, ok
}
