package runner

import (
	"errors"
	"os"
	"strings"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
)

// checkPrograms stops a job that is being taken up (PENDING: new, resumed
// or rolled back) whose command agents name a program the daemon cannot
// start, or whose agents the metering proxy would refuse (an unpriced http
// model, agent.CheckPrices), or whose network allowlist names a loopback
// destination: INTERVENTION_REQUIRED with AGENT_CONFIG and a reason naming the
// field, before any call is recorded or paid for. A steward fixes it with
// logist set and resumes. It returns nil when every program is there.
func (e *Engine) checkPrograms(tx *jobtx.Tx) *outcome {
	c := agent.ProgramCheck{LookPath: e.LookPath, Where: "logistd's PATH (" + os.Getenv("PATH") + ")", Workspace: tx.Store().Workspace(tx.ID),
		Metered: e.Meter != nil}
	es := c.Check("", tx.M)
	if len(es) == 0 {
		return nil
	}
	parts := make([]string, len(es))
	for i, p := range es {
		parts[i] = p.Pointer + ": " + p.Reason
	}
	reason := "agent configuration: " + strings.Join(parts, "; ")
	return &outcome{code: codes.AgentConfig,
		logs:       []logEntry{{code: codes.AgentConfig, actor: "SYSTEM", msg: reason, record: true}},
		transition: &transition{lifecycle.EvAgentFailed, lifecycle.InterventionRequired, "", "SYSTEM", reason}}
}

// containment resolves the job's sandbox setting to its executor. A job
// whose layer does not work on this host stops (INTERVENTION_REQUIRED,
// SANDBOX_UNAVAILABLE, the reason naming what is missing) before any call
// is recorded or paid for: never an uncontained run it did not ask for.
// The layer it gets is kept in run.sandbox (status, list, metrics).
func (e *Engine) containment(tx *jobtx.Tx) (agent.Executor, *outcome) {
	if e.Contain == nil {
		return nil, nil
	}
	ex, err := e.Contain.For(tx.M)
	if err != nil {
		code := codes.SandboxUnavailable
		if ae, ok := agent.AsError(err); ok {
			code = ae.Code
			err = errors.New(ae.Msg)
		}
		reason := "sandbox: " + err.Error()
		return nil, &outcome{code: code,
			logs:       []logEntry{{code: code, actor: "SYSTEM", msg: reason, record: true}},
			transition: &transition{lifecycle.EvAgentFailed, lifecycle.InterventionRequired, "", "SYSTEM", reason}}
	}
	if tx.M.Status == lifecycle.Pending {
		tx.M.Run.Sandbox = ex.Layer() // committed with the start
	}
	return ex, nil
}
