package meter

import (
	"math"
	"strings"
	"testing"
)

func TestCompareFlagsDisagreementsAboveTheTolerance(t *testing.T) {
	for _, c := range []struct {
		metered, reported float64
		disagree          bool
	}{
		{0.0100, 0.0100, false},
		{0.0100, 0.0109, false}, // 9 %: a CLI's own rounding or table
		{0.0100, 0.0125, true},  // 20 % and a quarter cent
		{0.0002, 0.0009, false}, // far apart but under a tenth of a cent
		{0.0100, 0, true},       // a CLI that says it cost nothing
		{0, 0.05, true},
		{0.0100, math.NaN(), true},
	} {
		got := Compare(Totals{USD: c.metered}, c.reported, DefaultTolerance)
		if got.Disagree != c.disagree || got.MeteredUSD != c.metered {
			t.Errorf("metered %v reported %v: %+v", c.metered, c.reported, got)
		}
		if s := got.String(); strings.Contains(s, "disagree") != c.disagree {
			t.Errorf("String() = %q", s)
		}
	}
}
