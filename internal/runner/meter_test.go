package runner

import (
	"context"
	"strings"
	"testing"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/testkit"
)

// stubMeter is an agent.Meter the engine hands its calls; the fake
// provider reads the budget the step's context carries through it.
type stubMeter struct{ agent.Meter }

// A call the metering proxy cut because the job's budget was spent halts
// the job HALTED_COST at once (not a retry, not a steward question), its
// response recording the proxy's cost and BUDGET_SPENT. The call was
// given what the budget had left.
func TestMeteredBudgetCutHaltsCost(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	j := job(testkit.Script(testkit.Step("COMPLETED", "never")), okSupervisor())
	j["cost_threshold"] = 1.0 // cents
	j["metrics"] = map[string]any{"cumulative_cost": 0.4, "cumulative_time_seconds": 0}
	f.WriteJob("j", j)
	f.Engine.Meter = stubMeter{}
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		// What a metered provider does: the proxy debits the step's budget
		// as the stream flows, and cuts it once that is spent.
		b := agent.BudgetFrom(ctx)
		if b == nil {
			t.Error("the call got no budget")
			return nil, &agent.Error{Code: codes.APIError, Msg: "no budget"}
		}
		if left, ok := b.Debit(0); !ok || left < 0.00599 || left > 0.00601 {
			t.Errorf("budget left $%v %v, want $0.006", left, ok)
		}
		b.Debit(0.007)
		return nil, &agent.Error{Code: codes.BudgetSpent, Msg: "cut", CostUSD: 0.007, Metered: &agent.Metered{Requests: 1}}
	})
	f.Run("j")
	m := f.Load("j")
	if m.Status != lifecycle.HaltedCost || m.Run.ErrorCode != codes.CostBudget {
		t.Fatalf("status %s code %s (%s)", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	rs := testkit.OfType(f.Records("j"), history.TypeResponse)
	if len(rs) != 1 || rs[0].Response.ErrorCode != codes.BudgetSpent || !rs[0].Response.Metered || rs[0].Response.CostUSD != 0.007 {
		t.Fatalf("responses %+v", rs)
	}
	if c := m.Metrics.CumulativeCost; c < 1.099 || c > 1.101 {
		t.Errorf("cumulative cost %v cents, want 1.1", c)
	}
}

// The proxy's figure is the cost of record; an agent's own report that
// disagrees with it is kept and flagged COST_DISAGREEMENT in the answer's
// warnings (logist status shows them).
func TestMeteredCostDisagreementWarns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", job(testkit.Script(testkit.Step("COMPLETED", "never")), okSupervisor()))
	reported := 0.5
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		r := answer("COMPLETED", "done")
		r.CostUSD = 0.01
		r.Metered = &agent.Metered{Requests: 1, ReportedUSD: &reported, Disagreement: "metered $0.01, agent reported $0.5"}
		return r, nil
	})
	f.Run("j")
	rs := testkit.OfType(f.Records("j"), history.TypeResponse)
	resp := rs[0].Response
	if !resp.Metered || resp.CostUSD != 0.01 || resp.ReportedCostUSD == nil || *resp.ReportedCostUSD != 0.5 {
		t.Fatalf("response %+v", resp)
	}
	if len(resp.Warnings) != 1 || !strings.HasPrefix(resp.Warnings[0], codes.CostDisagreement+": ") {
		t.Errorf("warnings %q", resp.Warnings)
	}
}
