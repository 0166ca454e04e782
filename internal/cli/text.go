package cli

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/textsafe"
)

// dollars shows an amount in cents as dollars (usd).
func dollars(cents float64) string { return usd(cents / 100) }

// noCostLimit is what a cost budget past the largest Logist counts
// (manifest.CostUnbounded) shows as.
var noCostLimit = "no limit: the manifest's cost_threshold is past the largest budget Logist counts, " + dollars(manifest.MaxCostCents)

// usd shows an amount of US dollars, the one way every printer does:
// two decimals, and below ten cents as many more as its first two
// significant digits need, so that a small cost never reads as $0.00
// ($0.004, $0.012, $0.40, $12.35); from a million billion dollars up, its
// exponent ($1e+298): no bill comes near, only a hand-edited cost does,
// and three hundred digits would widen every table (a budget that large
// shows as no limit: noCostLimit).
func usd(v float64) string { return string(appendUSD(nil, v)) }

// appendUSD appends usd(v) to dst, without a string of its own (a
// listing of 50,000 jobs prints one or two per row).
func appendUSD(dst []byte, v float64) []byte {
	if v == 0 {
		v = 0 // -0 (a manifest may say so) is $0.00, not $-0.00
	}
	if v < 0 {
		dst, v = append(dst, '-'), -v
	}
	if v >= 1e15 {
		// Beyond any real bill (a budget of 1e300 cents, meaning none):
		// its exponent, not three hundred digits.
		return strconv.AppendFloat(append(dst, '$'), v, 'g', 3, 64)
	}
	if v == 0 || v >= 0.1 {
		return strconv.AppendFloat(append(dst, '$'), v, 'f', 2, 64) // as %.2f, without fmt
	}
	const most = 8
	dec := min(max(2, 1-int(math.Floor(math.Log10(v)))), most)
	var num [64]byte
	s := strconv.AppendFloat(num[:0], v, 'f', dec, 64)
	if len(bytes.Trim(s, "0.")) == 0 {
		// Below what most decimals show.
		return append(append(dst, "<$0."...), strings.Repeat("0", most-1)+"1"...)
	}
	// Trailing zeros go, down to two decimals.
	for bytes.HasSuffix(s, []byte("0")) && len(s)-bytes.IndexByte(s, '.') > 3 {
		s = s[:len(s)-1]
	}
	return append(append(dst, '$'), s...)
}

// appendCost appends a job's cost and its budget to dst.
func appendCost(dst []byte, m *manifest.Manifest) []byte {
	dst = appendUSD(dst, m.Metrics.CumulativeCost/100)
	if m.CostThreshold != nil {
		dst = appendUSD(append(dst, " of "...), *m.CostThreshold/100)
	}
	return dst
}

// timeText is a job's time and its budget.
func timeText(m *manifest.Manifest) string { return string(appendTime(nil, m)) }

// appendTime appends timeText(m) to dst.
func appendTime(dst []byte, m *manifest.Manifest) []byte {
	dst = append(strconv.AppendFloat(dst, m.Metrics.CumulativeTimeSeconds, 'f', 3, 64), 's') // as %.3f
	if m.TimeThresholdMinutes != nil {
		dst = append(append(dst, " of "...), minutesText(*m.TimeThresholdMinutes)...)
	}
	return dst
}

// minutesText is a budget in minutes as the steward gave it, short and
// exact (manifest.MinutesText: 90 is 1h30m, 0.001 is 0.06s).
func minutesText(minutes float64) string { return manifest.MinutesText(minutes) }

// orDash shows an empty value as a dash.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine is s for a one-line cell of at most n characters: every
// character textsafe.Line escapes (newline, carriage return, tab, BEL and
// every other control, bidi runes, bytes that are not UTF-8) shown as its
// visible escape (\n, \r, \t, \x07, ...), so no line of a multi-line text
// is hidden; longer than n characters, as many of s's characters as fit
// whole in n and "…": an escape is never cut (a "\u2…" would read as
// text the agent did not write). One escaping for every one-line cell of
// every command (list, logs, history, watch).
func oneLine(s string, n int) string {
	// Printable ASCII, most notes of a listing: nothing to escape, and
	// more than n of it is cut at byte n without reading the rest.
	i := 0
	for i < len(s) && i <= n && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	switch {
	case i > n:
		return s[:n] + "…"
	case i == len(s):
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	chars := i
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		piece := s[i : i+size]
		if (r == utf8.RuneError && size == 1) || textsafe.Unsafe(r) {
			piece = textsafe.Line(piece)
		}
		w := utf8.RuneCountInString(piece)
		if chars+w > n {
			return b.String() + "…"
		}
		b.WriteString(piece)
		chars += w
		i += size
	}
	return b.String()
}

// quoted is a one-line cell (oneLine) between double quotes, a quote in
// it escaped, so that where the text ends shows.
func quoted(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
