package manifest

import (
	"math"
	"strconv"
	"testing"
	"time"
)

// Every job runs under finite budgets: its manifest's own, else the
// daemon's defaults (issue 18 item 4). Budgets is the one rule; Exhausted
// and Unset follow it.
func TestBudgetsTakeTheManifestsOwnElseTheDefault(t *testing.T) {
	d := DefaultBudgets()
	var m Manifest
	m.Metrics.AgentCalls = 999
	bs := m.Budgets(&d)
	if len(bs) != 3 || !bs[0].Default || bs[0].Kind != BudgetCost || bs[0].Limit != DefaultCostThreshold ||
		bs[1].Kind != BudgetTime || bs[1].Limit != DefaultTimeThresholdMinutes || bs[2].Kind != BudgetCalls || bs[2].Limit != 1000 || bs[2].Used != 999 {
		t.Fatalf("budgets under the defaults: %+v", bs)
	}
	if b := m.Exhausted(&d); b != nil {
		t.Errorf("999 of 1000 calls exhausted: %+v", b)
	}
	m.Metrics.AgentCalls = 1000
	if b := m.Exhausted(&d); b == nil || b.Kind != BudgetCalls || !b.Default || b.Flag() != "--max-agent-calls" || b.Raised() != "2000" {
		t.Errorf("1000 of 1000 calls: %+v", b)
	}
	if m.Exhausted(nil) != nil || len(m.Budgets(nil)) != 0 {
		t.Errorf("no defaults, no budget: %+v", m.Budgets(nil))
	}

	// The manifest's own wins, and is not stamped as a default.
	n, c := 5000, 250.0
	m.Limits, m.CostThreshold = &Limits{MaxAgentCalls: &n}, &c
	if b := m.Exhausted(&d); b != nil {
		t.Errorf("1000 of the manifest's 5000 calls exhausted: %+v", b)
	}
	u := m.Unset(d)
	if u == nil || u.MaxAgentCalls != nil || u.CostThreshold != nil || u.TimeThresholdMinutes == nil || *u.TimeThresholdMinutes != 60 {
		t.Errorf("Unset = %+v, want only the time default", u)
	}
	m.Metrics.CumulativeCost = 250
	if b := m.Exhausted(&d); b == nil || b.Kind != BudgetCost || b.Default {
		t.Errorf("cost at the manifest's budget: %+v", b)
	}
	m.TimeThresholdMinutes = &c
	if m.Unset(d) != nil {
		t.Errorf("a manifest setting all three takes no default: %+v", m.Unset(d))
	}
}

// A default cannot switch a budget off.
func TestDefaultBudgetsMustBeFinite(t *testing.T) {
	zero, neg, inf, nan := 0, -1.0, math.Inf(1), math.NaN()
	for _, d := range []Budgets{{MaxAgentCalls: &zero}, {CostThreshold: &neg}, {TimeThresholdMinutes: &neg},
		{CostThreshold: &inf}, {TimeThresholdMinutes: &inf}, {CostThreshold: &nan}, {TimeThresholdMinutes: &nan}} {
		if d.Check() == nil {
			t.Errorf("%+v accepted", d)
		}
	}
	if err := DefaultBudgets().Check(); err != nil {
		t.Error(err)
	}
}

// A number from outside becomes a duration without wrapping round: past
// the longest duration it is the longest.
func TestDurationFromOutsideNeverWraps(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit time.Duration
		want time.Duration
	}{
		{1.5, time.Second, 1500 * time.Millisecond},
		{250, time.Millisecond, 250 * time.Millisecond},
		{1e10, time.Second, math.MaxInt64},
		{1e300, time.Minute, math.MaxInt64},
		{math.Inf(1), time.Second, math.MaxInt64},
		{math.NaN(), time.Second, 0},
		{-3, time.Second, 0},
		{0, time.Minute, 0},
	} {
		if got := Duration(c.v, c.unit); got != c.want {
			t.Errorf("Duration(%g, %v) = %v, want %v", c.v, c.unit, got, c.want)
		}
	}
}

