package runner

import (
	"context"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/effect"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/workflow"
)

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
	return e.Effects.Lookup(ph.Effect)
}

// workflowFailed stops a workflow that cannot go on: the job waits for a
// steward with the failure's code and reason.
func workflowFailed(role string, f *workflow.Failure) outcome {
	return outcome{code: f.Code, logs: []logEntry{{code: f.Code, actor: role, msg: f.Reason}},
		transition: &transition{lifecycle.EvWorkflowFailed, lifecycle.InterventionRequired, "", "SYSTEM", f.Reason}}
}

// skipped ends a phase without playing it (its effect found nothing to
// do, or a turn step's outcome ended it) and follows the outcome; why is
// the effect's reason ("": the phase had nothing to do).
func skipped(wf *workflow.Workflow, phase, name, state, why string) (outcome, error) {
	target, err := wf.Next(phase, name)
	if err != nil {
		return outcome{}, err
	}
	if why == "" {
		why = "phase " + phase + " had nothing to do"
	}
	o := outcome{state: state}
	switch target {
	case workflow.TargetSuccess:
		o.transition = &transition{lifecycle.EvSucceed, lifecycle.Success, "", "SYSTEM", why}
	case workflow.TargetIntervention:
		o.transition = &transition{lifecycle.EvStuck, lifecycle.InterventionRequired, "", "SYSTEM", why + " and leads to a steward"}
	default:
		o.transition = &transition{lifecycle.EvAdvance, wf.Phases[target].Status, target, "SYSTEM", why}
	}
	o.more = o.transition.to.Active()
	return o, nil
}
