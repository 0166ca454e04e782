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

// Budgets: a job's cost and time budgets are enforced before every call
// (so a budget is overshot by at most one call), and a call's deadline is
// what is left of the time budget when that is less than its timeout.

// callDeadline is the smaller of the role's call timeout and what is left
// of the job's time budget.
func callDeadline(m *manifest.Manifest, role string) (time.Duration, bool) {
	d := m.CallTimeout(role)
	if b := m.TimeBudget(); b > 0 {
		left := b - time.Duration(m.Metrics.CumulativeTimeSeconds*float64(time.Second))
		if left < d {
			return max(left, time.Millisecond), true
		}
	}
	return d, false
}

// overBudget halts a job at or over its cost or time budget (nil: within
// both).
func overBudget(tx *jobtx.Tx) *outcome {
	m := tx.M
	switch {
	case m.OverCost():
		o := costHalted(tx)
		return &o
	case m.OverTime():
		reason := fmt.Sprintf("time %.1fs reached the budget of %.1f minutes; raise it with logist resume %s --time-threshold-minutes M", m.Metrics.CumulativeTimeSeconds, *m.TimeThresholdMinutes, tx.ID)
		return &outcome{code: codes.TimeBudget, transition: &transition{lifecycle.EvTimeExceeded, lifecycle.HaltedTime, "", "SYSTEM", reason}}
	}
	return nil
}

// costHalted halts a job whose cost budget is spent (HALTED_COST).
func costHalted(tx *jobtx.Tx) outcome {
	m := tx.M
	reason := fmt.Sprintf("cost %.2f cents reached the budget of %.2f cents; raise it with logist resume %s --cost-threshold CENTS", m.Metrics.CumulativeCost, *m.CostThreshold, tx.ID)
	return outcome{code: codes.CostBudget, transition: &transition{lifecycle.EvCostExceeded, lifecycle.HaltedCost, "", "SYSTEM", reason}}
}

// costLeft is what the job's cost budget has left, as the metering proxy
// debits it during the step's calls (nil: the job has no cost budget).
func costLeft(m *manifest.Manifest) agent.Budget {
	if m.CostThreshold == nil {
		return nil
	}
	return agent.NewBudget((*m.CostThreshold - m.Metrics.CumulativeCost) / 100)
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
