package manifest

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Budgets bound a job's work: money, agent time and agent calls. Each is the
// manifest's own where it sets one (cost_threshold, time_threshold_minutes,
// limits.max_agent_calls), else the daemon's default (logistd
// --default-cost-threshold, --default-time-threshold-minutes,
// --default-max-agent-calls), so that no job runs without bounds: a workflow
// whose COMPLETED leads back round once made 58,540 calls in five minutes
// with no budget set (issue 18). The engine stamps the defaults it applies
// into run.default_budgets at every step, so that whoever reads the manifest
// (logist status, logist resume) sees the limits the job runs under and
// where each came from.
type Budgets struct {
	CostThreshold        *float64 `json:"cost_threshold,omitempty"`
	TimeThresholdMinutes *float64 `json:"time_threshold_minutes,omitempty"`
	MaxAgentCalls        *int     `json:"max_agent_calls,omitempty"`
}

// Built-in defaults: logistd's flags start from these. A priced call costs
// cents, so a default cost budget binds only jobs whose calls are priced;
// the calls budget binds every job.
const (
	DefaultCostThreshold        = 1000.0 // cents: $10
	DefaultTimeThresholdMinutes = 60.0   // of agent execution
	DefaultMaxAgentCalls        = 1000
)

// DefaultBudgets are the built-in defaults.
func DefaultBudgets() Budgets {
	c, t, n := DefaultCostThreshold, DefaultTimeThresholdMinutes, DefaultMaxAgentCalls
	return Budgets{CostThreshold: &c, TimeThresholdMinutes: &t, MaxAgentCalls: &n}
}

// Check says what is wrong with a set of defaults: each must be a finite
// positive limit (a default cannot turn a budget off). The error is a
// *DefaultError, naming the budget by its manifest key.
func (d Budgets) Check() error {
	switch {
	case d.CostThreshold != nil && !(*d.CostThreshold > 0 && *d.CostThreshold <= math.MaxFloat64):
		return &DefaultError{"cost_threshold", fmt.Sprint(*d.CostThreshold), "must be a finite number of cents, more than 0"}
	case d.TimeThresholdMinutes != nil && !(*d.TimeThresholdMinutes > 0 && *d.TimeThresholdMinutes <= math.MaxFloat64):
		return &DefaultError{"time_threshold_minutes", fmt.Sprint(*d.TimeThresholdMinutes), "must be a finite number of minutes, more than 0"}
	case d.MaxAgentCalls != nil && *d.MaxAgentCalls < 1:
		return &DefaultError{"limits.max_agent_calls", fmt.Sprint(*d.MaxAgentCalls), "must be at least 1"}
	}
	return nil
}

// DefaultError is a default budget Check refuses: Key is the budget's
// manifest key, for the caller to name the setting it came from.
type DefaultError struct{ Key, Value, Why string }

func (e *DefaultError) Error() string {
	return fmt.Sprintf("default %s %s: %s", e.Key, e.Value, e.Why)
}

// BudgetKind names a budget.
type BudgetKind string

const (
	BudgetCost  BudgetKind = "cost"
	BudgetTime  BudgetKind = "time"
	BudgetCalls BudgetKind = "agent_calls"
)

// Budget is one budget a job runs under.
type Budget struct {
	Kind BudgetKind `json:"kind"`
	// Limit and Used are in the budget's unit: cents, minutes of agent
	// time, agent calls.
	Limit float64 `json:"limit"`
	Used  float64 `json:"used"`
	// Default: the manifest sets none; this is the daemon's default.
	Default bool `json:"default,omitempty"`
}

// Origin says where the limit comes from, for people.
func (b Budget) Origin() string {
	if b.Default {
		return "logistd's default"
	}
	return "the manifest"
}

// Flag is the logist resume flag that raises the budget.
func (b Budget) Flag() string {
	switch b.Kind {
	case BudgetCost:
		return "--cost-threshold"
	case BudgetTime:
		return "--time-threshold-minutes"
	}
	return "--max-agent-calls"
}

