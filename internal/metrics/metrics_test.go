package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/logist/logist/internal/lifecycle"
)

func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "v1", "abc")
	m.AgentCall("worker", "script", "ok", time.Second, 0.5)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestJobStatusMovesBetweenGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "v1", "abc")
	m.JobStatus("a", "", lifecycle.Pending)
	m.JobStatus("b", "", lifecycle.Pending)
	m.JobStatus("a", lifecycle.Pending, lifecycle.Running)
	m.JobStatus("a", lifecycle.Running, lifecycle.Success)
	// Seeing the same job again (a rescan) must not count it twice.
	m.JobStatus("a", "", lifecycle.Success)
	want := `
# HELP logistd_jobs Jobs in the jobs folder by status.
# TYPE logistd_jobs gauge
logistd_jobs{status="CANCELED"} 0
logistd_jobs{status="DRAFT"} 0
logistd_jobs{status="HALTED_COST"} 0
logistd_jobs{status="HALTED_TIME"} 0
logistd_jobs{status="INTERVENTION_REQUIRED"} 0
logistd_jobs{status="PENDING"} 1
logistd_jobs{status="REVIEWING"} 0
logistd_jobs{status="RUNNING"} 0
logistd_jobs{status="SUCCESS"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "logistd_jobs"); err != nil {
		t.Fatal(err)
	}
	m.Halt("cost")
	m.Violation("SCHEMA_INVALID")
	m.HistoryAppend(time.Millisecond, nil)
	m.HistoryAppend(0, errTest{})
	if got := testutil.ToFloat64(m.halts.WithLabelValues("cost")); got != 1 {
		t.Fatalf("halts{cost} = %v", got)
	}
	if got := testutil.ToFloat64(m.writeFailures); got != 1 {
		t.Fatalf("write failures = %v", got)
	}
}

type errTest struct{}

func (errTest) Error() string { return "boom" }
