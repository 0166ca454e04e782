package clusterchaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/testkit"
)

var errDied = errors.New("the node died here (test)")

// TestProtocolWantsAtEveryCrashPoint runs the chaos run's protocol job
// on the engine, dying before its k-th history unit is durable (its
// appends fail from there on: nothing more is recorded, as when a node is
// SIGKILLed), then resumes it on a fresh engine — for every k until the
// job ends before dying. Wherever it died, it must end where protocolWants
// says from its history, and no tool intent may run twice. (A death after
// t1's start and before t2's used to end SUCCESS where the harness, seeing
// an interrupted run, said INTERVENTION_REQUIRED: protocol-002 of a chaos
// run.)
func TestProtocolWantsAtEveryCrashPoint(t *testing.T) {
	var kd kind
	for _, k := range kinds {
		if k.name == "protocol" {
			kd = k
		}
	}
	var m map[string]any
	if err := json.Unmarshal(kd.render("p", nil), &m); err != nil {
		t.Fatal(err)
	}
	ends := map[lifecycle.Status]int{}
	interruptedYetDone := 0
	for k := int64(1); ; k++ {
		f := testkit.New(t)
		var units atomic.Int64
		f.Env.History.Commit = func(u history.Unit) error {
			if units.Add(1) >= k {
				return errDied
			}
			return u.Write()
		}
		f.WriteJob("p", m)
		err := newEngine(f).Run(context.Background(), "p")
		died := errors.Is(err, errDied)
		if !died && err != nil {
			t.Fatalf("died before unit %d: %v", k, err)
		}
		f.Env.History.Commit = nil
		if err := newEngine(f).Run(context.Background(), "p"); err != nil {
			t.Fatalf("died before unit %d, then: %v", k, err)
		}
		b, err := os.ReadFile(history.Path(filepath.Join(f.Dir, "p")))
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
		end, want := f.Load("p").Status, protocolWants(lines)
		ends[end]++
		if end == lifecycle.Success && bytes.Contains(b, []byte("interrupted: Logist stopped during the run")) {
			interruptedYetDone++
		}
		if end != want {
			t.Errorf("died before unit %d: the job ended %s, protocolWants says %s", k, end, want)
			logHistory(t, "p", lines)
		}
		if r := reruns(lines); len(r) > 0 {
			t.Errorf("died before unit %d: tool intents %v ran more than once", k, r)
		}
		if !died {
			break
		}
	}
	// Both ends were met, and the case the harness once missed.
	if ends[lifecycle.Success] == 0 || ends[lifecycle.InterventionRequired] == 0 || interruptedYetDone == 0 {
		t.Errorf("ends %v, %d successes after an interrupted run: the crash points missed a case", ends, interruptedYetDone)
	}
}

func newEngine(f *testkit.Fixture) *runner.Engine {
	eng := runner.NewEngine(f.Env, builtins.Effects())
	eng.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	return eng
}
