package runner

import (
	"os"
	"strings"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
)

// checkPrograms stops a job that is being taken up (PENDING: new, resumed
// or rolled back) whose command agents name a program the daemon cannot
// start: INTERVENTION_REQUIRED with AGENT_CONFIG and a reason naming the
// field, before any call is recorded or paid for. A steward fixes it with
// logist set and resumes. It returns nil when every program is there.
func (e *Engine) checkPrograms(tx *jobtx.Tx) *outcome {
	c := agent.ProgramCheck{LookPath: e.LookPath, Where: "logistd's PATH (" + os.Getenv("PATH") + ")", Workspace: tx.Store().Workspace(tx.ID)}
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
