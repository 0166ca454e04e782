package bench

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestPercentileAndSummary(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	if got := Median(xs); got != 3 {
		t.Errorf("median = %v", got)
	}
	if got := Median([]float64{1, 2, 3, 4}); got != 2.5 {
		t.Errorf("even median = %v", got)
	}
	if got := Percentile(xs, 25); got != 2 {
		t.Errorf("p25 = %v", got)
	}
	if got := Percentile(xs, 99); math.Abs(got-4.96) > 1e-9 {
		t.Errorf("p99 = %v", got)
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("median of nothing should be NaN")
	}
	if xs[0] != 5 {
		t.Error("Percentile sorted its input in place")
	}
	s := Summarize(xs)
	if s.N != 5 || s.Min != 1 || s.Max != 5 || s.P75 != 4 {
		t.Errorf("summary = %+v", s)
	}
	if got := s.Spread(); math.Abs(got-2.0/3) > 1e-9 {
		t.Errorf("spread = %v", got)
	}
}

func TestEvaluate(t *testing.T) {
	base := Summarize([]float64{10, 10, 10})
	cases := []struct {
		row  Row
		want string
	}{
		{Row{Stat: "median", Value: Summarize([]float64{11}), Baseline: &base, Goal: Goal{"ratio<=", 1.2}}, "PASS"},
		{Row{Stat: "median", Value: Summarize([]float64{13}), Baseline: &base, Goal: Goal{"ratio<=", 1.2}}, "FAIL"},
		{Row{Stat: "median", Value: Summarize([]float64{0.4}), Baseline: &base, Goal: Goal{"ratio>=", 0.05}}, "FAIL"},
		{Row{Stat: "p99", Value: Summarize([]float64{1, 60}), Goal: Goal{"value<=", 50}}, "FAIL"},
		{Row{Stat: "median", Value: Summarize([]float64{40}), Goal: Goal{"value<=", 50}}, "PASS"},
		{Row{Stat: "median", Value: Summarize([]float64{40})}, "INFO"},
		{Row{Stat: "p99", Value: Summarize([]float64{3}), BaseName: "inotifywait", Goal: Goal{"ratio<=", 1}}, "N/A"},
		{Row{Stat: "median", Goal: Goal{"value<=", 1}}, "N/A"},
	}
	for i, c := range cases {
		c.row.Evaluate()
		if c.row.Result != c.want {
			t.Errorf("case %d: %s, want %s (ratio %v)", i, c.row.Result, c.want, c.row.Ratio)
		}
	}
}

func TestReportRendering(t *testing.T) {
	base := Summarize([]float64{2, 2.5, 3})
	r := &Report{Quick: true, Date: "2026-01-01T00:00:00Z", Commit: "abc1234", Seconds: 12,
		Machine: Machine{CPUs: 2, CPUModel: "Test CPU", MemTotal: "4.0 GiB", Kernel: "6.1", GoVersion: "go1.26", TempDir: "/tmp"},
		Rows: []Row{
			{Scenario: "1", Name: "pickup", Unit: "ms", Stat: "p99", Value: Summarize([]float64{4, 5, 6}), BaseName: "inotifywait loop", Baseline: &base, Goal: Goal{"ratio<=", 1}},
			{Scenario: "1", Name: "pickup, no baseline", Unit: "ms", Stat: "p99", Value: Summarize([]float64{4}), BaseName: "inotifywait loop", Goal: Goal{"ratio<=", 1}},
			{Scenario: "5", Name: "start-up", Unit: "ms", Stat: "median", Value: Summarize([]float64{40}), Goal: Goal{"value<=", 1000},
				OffScale: offScale(500, goalScaleJobs, "jobs")},
		},
		Notes: []string{"a note"},
		Raw:   map[string][]float64{"1.pickup_ms": {4, 5, 6, math.NaN()}},
	}
	for i := range r.Rows {
		r.Rows[i].Evaluate()
	}
	md := r.Markdown()
	for _, want := range []string{"GENERATED", "Quick mode", "abc1234", "2 CPUs (Test CPU)", "4.0 GiB", "Linux 6.1", "go1.26",
		"| 1 | pickup | p99 | 5.98 ms |", "inotifywait loop: 2.99 ms", "| 2 |", "ratio ≤ 1", "**FAIL**",
		"inotifywait loop: unavailable", "**N/A**", "- a note",
		"| ≤ 1000 ms | **PASS** (not at the goal's scale, 50000 jobs; this run: 500) |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	js, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatalf("JSON does not parse back: %v\n%s", err, js)
	}
	if len(back.Rows) != 3 || back.Rows[0].Result != "FAIL" || len(back.Raw["1.pickup_ms"]) != 3 {
		t.Errorf("JSON round trip: %+v", back)
	}
}

func TestSumMetric(t *testing.T) {
	body := `# HELP x
logistd_jobs_finished_total{outcome="success"} 3
logistd_jobs_finished_total{outcome="halted"} 2
logistd_jobs_finished_totalx 100
process_cpu_seconds_total 1.5
`
	if got := sumMetric(strings.NewReader(body), "logistd_jobs_finished_total"); got != 5 {
		t.Errorf("sum = %v", got)
	}
	if got := sumMetric(strings.NewReader(body), `logistd_jobs_finished_total{outcome="success"}`); got != 3 {
		t.Errorf("labelled = %v", got)
	}
	if got := sumMetric(strings.NewReader(body), "process_cpu_seconds_total"); got != 1.5 {
		t.Errorf("cpu = %v", got)
	}
}

// A run at the scale states its rows' goals plainly; a smaller
// one says so beside each result.
func TestOffScale(t *testing.T) {
	if got := offScale(goalScaleJobs, goalScaleJobs, "jobs"); got != "" {
		t.Errorf("at the goal's scale: %q", got)
	}
	if got := offScale(10, 50000, "jobs"); got != "50000 jobs; this run: 10" {
		t.Errorf("below it: %q", got)
	}
	if FullSizes.ScaleJobs < goalScaleJobs || FullSizes.HistoryRecords < goalHistoryRecords ||
		FullSizes.ConcJobs < goalConcJobs || FullSizes.ConcParallel < goalConcParallel {
		t.Errorf("make bench's sizes are below issue 21's scales: %+v", FullSizes)
	}
}

func TestQuickSizesAreSmaller(t *testing.T) {
	if QuickSizes.ScaleJobs >= FullSizes.ScaleJobs || QuickSizes.ThroughputJobs >= FullSizes.ThroughputJobs ||
		QuickSizes.HistoryRecords >= FullSizes.HistoryRecords || QuickSizes.ConcJobs >= FullSizes.ConcJobs {
		t.Error("quick sizes should be reduced")
	}
}
