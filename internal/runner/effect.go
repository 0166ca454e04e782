package runner

import (
	"context"
	"fmt"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/effect"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/workflow"
)

// CodeWorkflowEffect: a phase names an effect this Logist does not have.
const CodeWorkflowEffect = "WORKFLOW_EFFECT"

// work plays a phase Logist does itself, in place of an agent.
type work func(ctx context.Context) ([]byte, error)

func (w work) Call(ctx context.Context, _ *agent.Request) (*agent.Result, error) {
	b, err := w(ctx)
	if err != nil {
		return nil, err
	}
	return &agent.Result{Raw: b}, nil
}

// effectFor returns the phase's effect (nil if it has none).
func (e *Engine) effectFor(ph workflow.Phase) (effect.Effect, error) {
	if ph.Effect == "" {
		return nil, nil
	}
	eff, ok := e.Effects[ph.Effect]
	if !ok {
		return nil, fmt.Errorf("effect %q is not known to this logistd", ph.Effect)
	}
	return eff, nil
}

// failWorkflow stops a workflow that cannot go on: the job waits for a
// steward with the failure's code and reason.
func (e *Engine) failWorkflow(tx *jobtx.Tx, role string, f *workflow.Failure) error {
	tx.M.Run.ErrorCode = f.Code
	tx.LogError(f.Code, role, 0, f.Reason)
	if err := tx.Transition(lifecycle.EvWorkflowFailed, lifecycle.InterventionRequired, "", "SYSTEM", f.Reason); err != nil {
		return err
	}
	return tx.Commit()
}

// skipPhase ends a phase without playing it (its effect found nothing to
// do) and follows the outcome.
func (e *Engine) skipPhase(tx *jobtx.Tx, wf *workflow.Workflow, phase, outcome, state string) (stepResult, error) {
	target, err := wf.Next(phase, outcome)
	if err != nil {
		return stepResult{done: true}, err
	}
	if state != "" {
		tx.M.Run.WorkflowState = state
	}
	switch target {
	case workflow.TargetSuccess:
		err = tx.Transition(lifecycle.EvSucceed, lifecycle.Success, "", "SYSTEM", "phase "+phase+" had nothing to do")
	case workflow.TargetIntervention:
		err = tx.Transition(lifecycle.EvStuck, lifecycle.InterventionRequired, "", "SYSTEM", "phase "+phase+" had nothing to do and leads to a steward")
	default:
		err = tx.Transition(lifecycle.EvAdvance, wf.Phases[target].Status, target, "SYSTEM", "phase "+phase+" had nothing to do")
	}
	if err != nil {
		return stepResult{done: true}, err
	}
	if err := tx.Commit(); err != nil {
		return stepResult{done: true}, err
	}
	return stepResult{done: !tx.M.Status.Active()}, nil
}
