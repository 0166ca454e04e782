package runner

import (
	"sync"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/workflow"
)

// The call a job is expected to make next, told to the agent of the call
// before it (agent.Request.Next): a contained command agent starts that
// call's sandbox ahead of it (a spare, internal/agent/spare.go), and one
// that is told none starts nothing. Only the engine knows the phase graph
// and where the job's answers have led, so it alone predicts; the agent
// package only builds the predicted call's run as that call would. A
// prediction is never trusted: a call whose sandbox is not the one
// started ahead starts its own.
//
// The expected answer of a phase is the one it gave last in this run
// (where it led: a supervisor that sent the work back once is expected to
// again, the 200-call chains of make bench's scenario 2), else COMPLETED.
// Where that answer leads is workflow.Decide's to say, as for a real
// answer: a terminal ends the run (no next call); a phase Logist plays
// itself has no agent call (its effect works); any other phase is
// expected to call its role's agent (a phase's effect may yet skip it or
// ask for turns: a wrong guess costs one spare, and the executor stops
// starting them for a job after three in a row, sandbox.spareMisses).

// ledTo remembers, per job whose run goes on, where each phase's last
// answer led ("" = the run stopped there).
type ledTo struct {
	mu   sync.Mutex
	jobs map[string]map[string]string
}

// noteLed records where phase's answer led job id's run, as m says after
// it: the phase m is in, or "" when the run stopped.
func (e *Engine) noteLed(id, phase string, m *manifest.Manifest) {
	to := ""
	if m.Status.Active() {
		to = m.Phase()
	}
	e.led.mu.Lock()
	defer e.led.mu.Unlock()
	if e.led.jobs == nil {
		e.led.jobs = map[string]map[string]string{}
	}
	if e.led.jobs[id] == nil {
		e.led.jobs[id] = map[string]string{}
	}
	e.led.jobs[id][phase] = to
}

// forgetLed drops what job id's run learnt: its run has ended.
func (e *Engine) forgetLed(id string) {
	e.led.mu.Lock()
	defer e.led.mu.Unlock()
	delete(e.led.jobs, id)
}

// lastLed is where phase's last answer in job id's run led, if it has
// answered in this run.
func (e *Engine) lastLed(id, phase string) (string, bool) {
	e.led.mu.Lock()
	defer e.led.mu.Unlock()
	to, ok := e.led.jobs[id][phase]
	return to, ok
}

// nextCall is the call expected after c, prepared in tx: the agent that
// plays it and its phase and role, or nil when none is expected (the
// expected answer ends the run, or leads to a phase Logist plays itself).
// Only a contained command agent's call (not a preset's) is told: no
// other starts anything ahead.
func (e *Engine) nextCall(tx *jobtx.Tx, wf *workflow.Workflow, c *call) *agent.NextCall {
	if c.exec == nil || c.exec.Layer() == agent.LayerNone || c.work != nil || c.perr != nil {
		return nil
	}
	m := tx.M
	if cfg := m.Agents[c.role]; cfg.Provider != "command" || cfg.Command == nil || cfg.Command.Preset != "" {
		return nil
	}
	next, seen := e.lastLed(tx.ID, c.phase)
	if !seen {
		d, err := workflow.Decide(wf, workflow.Case{Phase: c.phase, Role: c.role, Action: workflow.ActionCompleted,
			Retries: m.Run.PhaseRetries, MaxRetries: m.MaxRetries()})
		if err != nil || !d.To.Active() {
			return nil
		}
		next = d.Phase
	}
	ph, ok := wf.Phases[next]
	if !ok || ph.Role == workflow.RoleLogist {
		return nil
	}
	prov, err := e.providerFor(m, ph.Role)
	if err != nil {
		return nil
	}
	return &agent.NextCall{Provider: prov, Phase: next, Role: ph.Role}
}
