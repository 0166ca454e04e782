package bench

import (
	"math"
	"sort"
)

// Summary describes a set of samples.
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	P25    float64 `json:"p25"`
	P75    float64 `json:"p75"`
	P99    float64 `json:"p99"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Percentile returns the p-th percentile (0..100) of xs by linear
// interpolation between closest ranks; NaN for no samples.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if p <= 0 {
		return s[0]
	}
	if p >= 100 {
		return s[len(s)-1]
	}
	r := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(r))
	hi := int(math.Ceil(r))
	return s[lo] + (s[hi]-s[lo])*(r-float64(lo))
}

// Median is the 50th percentile.
func Median(xs []float64) float64 { return Percentile(xs, 50) }

// Summarize computes a Summary of xs.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		n := math.NaN()
		return Summary{Median: n, P25: n, P75: n, P99: n, Min: n, Max: n}
	}
	return Summary{N: len(xs), Median: Median(xs), P25: Percentile(xs, 25), P75: Percentile(xs, 75),
		P99: Percentile(xs, 99), Min: Percentile(xs, 0), Max: Percentile(xs, 100)}
}

// Spread is the interquartile range relative to the median (0.1 = 10 %).
func (s Summary) Spread() float64 {
	if s.N == 0 || s.Median == 0 {
		return math.NaN()
	}
	return (s.P75 - s.P25) / math.Abs(s.Median)
}
