package steward_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/internal/effect"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
	"github.com/logist/logist/internal/workflow"
)

// hooked is an effect with the steward's hooks, recording how it was
// called; plain is one without them.
type hooked struct {
	plain
	halts   []string // by + ": " + reason
	haltErr error
	decided []deliberation.Input
}

type plain struct{}

func (plain) Prepare(*jobtx.Tx, string) (*workflow.Prep, error) { return &workflow.Prep{}, nil }
func (plain) Finish(*jobtx.Tx, string, *response.Answer, map[string]any) (*workflow.Outcome, error) {
	return &workflow.Outcome{}, nil
}

func (h *hooked) Halt(tx *jobtx.Tx, by, reason string) ([]*history.Record, string, error) {
	h.halts = append(h.halts, by+": "+reason)
	if h.haltErr != nil {
		return nil, "", h.haltErr
	}
	return []*history.Record{{Type: history.TypeMessage, Phase: tx.M.Phase(), Message: json.RawMessage(`{"type":"HALTED"}`)}}, "stopped", nil
}

func (h *hooked) Decide(tx *jobtx.Tx, in deliberation.Input) ([]*history.Record, string, error) {
	h.decided = append(h.decided, in)
	return []*history.Record{{Type: history.TypeMessage, Phase: tx.M.Phase(), Message: json.RawMessage(`{"type":"DECISION"}`)}}, "decided", nil
}

// effectJob is a job waiting in phase "work", whose effect is named eff.
func effectJob(f *fixture, eff, code string) {
	f.T.Helper()
	m := withStatus("INTERVENTION_REQUIRED", "work")
	m["workflow"] = map[string]any{"name": "hooks", "start": "work", "phases": map[string]any{
		"work": map[string]any{"role": "worker", "effect": eff,
			"on": map[string]any{"COMPLETED": "SUCCESS", "RETRY": "work", "STUCK": "INTERVENTION_REQUIRED"}}}}
	if code != "" {
		m["run"] = map[string]any{"error_code": code}
	}
	f.WriteJob("j", m)
}

// stewardWith is the fixture's steward handed a registry of its own.
func stewardWith(f *fixture, effects effect.Registry) *steward.Steward {
	return &steward.Steward{Env: f.Env, User: "ada", Effects: effects}
}

func TestHaltRunsThePhaseEffectsHaltHook(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := &hooked{}
	effectJob(f, "test.hooked", "")
	m, err := stewardWith(f, effect.Registry{"test.hooked": h}).Halt("j", "enough")
	if err != nil {
		t.Fatal(err)
	}
	if len(h.halts) != 1 || h.halts[0] != "ada: enough" {
		t.Errorf("halt hook calls %q, want one by ada for \"enough\"", h.halts)
	}
	if m.Status != lifecycle.Canceled || m.Run.WorkflowState != "stopped" {
		t.Errorf("status %s, workflow state %q; want CANCELED, the hook's \"stopped\"", m.Status, m.Run.WorkflowState)
	}
	stored := f.Load("j")
	if stored.Run.WorkflowState != "stopped" {
		t.Errorf("stored workflow state %q", stored.Run.WorkflowState)
	}
	// The hook's records follow the halt's own, before the transition.
	var order []string
	for _, r := range f.Records("j") {
		order = append(order, r.Type)
	}
	if got, want := strings.Join(order, " "), "steward message transition"; got != want {
		t.Errorf("records %s, want %s", got, want)
	}
}

func TestHaltWithoutAHookRecordsNothingElse(t *testing.T) {
	t.Parallel()
	for name, effects := range map[string]effect.Registry{
		"effect without the hook": {"test.hooked": plain{}},
		"effect unknown here":     {},
		"no registry":             nil,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			effectJob(f, "test.hooked", "")
			m, err := stewardWith(f, effects).Halt("j", "enough")
			if err != nil {
				t.Fatal(err)
			}
			if m.Status != lifecycle.Canceled || m.Run.WorkflowState != "" {
				t.Errorf("status %s, workflow state %q", m.Status, m.Run.WorkflowState)
			}
			if n := len(testkit.OfType(f.Records("j"), history.TypeMessage)); n != 0 {
				t.Errorf("%d records of a hook", n)
			}
		})
	}
	t.Run("job in no phase", func(t *testing.T) {
		f := newFixture(t)
		h := &hooked{}
		f.WriteJob("j", withStatus("PENDING", ""))
		if _, err := stewardWith(f, effect.Registry{"test.hooked": h}).Halt("j", "enough"); err != nil {
			t.Fatal(err)
		}
		if len(h.halts) != 0 {
			t.Errorf("hook called for a job in no phase: %q", h.halts)
		}
	})
}

func TestHaltHookErrorChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := &hooked{haltErr: errors.New("disk on fire")}
	effectJob(f, "test.hooked", "")
	before := f.snapshot("j")
	if _, err := stewardWith(f, effect.Registry{"test.hooked": h}).Halt("j", "enough"); !errors.Is(err, h.haltErr) {
		t.Fatalf("err = %v, want the hook's", err)
	}
	if f.snapshot("j") != before {
		t.Errorf("a failed halt changed the job")
	}
}

func TestDecideGoesToThePhaseEffect(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := &hooked{}
	effectJob(f, "test.hooked", "AWAITING_STEWARD")
	in := deliberation.Input{Kind: "pm_decision", Content: map[string]any{"decision": "approve"}}
	m, err := stewardWith(f, effect.Registry{"test.hooked": h}).Decide("j", in)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.decided) != 1 || h.decided[0].Kind != "pm_decision" || h.decided[0].From != "ada" {
		t.Errorf("decisions %+v, want one pm_decision from ada", h.decided)
	}
	if m.Status != lifecycle.Pending || m.Run.WorkflowState != "decided" {
		t.Errorf("status %s, workflow state %q", m.Status, m.Run.WorkflowState)
	}
	if n := len(testkit.OfType(f.Records("j"), history.TypeMessage)); n != 1 {
		t.Errorf("%d records of the decision, want 1", n)
	}
}

func TestDecideRefusedWithoutADecider(t *testing.T) {
	t.Parallel()
	for name, effects := range map[string]effect.Registry{
		"effect without the hook": {"test.hooked": plain{}},
		"effect unknown here":     {},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			effectJob(f, "test.hooked", "AWAITING_STEWARD")
			before := f.snapshot("j")
			_, err := stewardWith(f, effects).Decide("j", deliberation.Input{Kind: "pm_decision"})
			if e, ok := isOutOfOrder(err); !ok || !strings.Contains(e.Want, "does not play a deliberation (workflow hooks)") {
				t.Errorf("err = %v, want out of order: no deliberation", err)
			}
			if f.snapshot("j") != before {
				t.Errorf("a refused decision changed the job")
			}
		})
	}
}