// LimitText is the budget's limit for a message, in its flag's unit: a
// cost in cents (2 decimals), a time in minutes as given with its length
// (0.02 minutes (1.2s): never "0.0 minutes"), a number of calls.
func (b Budget) LimitText() string {
	switch b.Kind {
	case BudgetCost:
		return fmt.Sprintf("%.2f cents", b.Limit)
	case BudgetTime:
		return strconv.FormatFloat(b.Limit, 'g', -1, 64) + " minutes (" + MinutesText(b.Limit) + ")"
	}
	return fmt.Sprintf("%.0f", b.Limit)
}

// Raised is a limit worth suggesting to a steward, in the unit of its
// resume flag (cents, minutes, calls): above what was used, so that the
// resume it suggests is not refused as still at or over the budget. Cost:
// what was used doubled, plus a dollar. Time and calls: the larger of the
// limit and what was used, doubled; a time is rounded up to two
// significant digits (0.0202 minutes used: 0.041, never 0.04 nor
// 0.040400000000000005), so it is short and still above the time used.
func (b Budget) Raised() string {
	switch b.Kind {
	case BudgetCost:
		return fmt.Sprintf("%.0f", b.Used*2+100)
	case BudgetTime:
		return strconv.FormatFloat(roundUp(max(b.Limit, b.Used)*2, 2), 'f', -1, 64)
	}
	return fmt.Sprintf("%.0f", math.Max(max(b.Limit, b.Used)*2, 1))
}

// roundUp is v (> 0) rounded up to digits significant digits.
func roundUp(v float64, digits int) float64 {
	if !(v > 0) || math.IsInf(v, 0) {
		return v
	}
	scale := math.Pow(10, float64(digits-1)-math.Floor(math.Log10(v)))
	r := math.Ceil(v*scale) / scale
	if r < v { // the division's rounding
		r = math.Nextafter(r, math.Inf(1))
	}
	return r
}

