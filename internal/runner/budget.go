package runner

import (
	"fmt"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// Budgets: a job's cost, time and calls budgets (manifest.Budgets: its
// own, else the daemon's defaults in Engine.Defaults) are enforced before
// every call (so a budget is overshot by at most one call, or one fan-out
// step), and a call's deadline is what is left of the time budget when that
// is less than its timeout.

// defaults are the daemon's defaults that apply to m: those of the budgets
// its manifest does not set (nil: none).
func (e *Engine) defaults(m *manifest.Manifest) *manifest.Budgets { return m.Unset(e.Defaults) }

// callDeadline is the smaller of the role's call timeout and what is left
// of the job's time budget (under the defaults d).
func callDeadline(m *manifest.Manifest, d *manifest.Budgets, role string) (time.Duration, bool) {
	t := m.CallTimeout(role)
	if b := m.TimeBudgetUnder(d); b > 0 {
		left := b - manifest.Duration(m.Metrics.CumulativeTimeSeconds, time.Second)
		if left < t {
			return max(left, time.Millisecond), true
		}
	}
	return t, false
}

// overBudget halts a job at or over one of its budgets (nil: within them
// all). It first records in the manifest which defaults the job runs under
// (run.default_budgets), so that status and resume see the limits this
// decision used.
func (e *Engine) overBudget(tx *jobtx.Tx) *outcome {
	m := tx.M
	d := e.defaults(m)
	m.Run.DefaultBudgets = d
	b := m.Exhausted(d)
	if b == nil {
		return nil
	}
	from := ""
	if b.Default {
		from = " (logistd's default: the manifest sets none)"
	}
	switch b.Kind {
	case manifest.BudgetCost:
		o := e.costHalted(tx)
		return &o
	case manifest.BudgetTime:
		reason := fmt.Sprintf("time %.1fs reached the budget of %s%s; raise it with logist resume %s --time-threshold-minutes M", m.Metrics.CumulativeTimeSeconds, b.LimitText(), from, tx.ID)
		return &outcome{code: codes.TimeBudget, transition: &transition{lifecycle.EvTimeExceeded, lifecycle.HaltedTime, "", "SYSTEM", reason}}
	}
	reason := fmt.Sprintf("%d agent calls reached the calls budget of %.0f%s; raise it with logist resume %s --max-agent-calls N", m.Metrics.AgentCalls, b.Limit, from, tx.ID)
	return &outcome{code: codes.CallBudget, transition: &transition{lifecycle.EvCallsExceeded, lifecycle.InterventionRequired, "", "SYSTEM", reason}}
}

// timeLimit is the time budget of m under the defaults d, in minutes, and
// where it comes from, for a message.
func timeLimit(m *manifest.Manifest, d *manifest.Budgets) string {
	for _, b := range m.Budgets(d) {
		if b.Kind == manifest.BudgetTime && b.Default {
			return b.LimitText() + " (logistd's default)"
		} else if b.Kind == manifest.BudgetTime {
			return b.LimitText()
		}
	}
	return "none"
}

// costHalted halts a job whose cost budget is spent (HALTED_COST): before
// a call (overBudget), or when the metering proxy cut a call at the budget.
func (e *Engine) costHalted(tx *jobtx.Tx) outcome {
	m := tx.M
	limit, from := 0.0, ""
	for _, b := range m.Budgets(e.defaults(m)) {
		if b.Kind == manifest.BudgetCost {
			limit = b.Limit
			if b.Default {
				from = " (logistd's default: the manifest sets none)"
			}
		}
	}
	reason := fmt.Sprintf("cost %.2f cents reached the budget of %.2f cents%s; raise it with logist resume %s --cost-threshold CENTS", m.Metrics.CumulativeCost, limit, from, tx.ID)
	return outcome{code: codes.CostBudget, transition: &transition{lifecycle.EvCostExceeded, lifecycle.HaltedCost, "", "SYSTEM", reason}}
}

// costLeft is what the job's cost budget (its own, else the default in d)
// has left, as the metering proxy debits it during the step's calls (nil:
// the job has no cost budget).
func costLeft(m *manifest.Manifest, d *manifest.Budgets) agent.Budget {
	for _, b := range m.Budgets(d) {
		if b.Kind == manifest.BudgetCost {
			return agent.NewBudget((b.Limit - m.Metrics.CumulativeCost) / 100)
		}
	}
	return nil
}

// account adds what a call cost, in money and agent time, to the job: it
// was spent whatever the call's outcome.
func account(m *manifest.Manifest, costUSD float64, elapsed time.Duration) {
	m.Metrics.CumulativeCost += costUSD * 100
	m.Metrics.CumulativeTimeSeconds += elapsed.Seconds()
}

// recordMetered marks a response whose cost is the metering proxy's and
// keeps the agent's own report beside it.
func recordMetered(resp *history.Response, out *agent.Result, err error) {
	var mt *agent.Metered
	if out != nil {
		mt = out.Metered
	} else if ae, ok := agent.AsError(err); ok {
		mt = ae.Metered
	}
	if mt != nil {
		resp.Metered, resp.ReportedCostUSD = true, mt.ReportedUSD
	}
}

// costDisagreement warns when an answer's agent reported a cost of its own
// that disagrees with the metering proxy's (agent.Metered.Disagreement):
// the proxy's figure is the cost of record, the warning goes into the
// response's warnings and the log. The one rule for supervised answers and
// deliberation turns alike.
func costDisagreement(resp *history.Response, out *agent.Result, actor string, attempt int) (logEntry, bool) {
	if out == nil || out.Metered == nil || out.Metered.Disagreement == "" {
		return logEntry{}, false
	}
	w := codes.CostDisagreement + ": the cost of record is the metering proxy's: " + out.Metered.Disagreement
	resp.Warnings = append(resp.Warnings, w)
	return logEntry{code: codes.CostDisagreement, actor: actor, attempt: attempt, msg: w}, true
}

// callCost is what a call reported it cost (an answer, or a failure that
// still cost money).
func callCost(out *agent.Result, err error) float64 {
	if out != nil {
		return out.CostUSD
	}
	if ae, ok := agent.AsError(err); ok {
		return ae.CostUSD
	}
	return 0
}
