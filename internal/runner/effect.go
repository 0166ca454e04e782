package runner

import (
	"context"
	"fmt"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/workflow"
)

// Effect gives a workflow's phase meaning beyond following its answer's
// action: the protocol workflow records signed events, runs the tools the
// Executor asked for and verifies the trace. A workflow names an effect per
// phase in its data; the engine finds it in Engine.Effects.
type Effect interface {
	// Prepare runs under the job lock before the phase is played.
	Prepare(tx *jobtx.Tx, phase string) (*workflow.Prep, error)
	// Finish runs under the job lock on a valid answer (base contract and
	// the phase's schema; obj is the answer object). It must not append:
	// the engine appends Outcome.Records after the answer's response.
	Finish(tx *jobtx.Tx, phase string, ans *response.Answer, obj map[string]any) (*workflow.Outcome, error)
}

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
func (e *Engine) effectFor(ph workflow.Phase) (Effect, error) {
	if ph.Effect == "" {
		return nil, nil
	}
	eff, ok := e.Effects[ph.Effect]
	if !ok {
		return nil, fmt.Errorf("effect %q is not known to this logistd", ph.Effect)
	}
	return eff, nil
}

// workflowFailed stops a workflow that cannot go on: the job waits for a
// steward with the failure's code and reason.
func workflowFailed(role string, f *workflow.Failure) outcome {
	return outcome{code: f.Code, logs: []logEntry{{code: f.Code, actor: role, msg: f.Reason}},
		transition: &transition{lifecycle.EvWorkflowFailed, lifecycle.InterventionRequired, "", "SYSTEM", f.Reason}}
}

// skipped ends a phase without playing it (its effect found nothing to
// do, or a turn step's outcome ended it) and follows the outcome.
func skipped(wf *workflow.Workflow, phase, name, state string) (outcome, error) {
	target, err := wf.Next(phase, name)
	if err != nil {
		return outcome{}, err
	}
	o := outcome{state: state}
	switch target {
	case workflow.TargetSuccess:
		o.transition = &transition{lifecycle.EvSucceed, lifecycle.Success, "", "SYSTEM", "phase " + phase + " had nothing to do"}
	case workflow.TargetIntervention:
		o.transition = &transition{lifecycle.EvStuck, lifecycle.InterventionRequired, "", "SYSTEM", "phase " + phase + " had nothing to do and leads to a steward"}
	default:
		o.transition = &transition{lifecycle.EvAdvance, wf.Phases[target].Status, target, "SYSTEM", "phase " + phase + " had nothing to do"}
	}
	o.more = o.transition.to.Active()
	return o, nil
}
