package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/logist/logist/internal/manifest"
)

// dollars shows an amount in cents as dollars.
func dollars(cents float64) string { return fmt.Sprintf("$%.2f", cents/100) }

// costText is a job's cost and its budget.
func costText(m *manifest.Manifest) string {
	s := dollars(m.Metrics.CumulativeCost)
	if m.CostThreshold != nil {
		s += " of " + dollars(*m.CostThreshold)
	}
	return s
}

// timeText is a job's time and its budget.
func timeText(m *manifest.Manifest) string {
	s := fmt.Sprintf("%.3fs", m.Metrics.CumulativeTimeSeconds)
	if m.TimeThresholdMinutes != nil {
		s += " of " + (time.Duration(*m.TimeThresholdMinutes * float64(time.Minute))).String()
	}
	return s
}

// orDash shows an empty value as a dash.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// firstLine is the first line of s, cut to n characters.
func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len([]rune(s)) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return s
}
