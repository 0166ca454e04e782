package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/schemas"
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
# HELP logistd_jobs Jobs in the jobs folder by status (schedule templates and invalid manifests are not jobs: logistd_schedules, logistd_invalid_manifests).
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

// Counters mean what their HELP says: started counts a job's first start
// only (the engine says which), finished counts every stop by the status
// it went to, a steward's halt of a waiting job included.
func TestCountersMatchTheirHelp(t *testing.T) {
	m := New(prometheus.NewRegistry(), "v1", "abc")
	m.JobStatus("a", "", lifecycle.Pending)
	m.JobStatus("a", lifecycle.Pending, lifecycle.Running)
	m.FirstStart()
	m.JobStatus("a", lifecycle.Running, lifecycle.InterventionRequired)
	// Resumed: PENDING, then started again. Not a new job.
	m.JobStatus("a", lifecycle.InterventionRequired, lifecycle.Pending)
	m.JobStatus("a", lifecycle.Pending, lifecycle.Running)
	m.JobStatus("a", lifecycle.Running, lifecycle.InterventionRequired)
	m.JobStatus("a", lifecycle.InterventionRequired, lifecycle.Canceled)
	if got := testutil.ToFloat64(m.started); got != 1 {
		t.Errorf("started = %v after one first start and a resume, want 1", got)
	}
	for outcome, want := range map[string]float64{"intervention_required": 2, "canceled": 1, "success": 0} {
		if got := testutil.ToFloat64(m.finished.WithLabelValues(outcome)); got != want {
			t.Errorf("finished{%s} = %v, want %v", outcome, got, want)
		}
	}
}

// Templates are counted by logistd_schedules only, never as jobs, even
// when a steward's command moves their status.
func TestTemplatesAreNotJobs(t *testing.T) {
	m := New(prometheus.NewRegistry(), "v1", "abc")
	m.Seen("tpl", lifecycle.Pending, true)
	m.JobStatus("tpl", lifecycle.Pending, lifecycle.Canceled)
	m.Seen("j", lifecycle.Pending, false)
	if got := testutil.ToFloat64(m.schedules); got != 1 {
		t.Errorf("schedules = %v, want 1", got)
	}
	for _, s := range []lifecycle.Status{lifecycle.Pending, lifecycle.Canceled} {
		want := 0.0
		if s == lifecycle.Pending {
			want = 1 // j
		}
		if got := testutil.ToFloat64(m.jobs.WithLabelValues(string(s))); got != want {
			t.Errorf("jobs{%s} = %v, want %v", s, got, want)
		}
	}
	if got := testutil.ToFloat64(m.finished.WithLabelValues("canceled")); got != 0 {
		t.Errorf("finished{canceled} = %v after a template's halt", got)
	}
	// The schedule removed from the manifest: a job now.
	m.Seen("tpl", lifecycle.Canceled, false)
	if got := testutil.ToFloat64(m.schedules); got != 0 {
		t.Errorf("schedules = %v, want 0", got)
	}
	if got := testutil.ToFloat64(m.jobs.WithLabelValues("CANCELED")); got != 1 {
		t.Errorf("jobs{CANCELED} = %v, want 1", got)
	}
	m.Forget("tpl")
	m.Forget("j")
	if n := len(m.Jobs()); n != 0 {
		t.Errorf("%d jobs left after forgetting all", n)
	}
}

// A read of a job's manifest counts a job not yet counted, and never
// undoes a transition it raced.
func TestSeenDoesNotUndoATransition(t *testing.T) {
	m := New(prometheus.NewRegistry(), "v1", "abc")
	m.Seen("a", lifecycle.Pending, false)
	m.JobStatus("a", lifecycle.Pending, lifecycle.Running)
	m.Seen("a", lifecycle.Pending, false) // read before the transition
	if got := testutil.ToFloat64(m.jobs.WithLabelValues("RUNNING")); got != 1 {
		t.Errorf("jobs{RUNNING} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.jobs.WithLabelValues("PENDING")); got != 0 {
		t.Errorf("jobs{PENDING} = %v, want 0", got)
	}
}

// logistd_faults_total: a run's fault as the engine reports it, a
// document's as schemas counts it (a guarded check that panicked).
func TestFaultsByWhere(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "v1", "abc")
	checks := schemas.Faults.Load()
	m.RunFault()
	m.RunFault()
	_ = schemas.Guard("a test's check", func() error { var none []int; return fmt.Errorf("%d", none[len("x")]) })
	want := fmt.Sprintf(`
# HELP logistd_faults_total %s
# TYPE logistd_faults_total counter
logistd_faults_total{in="check"} %d
logistd_faults_total{in="run"} 2
`, faultHelp(t, reg), checks+1)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "logistd_faults_total"); err != nil {
		t.Error(err)
	}
}

func faultHelp(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "logistd_faults_total" {
			return mf.GetHelp()
		}
	}
	t.Fatal("logistd_faults_total not exported")
	return ""
}

// Labels fed from jobs and stewards are held to fixed sets (Bound): a
// thousand jobs each naming its own role, or a steward events file full of
// made-up commands, add one series (other), never one per name.
func TestInputLabelsStayBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "v1", "abc")
	series := func() map[string]int {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, mf := range mfs {
			n[mf.GetName()] = len(mf.GetMetric())
		}
		return n
	}
	m.AgentCall("worker", "script", "ok", time.Second, 0)
	m.AgentCall("planner", "script", "ok", time.Second, 0)
	m.Phase("critic", time.Second)
	m.AgentCall("someone", "script", "ok", time.Second, 0)
	m.Phase("someone", time.Second)
	m.Steward("no-such-command", "no-such-result")
	before := series()
	for i := range 1000 {
		role := fmt.Sprintf("role-%d", i)
		m.AgentCall(role, "script", "ok", time.Second, 0)
		m.Phase(role, time.Second)
		m.Steward("cmd-"+role, "res-"+role)
	}
	after := series()
	for _, name := range []string{"logistd_agent_calls_total", "logistd_agent_call_duration_seconds", "logistd_phase_duration_seconds", "logistd_steward_commands_total"} {
		if after[name] != before[name] {
			t.Errorf("%s: %d series after 1000 roles, %d before", name, after[name], before[name])
		}
	}
	for role, want := range map[string]float64{"planner": 1, Other: 1001} {
		if got := testutil.ToFloat64(m.agentCalls.WithLabelValues(role, "script", "ok")); got != want {
			t.Errorf("agent calls{role=%s} = %v, want %v", role, got, want)
		}
	}
	if got := testutil.ToFloat64(m.steward.WithLabelValues(Other, Other)); got != 1001 {
		t.Errorf("steward{other,other} = %v, want 1001", got)
	}
	for _, r := range []string{"worker", "supervisor", "planner", "executor", "critic", "auditor", "logist"} {
		if Bound(r, KnownRoles) != r {
			t.Errorf("built-in role %s folded to %s", r, Bound(r, KnownRoles))
		}
	}
}

// Every result a steward command can end with (its exit code's name, as
// the CLI and the console record it) is a result of its own, not other:
// the console's refusals (a viewer acting, a CSRF failure) are
// permission_denied, which the CLI once recorded as error.
func TestStewardResultsNameEveryExitCode(t *testing.T) {
	for _, code := range []int{jobview.ExitOK, jobview.ExitUsage, jobview.ExitOutOfOrder, jobview.ExitPermission, jobview.ExitNotFound, 99} {
		name := jobview.OutcomeName(code)
		if got := Bound(name, StewardResults); got != name {
			t.Errorf("exit code %d (%s) is counted as %s", code, name, got)
		}
	}
}
