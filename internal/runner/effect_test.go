package runner

import (
	"encoding/json"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/testkit"
	"github.com/logist/logist/internal/workflow"
)

// steps is an effect that prepares its phase with the next of its preps.
type steps struct{ preps []*workflow.Prep }

func (s *steps) Prepare(*jobtx.Tx, string) (*workflow.Prep, error) {
	p := s.preps[0]
	s.preps = s.preps[1:]
	return p, nil
}

func (s *steps) Finish(*jobtx.Tx, string, *response.Answer, map[string]any) (*workflow.Outcome, error) {
	return &workflow.Outcome{}, nil
}

// effectJob is a job whose one phase, played by Logist, has effect eff.
func effectJob(f *fixture, eff string) {
	f.WriteJob("j", map[string]any{"agents": map[string]any{"worker": okSupervisor()},
		"workflow": map[string]any{"name": "steps", "start": "work", "phases": map[string]any{
			"work": map[string]any{"role": "logist", "effect": eff,
				"on": map[string]any{"COMPLETED": "SUCCESS", "RETRY": "work", "STUCK": "INTERVENTION_REQUIRED"}}}}})
}

// A step that only records (CONTINUE) keeps the workflow's state it
// reports, as every other step does: the job shows where its workflow is
// even when it stops right after such a step.
func TestContinueStepKeepsItsState(t *testing.T) {
	f := newFixture(t)
	msg := &history.Record{Type: history.TypeMessage, Phase: "work", Role: "chair", Message: json.RawMessage(`{"type":"OPEN"}`)}
	f.Engine.Effects["test.steps"] = &steps{preps: []*workflow.Prep{
		{Skip: workflow.OutcomeContinue, Records: []*history.Record{msg}, State: "opened"},
		// The next step cannot go on: it reports no state of its own.
		{Fail: &workflow.Failure{Code: "GAME_FAILED", Reason: "the game broke"}},
	}}
	effectJob(f, "test.steps")
	f.Run("j")
	m := f.Load("j")
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != "GAME_FAILED" {
		t.Fatalf("job %s %s (%s)", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	if m.Run.WorkflowState != "opened" {
		t.Errorf("workflow_state = %q, want the CONTINUE step's %q", m.Run.WorkflowState, "opened")
	}
	if n := len(testkit.OfType(f.Records("j"), history.TypeMessage)); n != 1 {
		t.Errorf("%d message records, want the CONTINUE step's one", n)
	}
}