// A time budget or timeout too large for a duration is a long one: before,
// 1e9 minutes wrapped round to a negative duration, and the job was over
// its time budget before its first call; a timeout of 1e10 s had passed
// before the call began.
func TestHugeTimeLimitsAreLongNotSpent(t *testing.T) {
	huge, long, ms := 1e9, 1e10, int64(1e17)
	m := Manifest{TimeThresholdMinutes: &huge, Limits: &Limits{CallTimeoutSeconds: &long, BackoffInitialMS: &ms},
		Agents: map[string]AgentConfig{"worker": {TimeoutSeconds: 1e300}}}
	if m.OverTime() {
		t.Error("a budget of 1e9 minutes is spent with no time used")
	}
	if b := m.TimeBudget(); b != math.MaxInt64 {
		t.Errorf("time budget %v", b)
	}
	for _, role := range []string{"worker", "supervisor"} {
		if d := m.CallTimeout(role); d != math.MaxInt64 {
			t.Errorf("%s's call timeout %v", role, d)
		}
	}
	if d := m.BackoffInitial(); d != math.MaxInt64 {
		t.Errorf("first backoff %v", d)
	}
}

// An amount past the micro-dollars an int64 holds is the most it holds.
func TestCentsToMicrosNeverWraps(t *testing.T) {
	for _, c := range []struct {
		cents float64
		want  int64
	}{{1.25, 12500}, {1e300, math.MaxInt64}, {math.Inf(1), math.MaxInt64}, {-1e300, math.MinInt64}, {math.NaN(), 0}} {
		if got := CentsToMicros(c.cents); got != c.want {
			t.Errorf("CentsToMicros(%g) = %d, want %d", c.cents, got, c.want)
		}
	}
	huge := 1e300
	if m := (Manifest{CostThreshold: &huge}); m.OverCost() {
		t.Error("a cost budget of 1e300 cents is spent with nothing spent")
	}
}

// A suggested raise is above what was used, in its flag's unit, so the
// resume it suggests is not refused again; a limit is written so that a
// small one does not read as 0 (a time budget of 0.02 minutes is not
// "0.0 minutes").
func TestRaisedIsAboveWhatWasUsed(t *testing.T) {
	for _, c := range []struct {
		b           Budget
		raised, lim string
	}{
		{Budget{Kind: BudgetTime, Limit: 0.01, Used: 0.02025}, "0.041", "0.01 minutes (0.6s)"},
		{Budget{Kind: BudgetTime, Limit: 0.02, Used: 0.02025}, "0.041", "0.02 minutes (1.2s)"},
		{Budget{Kind: BudgetTime, Limit: 60, Used: 60.5}, "130", "60 minutes (1h)"},
		{Budget{Kind: BudgetTime, Limit: 1.5, Used: 0.2}, "3", "1.5 minutes (1m30s)"},
		{Budget{Kind: BudgetCalls, Limit: 3, Used: 3}, "6", "3"},
		{Budget{Kind: BudgetCalls, Limit: 2, Used: 3}, "6", "2"},
		{Budget{Kind: BudgetCost, Limit: 50, Used: 60}, "220", "50.00 cents"},
	} {
		if got := c.b.Raised(); got != c.raised {
			t.Errorf("%+v: Raised() = %s, want %s", c.b, got, c.raised)
		}
		if got := c.b.LimitText(); got != c.lim {
			t.Errorf("%+v: LimitText() = %s, want %s", c.b, got, c.lim)
		}
	}
	for _, used := range []float64{1e-9, 0.0202, 0.333333, 1, 7.77, 59.99, 1234.5, 1e12} {
		b := Budget{Kind: BudgetTime, Limit: used / 2, Used: used}
		v, err := strconv.ParseFloat(b.Raised(), 64)
		if err != nil || !(v > used) || len(b.Raised()) > 8 && used >= 1e-3 && used < 1e6 {
			t.Errorf("used %v: Raised() = %s, want a short number above it", used, b.Raised())
		}
	}
}