// MinutesText is a number of minutes as a person reads it, short and
// exact: 90 is 1h30m, 0.5 is 30s, 2.25 is 2m15s, 0.02 is 1.2s (not
// "0.0 minutes", nor time.Duration's 1h30m0s). Every message that names a
// time budget writes it so.
func MinutesText(minutes float64) string {
	d := Duration(math.Round(minutes*float64(time.Minute)), 1)
	if d <= 0 {
		return "0s"
	}
	if d == math.MaxInt64 {
		// Longer than a duration holds (292 years): the number given.
		return strconv.FormatFloat(minutes, 'g', 3, 64) + " minutes"
	}
	h := d / time.Hour
	d -= h * time.Hour
	m := d / time.Minute
	d -= m * time.Minute
	var b strings.Builder
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	if d > 0 {
		b.WriteString(strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s")
	}
	return b.String()
}

// Unset returns the defaults of d for the budgets m does not set (nil when
// it sets them all): what the engine stamps into run.default_budgets.
func (m *Manifest) Unset(d Budgets) *Budgets {
	var u Budgets
	if m.CostThreshold == nil {
		u.CostThreshold = d.CostThreshold
	}
	if m.TimeThresholdMinutes == nil {
		u.TimeThresholdMinutes = d.TimeThresholdMinutes
	}
	if m.Limits == nil || m.Limits.MaxAgentCalls == nil {
		u.MaxAgentCalls = d.MaxAgentCalls
	}
	if u == (Budgets{}) {
		return nil
	}
	return &u
}

// Budgets lists the budgets m runs under, cost, time and calls in that
// order: the manifest's own, else the default in d (nil: none); a budget
// neither sets is left out. This is the one rule for a job's effective
// limits: the engine enforces them, status shows them, resume checks them.
func (m *Manifest) Budgets(d *Budgets) []Budget {
	if d == nil {
		d = &Budgets{}
	}
	var out []Budget
	add := func(kind BudgetKind, own, def *float64, used float64) {
		switch {
		case own != nil:
			out = append(out, Budget{Kind: kind, Limit: *own, Used: used})
		case def != nil:
			out = append(out, Budget{Kind: kind, Limit: *def, Used: used, Default: true})
		}
	}
	add(BudgetCost, m.CostThreshold, d.CostThreshold, m.Metrics.CumulativeCost)
	add(BudgetTime, m.TimeThresholdMinutes, d.TimeThresholdMinutes, m.Metrics.CumulativeTimeSeconds/60)
	var own, def *float64
	if m.Limits != nil && m.Limits.MaxAgentCalls != nil {
		v := float64(*m.Limits.MaxAgentCalls)
		own = &v
	}
	if d.MaxAgentCalls != nil {
		v := float64(*d.MaxAgentCalls)
		def = &v
	}
	add(BudgetCalls, own, def, float64(m.Metrics.AgentCalls))
	return out
}

// Exhausted returns the first budget of m (under the defaults d) that the
// job has used up, or nil.
func (m *Manifest) Exhausted(d *Budgets) *Budget {
	if s := m.Spent(d); len(s) > 0 {
		return &s[0]
	}
	return nil
}

// Spent lists every budget of m (under the defaults d) that the job has
// used up, cost, time and calls in that order: what a resume must raise.
func (m *Manifest) Spent(d *Budgets) []Budget {
	var out []Budget
	for _, b := range m.Budgets(d) {
		if m.spent(b) {
			out = append(out, b)
		}
	}
	return out
}

// over reports whether the budget of kind (under d) is used up.
func (m *Manifest) over(kind BudgetKind, d *Budgets) bool {
	for _, b := range m.Budgets(d) {
		if b.Kind == kind {
			return m.spent(b)
		}
	}
	return false
}

// spent is the rule: a budget is used up at its limit. Time is compared as
// a duration, as the engine's call deadlines are.
func (m *Manifest) spent(b Budget) bool {
	if b.Kind == BudgetTime {
		return seconds(m.Metrics.CumulativeTimeSeconds) >= Duration(b.Limit, time.Minute)
	}
	if b.Kind == BudgetCost {
		return CentsToMicros(b.Used) >= CentsToMicros(b.Limit)
	}
	return b.Used >= b.Limit
}

// CentsToMicros is an amount in cents (a cost, a cost_threshold) in whole
// micro-dollars, rounded: the unit a cost budget is compared in, by the
// engine here and by the store that refuses a call past it
// (clusterstore.Apply), so both find a budget used up at the same cost.
// Past the largest int64 (a budget of 1e300 cents: no limit) it is the
// largest, not a conversion that wraps round to a negative budget, which
// the store refuses while the engine takes it as spent.
func CentsToMicros(c float64) int64 {
	m := math.Round(c * 1e4)
	switch {
	case m != m: // NaN: no amount
		return 0
	case m >= math.MaxInt64: // float64(math.MaxInt64) is 2^63
		return math.MaxInt64
	case m <= math.MinInt64:
		return math.MinInt64
	}
	return int64(m)
}

// CostUnbounded says whether a cost budget of cents is past the largest
// one Logist counts (CentsToMicros saturates): no limit, which is what
// the engine and the store make of it. Every reader that shows a budget
// says so rather than print its three hundred digits.
func CostUnbounded(cents float64) bool { return CentsToMicros(cents) == math.MaxInt64 }

// MaxCostCents is the largest cost budget Logist counts, in cents.
const MaxCostCents = float64(math.MaxInt64) / 1e4

// TimeBudgetUnder returns the job's time budget under the defaults d, or
// 0 when it has none.
func (m *Manifest) TimeBudgetUnder(d *Budgets) time.Duration {
	for _, b := range m.Budgets(d) {
		if b.Kind == BudgetTime {
			return Duration(b.Limit, time.Minute)
		}
	}
	return 0
}
