package meter

import (
	"fmt"
	"math"
)

// Tolerance is how far an agent's own cost report may be from the proxy's
// before they are said to disagree: by more than Abs dollars and more than
// Rel of the larger figure. CLIs price with tables of their own (cache-write
// premiums, long-context tiers, rounding), so small differences are normal.
type Tolerance struct {
	Abs float64
	Rel float64
}

// DefaultTolerance: a tenth of a cent, and 10 %.
var DefaultTolerance = Tolerance{Abs: 0.001, Rel: 0.10}

// Comparison is the proxy's cost of a call set against what the agent
// reported itself.
type Comparison struct {
	MeteredUSD  float64 `json:"metered_usd"`
	ReportedUSD float64 `json:"reported_usd"`
	// Disagree: the figures differ by more than the tolerance. The proxy's
	// figure stays the cost of record either way.
	Disagree bool `json:"disagree"`
}

// Compare sets a call's metered cost against the agent's own report.
func Compare(t Totals, reportedUSD float64, tol Tolerance) Comparison {
	d := math.Abs(t.USD - reportedUSD)
	big := math.Max(math.Abs(t.USD), math.Abs(reportedUSD))
	return Comparison{MeteredUSD: t.USD, ReportedUSD: reportedUSD,
		Disagree: d > tol.Abs && d > tol.Rel*big || math.IsNaN(reportedUSD)}
}

// String says both figures and, when they disagree, by how much.
func (c Comparison) String() string {
	s := fmt.Sprintf("metered $%.6f, agent reported $%.6f", c.MeteredUSD, c.ReportedUSD)
	if c.Disagree {
		s += fmt.Sprintf(": they disagree by $%.6f", math.Abs(c.MeteredUSD-c.ReportedUSD))
	}
	return s
}
