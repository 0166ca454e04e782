package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/secrets"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
)

// ---------------------------------------------------------------------------
// A. The escalation matrix (seed 002)
// ---------------------------------------------------------------------------

// checkEscalated asserts the job stopped for a steward with code after
// exactly calls worker calls, the last response recorded as failed.
func checkEscalated(t *testing.T, f *fixture, id, code string, calls int) *history.Response {
	t.Helper()
	last := checkStopped(t, f, id, code, calls)
	m := f.Load(id)
	if n := len(m.History); n == 0 || m.History[n-1].Action != "STUCK" {
		t.Errorf("manifest audit trail does not end with STUCK: %+v", m.History)
	}
	if last.ErrorCode != code {
		t.Errorf("last response error_code = %q, want %q", last.ErrorCode, code)
	}
	return last
}

// checkStopped asserts the job is INTERVENTION_REQUIRED with run.error_code
// code after exactly calls worker calls and returns the last response.
func checkStopped(t *testing.T, f *fixture, id, code string, calls int) *history.Response {
	t.Helper()
	m := f.Load(id)
	if m.Status != lifecycle.InterventionRequired {
		t.Fatalf("status = %s, want INTERVENTION_REQUIRED (reason %q)", m.Status, m.Run.Reason)
	}
	if m.Run.ErrorCode != code {
		t.Errorf("run.error_code = %q, want %q", m.Run.ErrorCode, code)
	}
	if m.Phase() != "work" {
		t.Errorf("phase = %q, want work (the job stops where it failed)", m.Phase())
	}
	if m.Metrics.AgentCalls != calls {
		t.Errorf("agent_calls = %d, want %d", m.Metrics.AgentCalls, calls)
	}
	recs := f.Records(id)
	resps := testkit.OfType(recs, history.TypeResponse)
	if len(resps) != calls {
		t.Fatalf("%d response records, want %d", len(resps), calls)
	}
	for _, r := range testkit.OfType(recs, history.TypeIntent) {
		if r.Role != "worker" {
			t.Errorf("the %s was called although the worker failed", r.Role)
		}
	}
	last := resps[len(resps)-1].Response
	if last.NewStatus != string(lifecycle.InterventionRequired) {
		t.Errorf("last response new_status = %q", last.NewStatus)
	}
	trs := testkit.OfType(recs, history.TypeTransition)
	if lt := trs[len(trs)-1].Transition; lt.To != string(lifecycle.InterventionRequired) || lt.From != string(lifecycle.Running) {
		t.Errorf("last transition = %+v", lt)
	}
	if _, err := os.Stat(filepath.Join(f.Dir, id, history.JobHistoryFile)); err != nil {
		t.Errorf("jobHistory.json not written when the job parked: %v", err)
	}
	return last
}

func TestEscalationInvalidAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, raw, code, inReason string
	}{
		{"schema invalid", `{"action": "COMPLETED", "evidence_files": "report.md", "summary_for_supervisor": "Summarised."}`,
			codes.SchemaInvalid, "/evidence_files"},
		{"schema invalid extra type", `{"action": "COMPLETED", "evidence_files": [1], "summary_for_supervisor": "ok"}`,
			codes.SchemaInvalid, "/evidence_files/0"},
		{"action malformed", `{"action": "DONE", "evidence_files": [], "summary_for_supervisor": "Did it."}`,
			codes.ActionInvalid, `"DONE"`},
		{"action not a string", `{"action": 7, "evidence_files": [], "summary_for_supervisor": "Did it."}`,
			codes.ActionInvalid, "7"},
		{"summary missing", `{"action": "COMPLETED", "evidence_files": []}`,
			codes.SummaryMissing, "summary_for_supervisor"},
		{"summary blank", `{"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "  "}`,
			codes.SummaryMissing, "empty"},
		{"not json", `I finished the task, trust me.`, codes.NotJSON, "not a JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.WriteJob("j", job(testkit.Script(rawStep(tc.raw)), okSupervisor()))
			f.Run("j")
			last := checkEscalated(t, f, "j", tc.code, 1)
			m := f.Load("j")
			// The steward sees the validator's own message.
			re := response.Judge([]byte(tc.raw), response.Contract{Workspace: response.Dir(f.Env.Store.Workspace("j"))}).Err
			if re == nil {
				t.Fatalf("validator accepted %s", tc.raw)
			}
			if !strings.Contains(m.Run.Reason, re.Reason) || !strings.Contains(m.Run.Reason, tc.inReason) {
				t.Errorf("run.reason = %q, want it to contain %q and %q", m.Run.Reason, re.Reason, tc.inReason)
			}
			if last.Status != history.StatusError || last.RawResponse != tc.raw {
				t.Errorf("response = %+v, want status ERROR with the raw answer kept", last)
			}
			if last.Error != re.Reason {
				t.Errorf("response error = %q, want %q", last.Error, re.Reason)
			}
			trs := testkit.OfType(f.Records("j"), history.TypeTransition)
			if ev := trs[len(trs)-1].Transition.Event; ev != string(lifecycle.EvInvalid) {
				t.Errorf("event = %s, want %s", ev, lifecycle.EvInvalid)
			}
		})
	}
}

func TestEscalationAgentStuck(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", job(testkit.Script(testkit.Step("STUCK", "Need a human to confirm dropping the column.")), okSupervisor()))
	f.Run("j")
	last := checkStopped(t, f, "j", "AGENT_STUCK", 1)
	if last.Status != history.StatusSuccess || last.Action != "STUCK" {
		t.Errorf("response = %+v", last)
	}
	if m := f.Load("j"); !strings.Contains(m.Run.Reason, "Need a human") {
		t.Errorf("reason %q lacks the agent's summary", m.Run.Reason)
	}
}

func TestEscalationCallTimeout(t *testing.T) {
	f := newFixture(t)
	f.WriteJob("j", job(command(0.3, "sleep", "30"), okSupervisor()))
	start := time.Now()
	f.Run("j")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("run took %s; the 0.3 s timeout did not kill the agent", d)
	}
	last := checkEscalated(t, f, "j", codes.AgentTimeout, 1)
	if last.Status != history.StatusTimeout {
		t.Errorf("response status = %q, want TIMEOUT", last.Status)
	}
	if last.ExecutionTimeSeconds < 0.29 || last.ExecutionTimeSeconds > 5 {
		t.Errorf("execution_time_seconds = %v, want about 0.3", last.ExecutionTimeSeconds)
	}
	trs := testkit.OfType(f.Records("j"), history.TypeTransition)
	if ev := trs[len(trs)-1].Transition.Event; ev != string(lifecycle.EvAgentFailed) {
		t.Errorf("event = %s", ev)
	}
	if m := f.Load("j"); !strings.Contains(m.Run.Reason, "timeout") {
		t.Errorf("reason = %q", m.Run.Reason)
	}
}

// obsCalls hears the calls and violations the metrics would count.
type obsCalls struct {
	jobtx.Nop
	mu         sync.Mutex
	outcomes   []string
	violations []string
	retries    []string
}

func (o *obsCalls) Retry(cause string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.retries = append(o.retries, cause)
}

func (o *obsCalls) AgentCall(role, _, outcome string, _ time.Duration, _ float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcomes = append(o.outcomes, role+":"+outcome)
}

func (o *obsCalls) Violation(code string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.violations = append(o.violations, code)
}

// Issue 17 item 10: an accepted answer with a missing evidence file is a
// warning: logged at WARN with type "warning", never as an error, and
// counted as an ok call, not as a violation, so error-rate alerts do not
// hear it.
func TestMissingEvidenceIsLoggedAsAWarning(t *testing.T) {
	f := newFixture(t)
	var logs logBuffer
	f.Env.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	obs := &obsCalls{}
	f.Env.Obs = obs
	f.WriteJob("j", job(testkit.Script(testkit.Step("COMPLETED", "Wrote it.", "missing.txt")), okSupervisor()))
	f.Run("j")
	var warned bool
	for _, l := range joblog.Lines(logs.bytes()) {
		if l["error_code"] == nil && l["type"] == nil {
			continue
		}
		if err := joblog.Check(l); err != nil {
			t.Errorf("%v: %v", err, l)
		}
		if l["type"] == "error" {
			t.Errorf("an error line for a job that only had a warning: %v", l)
		}
		if l["error_code"] == codes.EvidenceMissing {
			warned = l["level"] == "WARN" && l["type"] == "warning" && l["actor"] == "worker" && l["job_id"] == "j"
		}
	}
	if !warned {
		t.Errorf("no EVIDENCE_MISSING warning line:\n%s", logs.bytes())
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.violations) != 0 || strings.Join(obs.outcomes, ",") != "worker:ok,supervisor:ok" {
		t.Errorf("metrics heard calls %v and violations %v", obs.outcomes, obs.violations)
	}
}

func TestEscalationMissingEvidenceIsAWarning(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w := testkit.Step("COMPLETED", "Wrote real.txt.", "real.txt", "missing.txt")
	w["files"] = map[string]string{"real.txt": "hello"}
	f.WriteJob("j", job(testkit.Script(w), okSupervisor()))
	f.Run("j")
	m := f.Load("j")
	if m.Status != lifecycle.Success {
		t.Fatalf("status = %s (%s), want SUCCESS: a missing evidence file must not stop the job", m.Status, m.Run.Reason)
	}
	resps := testkit.OfType(f.Records("j"), history.TypeResponse)
	if len(resps) != 2 {
		t.Fatalf("%d responses", len(resps))
	}
	wr := resps[0].Response
	if wr.Status != history.StatusSuccess || wr.Action != "COMPLETED" {
		t.Errorf("worker response = %+v", wr)
	}
	if len(wr.Warnings) != 1 || !strings.Contains(wr.Warnings[0], "missing.txt") {
		t.Errorf("warnings = %q, want exactly one about missing.txt", wr.Warnings)
	}
	if len(wr.EvidenceFiles) != 2 {
		t.Errorf("evidence_files = %q, want both kept", wr.EvidenceFiles)
	}
	if len(resps[1].Response.Warnings) != 0 {
		t.Errorf("supervisor got warnings %q", resps[1].Response.Warnings)
	}
}

func TestEscalationEvidenceEscapingWorkspace(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../job.json", "/etc/passwd", "a/../../job.json", "link/secret"} {
		t.Run(p, func(t *testing.T) {
			f := newFixture(t)
			f.WriteJob("j", job(testkit.Script(testkit.Step("COMPLETED", "See evidence.", p)), okSupervisor()))
			ws := f.Env.Store.Workspace("j")
			if err := os.MkdirAll(ws, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
				t.Fatal(err)
			}
			f.Run("j")
			last := checkEscalated(t, f, "j", codes.ProtocolViolation, 1)
			if !strings.Contains(last.Error, "escapes the workspace") {
				t.Errorf("error = %q", last.Error)
			}
		})
	}
}

func TestAPIErrorRetriesWithBackoffThenEscalates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		retries *int // nil: the default of 3
	}{{"default", nil}, {"max_api_retries=1", intp(1)}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			j := job(testkit.Script(map[string]any{"error": "api", "cost_usd": 0.01}), okSupervisor())
			limits := map[string]any{"backoff_initial_ms": 100}
			want := 3
			if tc.retries != nil {
				limits["max_api_retries"] = *tc.retries
				want = *tc.retries
			}
			j["limits"] = limits
			f.WriteJob("j", j)
			f.Run("j")

			last := checkEscalated(t, f, "j", codes.APIError, want+1)
			if last.Status != history.StatusError {
				t.Errorf("status %q", last.Status)
			}
			m := f.Load("j")
			if !strings.Contains(m.Run.Reason, fmt.Sprintf("after %d automatic retries", want)) {
				t.Errorf("reason = %q", m.Run.Reason)
			}
			if m.Run.APIFailures != 0 {
				t.Errorf("api_failures = %d after escalation, want 0", m.Run.APIFailures)
			}
			if c := m.Metrics.CumulativeCost; c < float64(want+1)-0.01 || c > float64(want+1)+0.01 {
				t.Errorf("cumulative_cost = %v cents, want %d (failed calls cost too)", c, want+1)
			}
			recs := f.Records("j")
			for i, r := range testkit.OfType(recs, history.TypeIntent) {
				if r.Attempt != i+1 || *r.Interaction != i {
					t.Errorf("intent %d: attempt %d interaction %d", i, r.Attempt, *r.Interaction)
				}
			}
			for i, r := range testkit.OfType(recs, history.TypeResponse) {
				if r.Response.ErrorCode != codes.APIError {
					t.Errorf("response %d code %q", i, r.Response.ErrorCode)
				}
				if wantNS := i == want; (r.Response.NewStatus != "") != wantNS {
					t.Errorf("response %d new_status %q", i, r.Response.NewStatus)
				}
			}
			// Only automatic retries, no RETRY transitions: RUNNING the whole time.
			if n := len(testkit.OfType(recs, history.TypeTransition)); n != 2 {
				t.Errorf("%d transitions, want start and agent_failed", n)
			}

			sl := f.backoffs()
			if len(sl) != want {
				t.Fatalf("backoffs = %v, want %d", sl, want)
			}
			for i, d := range sl {
				base := 100 * time.Millisecond << i // initial·2^(n-1)
				if d < base/2 || d > base*3/2 {
					t.Errorf("backoff %d = %s, want within [%s, %s]", i+1, d, base/2, base*3/2)
				}
			}
		})
	}
}

func intp(i int) *int { return &i }

func TestAPIErrorThenSuccessContinues(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", map[string]any{
		"agents": map[string]any{
			"worker":     testkit.Script(map[string]any{"error": "api"}, testkit.Step("COMPLETED", "Done after a hiccup.")),
			"supervisor": okSupervisor(),
		},
		"limits": map[string]any{"backoff_initial_ms": 40},
	})
	var during []int
	f.Engine.Sleep = func(ctx context.Context, d time.Duration) error {
		f.mu.Lock()
		f.sleeps = append(f.sleeps, d)
		f.mu.Unlock()
		during = append(during, f.Load("j").Run.APIFailures)
		return nil
	}
	f.Run("j")
	m := f.Load("j")
	if m.Status != lifecycle.Success {
		t.Fatalf("status = %s (%s)", m.Status, m.Run.Reason)
	}
	if len(during) != 1 || during[0] != 1 {
		t.Errorf("api_failures while backing off = %v, want [1]", during)
	}
	if m.Run.APIFailures != 0 {
		t.Errorf("api_failures = %d, want reset to 0", m.Run.APIFailures)
	}
	if sl := f.backoffs(); len(sl) != 1 || sl[0] < 20*time.Millisecond || sl[0] > 60*time.Millisecond {
		t.Errorf("backoffs = %v, want one in [20ms, 60ms]", sl)
	}
	intents := testkit.OfType(f.Records("j"), history.TypeIntent)
	var got []string
	for _, r := range intents {
		got = append(got, fmt.Sprintf("%s/%d", r.Role, r.Attempt))
	}
	if want := "worker/1 worker/2 supervisor/1"; strings.Join(got, " ") != want {
		t.Errorf("calls = %s, want %s (attempt counter resets after success)", strings.Join(got, " "), want)
	}
}

func TestBackoffIsExponentialWithJitter(t *testing.T) {
	e := NewEngine(&jobtx.Env{}, builtins.Effects())
	initial := 10 * time.Millisecond
	const samples = 2000
	prevMean := 0.0
	for n := 1; n <= 6; n++ {
		base := float64(initial) * float64(int(1)<<(n-1))
		lo, hi, sum := time.Duration(1<<62), time.Duration(0), 0.0
		for range samples {
			d := e.backoff(initial, n)
			if float64(d) < 0.5*base || float64(d) > 1.5*base {
				t.Fatalf("backoff(n=%d) = %s outside [0.5, 1.5]·%s", n, d, time.Duration(base))
			}
			lo, hi, sum = min(lo, d), max(hi, d), sum+float64(d)
		}
		mean := sum / samples
		if mean < 0.9*base || mean > 1.1*base {
			t.Errorf("n=%d: mean %s, want about %s", n, time.Duration(mean), time.Duration(base))
		}
		if float64(hi-lo) < 0.5*base {
			t.Errorf("n=%d: spread %s..%s, want jitter over most of ±50%%", n, lo, hi)
		}
		if prevMean > 0 {
			if r := mean / prevMean; r < 1.7 || r > 2.3 {
				t.Errorf("n=%d: mean grew %.2fx, want about 2x", n, r)
			}
		}
		prevMean = mean
	}
	// Far out the exponent is capped at five minutes (before jitter).
	if d := e.backoff(time.Second, 40); d > 7*time.Minute+30*time.Second || d < 150*time.Second {
		t.Errorf("backoff(1s, 40) = %s, want the 5-minute cap with jitter", d)
	}
}

func TestRetryLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limit *int
		calls int
	}{{intp(2), 3}, {nil, 4}, {intp(0), 1}} {
		t.Run(fmt.Sprint(tc.calls), func(t *testing.T) {
			f := newFixture(t)
			j := job(testkit.Script(testkit.Step("RETRY", "Not there yet, again.")), okSupervisor())
			if tc.limit != nil {
				j["limits"] = map[string]any{"max_retries": *tc.limit}
			}
			f.WriteJob("j", j)
			f.Run("j")
			last := checkStopped(t, f, "j", "RETRY_LIMIT", tc.calls)
			if last.Status != history.StatusSuccess || last.Action != "RETRY" {
				t.Errorf("last response = %+v", last)
			}
			var evs []string
			for _, r := range testkit.OfType(f.Records("j"), history.TypeTransition) {
				evs = append(evs, r.Transition.Event)
			}
			want := []string{"start"}
			for range tc.calls - 1 {
				want = append(want, "phase_retry")
			}
			want = append(want, "retry_limit")
			if strings.Join(evs, ",") != strings.Join(want, ",") {
				t.Errorf("transitions %v, want %v", evs, want)
			}
			if m := f.Load("j"); !strings.Contains(m.Run.Reason, "Not there yet") {
				t.Errorf("reason %q lacks the last summary", m.Run.Reason)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// B. The supervised workflow
// ---------------------------------------------------------------------------

func TestSupervisedWorkflowRetryThenSuccess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w1 := testkit.Step("COMPLETED", "W1: wrote greet.py.", "greet.py")
	w1["files"] = map[string]string{"greet.py": "def greet(n): return n\n"}
	w1["cost_usd"] = 0.02
	w2 := testkit.Step("COMPLETED", "W2: added test_greet.py.", "greet.py", "test_greet.py")
	w2["files"] = map[string]string{"test_greet.py": "assert True\n"}
	s1 := testkit.Step("RETRY", "S1: there are no tests; add test_greet.py.", "greet.py")
	s2 := testkit.Step("COMPLETED", "S2: module and tests look right.", "test_greet.py")
	j := job(testkit.Script(w1, w2), testkit.Script(s1, s2))
	j["task_description"] = "Write greet.py with tests."
	j["context_files"] = []string{"spec.md"}
	f.WriteJob("j", j)
	f.Run("j")

	m := f.Load("j")
	if m.Status != lifecycle.Success {
		t.Fatalf("status = %s (%s)", m.Status, m.Run.Reason)
	}
	if m.Metrics.AgentCalls != 4 {
		t.Errorf("agent_calls = %d", m.Metrics.AgentCalls)
	}
	if m.Run.FinishedAt == "" || m.Run.StartedAt == "" {
		t.Errorf("run times not set: %+v", m.Run)
	}
	recs := f.Records("j")

	// Who was asked what, in order.
	intents := testkit.OfType(recs, history.TypeIntent)
	var order []string
	for _, r := range intents {
		order = append(order, r.Role+"@"+r.Phase)
	}
	if got := strings.Join(order, " "); got != "worker@work supervisor@review worker@work supervisor@review" {
		t.Fatalf("calls = %s", got)
	}
	prompt := func(i int) string { return intents[i].Request.Prompt }
	const fbHead = "## Feedback to address (the work was sent back)\n"
	const prevHead = "## Summary of the previous phase\n"
	if !strings.Contains(prompt(2), fbHead+"S1: there are no tests; add test_greet.py.") {
		t.Errorf("worker's second prompt lacks the supervisor's RETRY feedback:\n%s", prompt(2))
	}
	if strings.Contains(prompt(0), fbHead) || strings.Contains(prompt(0), prevHead) {
		t.Errorf("first prompt already has feedback/previous summary:\n%s", prompt(0))
	}
	if !strings.Contains(prompt(1), prevHead+"W1: wrote greet.py.") {
		t.Errorf("supervisor prompt lacks the worker's summary:\n%s", prompt(1))
	}
	if !strings.Contains(prompt(3), prevHead+"W2: added test_greet.py.") || strings.Contains(prompt(3), "S1:") {
		t.Errorf("second supervisor prompt should carry W2 and no stale feedback:\n%s", prompt(3))
	}
	for i, r := range intents {
		p := prompt(i)
		if !strings.Contains(p, "## Task\nWrite greet.py with tests.") || !strings.Contains(p, "- spec.md") {
			t.Errorf("prompt %d lacks task or context files:\n%s", i, p)
		}
		if r.Request.Metadata["role"] != r.Role || r.Request.Metadata["phase"] != r.Phase {
			t.Errorf("intent %d metadata = %v", i, r.Request.Metadata)
		}
		if *r.Interaction != i {
			t.Errorf("intent %d has interaction %d", i, *r.Interaction)
		}
	}
	if !strings.Contains(prompt(1), "Review the worker's result") || !strings.Contains(prompt(1), "You are the Supervisor") {
		t.Errorf("supervisor prompt lacks its system prompt and phase task")
	}
	if !strings.Contains(prompt(1), "- greet.py") {
		t.Errorf("supervisor is not given the worker's evidence as context:\n%s", prompt(1))
	}

	// Every response exactly once, after its intent.
	seen := map[int]int{}
	intentAt := map[int]int64{}
	for _, r := range intents {
		intentAt[*r.Interaction] = r.Seq
	}
	for _, r := range testkit.OfType(recs, history.TypeResponse) {
		seen[*r.Interaction]++
		if r.Seq <= intentAt[*r.Interaction] {
			t.Errorf("response %d written before its intent", *r.Interaction)
		}
	}
	for i := range 4 {
		if seen[i] != 1 {
			t.Errorf("interaction %d has %d responses", i, seen[i])
		}
	}

	// Recovery points before the first phase and at each COMPLETED, each
	// with a workspace snapshot.
	rps := testkit.OfType(recs, history.TypeRecoveryPoint)
	wantCP := []struct {
		id    string
		seq   int
		phase string
	}{{"cp-start", -1, "work"}, {"cp-0000-work", 0, "review"}, {"cp-0002-work", 2, "review"}, {"cp-0003-review", 3, ""}}
	for i, rp := range rps {
		if rp.RecoveryPoint.Snapshot == nil {
			t.Errorf("recovery point %d has no snapshot", i)
		}
	}
	if len(rps) != len(wantCP) {
		t.Fatalf("%d recovery points, want %d", len(rps), len(wantCP))
	}
	for i, w := range wantCP {
		rp := rps[i].RecoveryPoint
		// The end of the job is no place to resume from (rollback
		// refuses it): not can_resume_from.
		if rp.CheckpointID != w.id || rp.Sequence != w.seq || rp.ResumePhase != w.phase || rp.CanResumeFrom != (w.phase != "") {
			t.Errorf("recovery point %d = %+v, want %+v", i, rp, w)
		}
	}
	if m.Run.CheckpointID != "cp-0003-review" {
		t.Errorf("run.checkpoint_id = %q", m.Run.CheckpointID)
	}

	// Transitions in order.
	var trs []string
	for _, r := range testkit.OfType(recs, history.TypeTransition) {
		tr := r.Transition
		trs = append(trs, fmt.Sprintf("%s:%s/%s->%s/%s", tr.Event, tr.From, tr.FromPhase, tr.To, tr.ToPhase))
	}
	wantTr := []string{
		"start:PENDING/->RUNNING/work",
		"phase_advance:RUNNING/work->REVIEWING/review",
		"phase_retry:REVIEWING/review->RUNNING/work",
		"phase_advance:RUNNING/work->REVIEWING/review",
		"job_succeeded:REVIEWING/review->SUCCESS/review",
	}
	if strings.Join(trs, "\n") != strings.Join(wantTr, "\n") {
		t.Errorf("transitions:\n%s\nwant:\n%s", strings.Join(trs, "\n"), strings.Join(wantTr, "\n"))
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Seq != recs[i-1].Seq+1 {
			t.Errorf("history seq not consecutive at %d: %d after %d", i, recs[i].Seq, recs[i-1].Seq)
		}
	}

	// jobHistory.json: valid JSON with the seed's keys.
	b, err := os.ReadFile(filepath.Join(f.Dir, "j", history.JobHistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("jobHistory.json is not JSON: %v", err)
	}
	requireKeys(t, "jobHistory", doc, "job_id", "created_at", "interactions", "recovery_points")
	if doc["job_id"] != "j" {
		t.Errorf("job_id = %v", doc["job_id"])
	}
	its, _ := doc["interactions"].([]any)
	if len(its) != 4 {
		t.Fatalf("jobHistory has %d interactions, want 4", len(its))
	}
	for i, it := range its {
		in := it.(map[string]any)
		requireKeys(t, "interaction", in, "sequence", "timestamp", "state_before", "workspace_path", "request", "response")
		if in["sequence"] != float64(i) {
			t.Errorf("interaction %d sequence %v", i, in["sequence"])
		}
		requireKeys(t, "request", in["request"].(map[string]any), "prompt", "files_context", "metadata")
		resp, ok := in["response"].(map[string]any)
		if !ok {
			t.Fatalf("interaction %d has no response", i)
		}
		requireKeys(t, "response", resp, "status", "action", "evidence_files", "summary_for_supervisor", "raw_response", "execution_time_seconds", "cost_usd")
	}
	if its[0].(map[string]any)["request"].(map[string]any)["prompt"] != prompt(0) {
		t.Errorf("jobHistory prompt differs from history.jsonl")
	}
	if its[2].(map[string]any)["state_before"] != "RUNNING" || its[1].(map[string]any)["state_before"] != "REVIEWING" {
		t.Errorf("state_before wrong: %v / %v", its[1].(map[string]any)["state_before"], its[2].(map[string]any)["state_before"])
	}
	rpsDoc, _ := doc["recovery_points"].([]any)
	if len(rpsDoc) != 4 {
		t.Fatalf("jobHistory has %d recovery points", len(rpsDoc))
	}
	for _, rp := range rpsDoc {
		requireKeys(t, "recovery point", rp.(map[string]any), "checkpoint_id", "sequence", "can_resume_from", "description")
	}
	// The file agrees with a fresh materialisation of history.jsonl.
	var fromFile, fresh history.JobHistory
	if err := json.Unmarshal(b, &fromFile); err != nil {
		t.Fatal(err)
	}
	fb, _ := json.Marshal(history.Materialise("j", m.CreatedAt, f.Env.Store.Workspace("j"), recs))
	if err := json.Unmarshal(fb, &fresh); err != nil {
		t.Fatal(err)
	}
	if len(fresh.Interactions) != len(fromFile.Interactions) || len(fresh.Events) != len(fromFile.Events) {
		t.Errorf("jobHistory.json is stale: %d/%d interactions, %d/%d events",
			len(fromFile.Interactions), len(fresh.Interactions), len(fromFile.Events), len(fresh.Events))
	}
	if c := m.Metrics.CumulativeCost; c < 1.99 || c > 2.01 {
		t.Errorf("cumulative_cost = %v cents, want 2", c)
	}
}

func requireKeys(t *testing.T, what string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks key %q", what, k)
		}
	}
}

// ---------------------------------------------------------------------------
// C. Budgets
// ---------------------------------------------------------------------------

func costJob(threshold float64) map[string]any {
	s := testkit.Step("RETRY", "Tried another index; still slow.")
	s["cost_usd"] = 0.20
	j := job(testkit.Script(s), okSupervisor())
	j["cost_threshold"] = threshold
	j["limits"] = map[string]any{"max_retries": 100}
	return j
}

// A cost budget too large for the store's micro-dollars is no limit, not
// one spent: a job with cost_threshold 1e300 was halted for its cost
// before its first call, and the halt itself refused by the store (its
// budget wrapped round to a negative one), the run failing over and over.
func TestHugeCostBudgetRunsTheJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	j := costJob(1e300)
	j["agents"].(map[string]any)["worker"] = testkit.Script(testkit.Step("COMPLETED", "Done."))
	f.WriteJob("j", j)
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("status = %s (%s: %s)", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
}

func TestCostHaltAfterExactlyThreeCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", costJob(50))
	var calls atomic.Int32
	inner := f.Engine.NewProvider
	f.Engine.NewProvider = countCalls(inner, &calls)
	f.Run("j")
	m := f.Load("j")
	if m.Status != lifecycle.HaltedCost {
		t.Fatalf("status = %s (%s)", m.Status, m.Run.Reason)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d agent calls, want 3 (40 cents < 50 <= 60 cents)", n)
	}
	if m.Metrics.AgentCalls != 3 || len(testkit.OfType(f.Records("j"), history.TypeResponse)) != 3 {
		t.Errorf("agent_calls = %d", m.Metrics.AgentCalls)
	}
	if c := m.Metrics.CumulativeCost; c < 59.99 || c > 60.01 {
		t.Errorf("cumulative_cost = %v, want 60 cents", c)
	}
	if over := m.Metrics.CumulativeCost - *m.CostThreshold; over > 20 {
		t.Errorf("overshoot %v cents is more than one call", over)
	}
	if m.Run.ErrorCode != "COST_BUDGET" || !strings.Contains(m.Run.Reason, "--cost-threshold") {
		t.Errorf("run = %+v", m.Run)
	}
	trs := testkit.OfType(f.Records("j"), history.TypeTransition)
	if tr := trs[len(trs)-1].Transition; tr.Event != string(lifecycle.EvCostExceeded) || tr.To != string(lifecycle.HaltedCost) {
		t.Errorf("last transition %+v", tr)
	}
	// Running again does nothing: the job waits for a steward.
	f.Run("j")
	if n := calls.Load(); n != 3 {
		t.Errorf("a halted job was called again (%d calls)", n)
	}
}

func countCalls(inner func(cfg manifest.AgentConfig) (agent.Provider, error), n *atomic.Int32) func(cfg manifest.AgentConfig) (agent.Provider, error) {
	return func(cfg manifest.AgentConfig) (agent.Provider, error) {
		p, err := inner(cfg)
		if err != nil {
			return nil, err
		}
		return providerFunc(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
			n.Add(1)
			return p.Call(ctx, req)
		}), nil
	}
}

func TestCostCheckedBeforeStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	j := costJob(50)
	j["metrics"] = map[string]any{"cumulative_cost": 50, "cumulative_time_seconds": 0}
	f.WriteJob("j", j)
	var calls atomic.Int32
	f.Engine.NewProvider = countCalls(f.Engine.NewProvider, &calls)
	f.Run("j")
	m := f.Load("j")
	if m.Status != lifecycle.HaltedCost {
		t.Fatalf("status = %s", m.Status)
	}
	if calls.Load() != 0 || len(testkit.OfType(f.Records("j"), history.TypeIntent)) != 0 {
		t.Errorf("a job already at its budget was called")
	}
	trs := testkit.OfType(f.Records("j"), history.TypeTransition)
	if len(trs) != 1 || trs[0].Transition.From != string(lifecycle.Pending) || trs[0].Transition.Event != string(lifecycle.EvCostExceeded) {
		t.Errorf("transitions = %+v", trs)
	}
}

func TestResumeHaltedCost(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", costJob(50))
	f.Run("j")
	st := steward.New(f.Env, f.Engine.Effects)
	before, _ := os.ReadFile(filepath.Join(f.Dir, "j", "job.json"))
	nrec := len(f.Records("j"))

	_, err := st.Resume("j", steward.ResumeOptions{Guidance: "go on"})
	var ooo *jobtx.OutOfOrderError
	if !errors.As(err, &ooo) {
		t.Fatalf("resume without a higher budget: err = %v, want OutOfOrderError", err)
	}
	if ooo.Status != lifecycle.HaltedCost || !strings.Contains(ooo.Hint, "--cost-threshold") {
		t.Errorf("error = %+v", ooo)
	}
	after, _ := os.ReadFile(filepath.Join(f.Dir, "j", "job.json"))
	if string(before) != string(after) || len(f.Records("j")) != nrec {
		t.Errorf("a refused resume changed the job")
	}
	low := 55.0 // still below the 60 cents spent
	if _, err := st.Resume("j", steward.ResumeOptions{CostThreshold: &low}); !jobtx.IsOutOfOrder(err) {
		t.Errorf("resume with a budget still exceeded: err = %v", err)
	}

	raised := 90.0
	m, err := st.Resume("j", steward.ResumeOptions{CostThreshold: &raised})
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != lifecycle.Pending || m.Phase() != "work" || *m.CostThreshold != 90 {
		t.Errorf("after resume: %s %s %v", m.Status, m.Phase(), *m.CostThreshold)
	}
	if m := f.Load("j"); m.Status != lifecycle.Pending {
		t.Errorf("stored status %s", m.Status)
	}
	stw := testkit.OfType(f.Records("j"), history.TypeSteward)
	if len(stw) != 1 || stw[0].Steward.Command != "resume" || stw[0].Steward.Changes["cost_threshold"] != 90.0 {
		t.Errorf("steward records = %+v", stw)
	}
	f.Run("j")
	m = f.Load("j")
	// 60 -> 80 -> 100 cents: two more calls, then halted again at 90.
	if m.Status != lifecycle.HaltedCost || m.Metrics.AgentCalls != 5 {
		t.Errorf("after running on: %s with %d calls, want HALTED_COST with 5", m.Status, m.Metrics.AgentCalls)
	}
}

func TestTimeHaltKillsAgentAndChildren(t *testing.T) {
	// The agent has 0.6 s to write its pid files before the budget kills
	// it; on a badly overloaded machine it may not get that far, and then
	// there is nothing to check the kill against: try again.
	for attempt := 1; ; attempt++ {
		if timeHaltOnce(t) {
			return
		}
		if attempt == 3 {
			t.Fatal("the agent never wrote its pid files within the 0.6 s budget")
		}
		t.Logf("attempt %d: agent killed before it wrote its pid files; retrying", attempt)
	}
}

func timeHaltOnce(t *testing.T) bool {
	t.Helper()
	f := newFixture(t)
	pids := t.TempDir()
	mainPID, childPID := filepath.Join(pids, "main.pid"), filepath.Join(pids, "child.pid")
	sh := `sleep 60 & echo $! > "$1"; echo $$ > "$2"; exec sleep 60`
	j := job(command(0, "sh", "-c", sh, "agent", childPID, mainPID), okSupervisor())
	j["time_threshold_minutes"] = 0.01
	f.WriteJob("j", j)
	start := time.Now()
	f.Run("j")
	if d := time.Since(start); d > 6*time.Second {
		t.Fatalf("run took %s; the 0.6 s budget did not stop the agent", d)
	}
	m := f.Load("j")
	if m.Status != lifecycle.HaltedTime {
		t.Fatalf("status = %s (%s), want HALTED_TIME", m.Status, m.Run.Reason)
	}
	if m.Run.ErrorCode != "TIME_BUDGET" || m.Metrics.CumulativeTimeSeconds < 0.59 {
		t.Errorf("run = %+v metrics = %+v", m.Run, m.Metrics)
	}
	// The budget as given, and its length: not "0.0 minutes".
	if !strings.Contains(m.Run.Reason, "time budget of 0.01 minutes (0.6s) ran out") {
		t.Errorf("reason %q does not name the budget", m.Run.Reason)
	}
	resps := testkit.OfType(f.Records("j"), history.TypeResponse)
	if len(resps) != 1 || resps[0].Response.Status != history.StatusTimeout {
		t.Fatalf("responses = %+v", resps)
	}
	// Not resumable without more time.
	if _, err := steward.New(f.Env, f.Engine.Effects).Resume("j", steward.ResumeOptions{}); !jobtx.IsOutOfOrder(err) {
		t.Errorf("resume of HALTED_TIME without more time: err = %v", err)
	}
	var got []int
	for _, p := range []string{mainPID, childPID} {
		pid, ok := testkit.ReadPID(p)
		if !ok {
			return false
		}
		got = append(got, pid)
	}
	for i, pid := range got {
		testkit.WaitFor(t, fmt.Sprintf("process %d (%s) to be gone", pid, []string{"agent", "its child"}[i]), 2*time.Second,
			func() bool { return processGone(pid) })
	}
	return true
}

// ---------------------------------------------------------------------------
// E. Interruption and re-attempt
// ---------------------------------------------------------------------------

func TestInterruptedCallIsReattemptedWithSameRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", job(okSupervisor(), okSupervisor()))
	var (
		mu      sync.Mutex
		reqs    []agent.Request
		blocked atomic.Bool
	)
	started := make(chan struct{})
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		mu.Lock()
		reqs = append(reqs, *req)
		mu.Unlock()
		if req.Role == "worker" && blocked.CompareAndSwap(false, true) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return answer("COMPLETED", req.Role+" finished"), nil
	})
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Engine.Run(ctx, "j") }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("agent never called")
	}
	cancel(ErrShutdown)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after shutdown")
	}

	recs := f.Records("j")
	if n := len(testkit.OfType(recs, history.TypeResponse)); n != 0 {
		t.Fatalf("an interrupted call left %d response records", n)
	}
	errs := testkit.OfType(recs, history.TypeError)
	if len(errs) != 1 || errs[0].Error.Code != codes.AgentInterrupted {
		t.Fatalf("error records = %+v, want one AGENT_INTERRUPTED", errs)
	}
	if m := f.Load("j"); m.Status != lifecycle.Running || m.Phase() != "work" {
		t.Fatalf("after shutdown: %s/%s, want RUNNING/work", m.Status, m.Phase())
	}

	f.Run("j")
	m := f.Load("j")
	if m.Status != lifecycle.Success {
		t.Fatalf("status = %s (%s)", m.Status, m.Run.Reason)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) != 3 {
		t.Fatalf("%d calls, want interrupted + re-attempt + supervisor", len(reqs))
	}
	first, again := reqs[0], reqs[1]
	if again.Role != "worker" || again.Interaction != first.Interaction || again.Prompt != first.Prompt {
		t.Errorf("re-attempt differs: interaction %d vs %d, prompt equal %v", again.Interaction, first.Interaction, again.Prompt == first.Prompt)
	}
	if fmt.Sprint(again.ContextFiles) != fmt.Sprint(first.ContextFiles) || again.SystemPrompt != first.SystemPrompt {
		t.Errorf("re-attempt has another request")
	}
	recs = f.Records("j")
	intents := testkit.OfType(recs, history.TypeIntent)
	if len(intents) != 2 || *intents[0].Interaction != first.Interaction || intents[0].Request.Prompt != first.Prompt {
		t.Errorf("intents = %d; the re-attempt must reuse the stored request, not write a new one", len(intents))
	}
	count := map[int]int{}
	for _, r := range testkit.OfType(recs, history.TypeResponse) {
		count[*r.Interaction]++
	}
	if len(count) != 2 || count[0] != 1 || count[1] != 1 {
		t.Errorf("responses per interaction = %v, want each exactly once", count)
	}
	if n := len(testkit.OfType(recs, history.TypeError)); n != 2 {
		t.Errorf("%d error records, want the interruption and the re-attempt notice", n)
	}
	var jh history.JobHistory
	b, _ := os.ReadFile(filepath.Join(f.Dir, "j", history.JobHistoryFile))
	if err := json.Unmarshal(b, &jh); err != nil {
		t.Fatal(err)
	}
	if len(jh.Interactions) != 2 || jh.Interactions[0].Response == nil || jh.Interactions[1].Response == nil {
		t.Errorf("jobHistory interactions = %+v", jh.Interactions)
	}
}

// A supervisor that keeps sending the work back must reach the RETRY
// limit too; the worker's COMPLETED in between does not restart the count.
func TestSupervisorRetryLoopIsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	j := job(testkit.Script(testkit.Step("COMPLETED", "Done, I think.")), testkit.Script(testkit.Step("RETRY", "Still wrong; redo it.")))
	j["limits"] = map[string]any{"max_retries": 2}
	f.WriteJob("j", j)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Engine.Run(ctx, "j"); err != nil {
		t.Fatal(err)
	}
	m := f.Load("j")
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != "RETRY_LIMIT" {
		t.Fatalf("status %s (%s) after %d calls, want INTERVENTION_REQUIRED/RETRY_LIMIT", m.Status, m.Run.ErrorCode, m.Metrics.AgentCalls)
	}
	// worker, RETRY 1, worker, RETRY 2, worker, RETRY 3 > 2.
	if m.Metrics.AgentCalls != 6 || m.Phase() != "review" {
		t.Errorf("%d calls, phase %s; want 6, review", m.Metrics.AgentCalls, m.Phase())
	}
	// A steward's resume gives the job a fresh allowance.
	if _, err := steward.New(f.Env, f.Engine.Effects).Resume("j", steward.ResumeOptions{Guidance: "accept it"}); err != nil {
		t.Fatal(err)
	}
	if err := f.Engine.Run(ctx, "j"); err != nil {
		t.Fatal(err)
	}
	// It resumes in review: RETRY 1, worker, RETRY 2, worker, RETRY 3 > 2.
	if m := f.Load("j"); m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != "RETRY_LIMIT" || m.Metrics.AgentCalls != 11 {
		t.Errorf("after resume: %s/%s with %d calls, want RETRY_LIMIT again after 5 more", m.Status, m.Run.ErrorCode, m.Metrics.AgentCalls)
	}
}

// A command agent's request file is written while the intent is being
// made durable, before the agent starts, and holds the request the
// history records.
func TestRequestFileWrittenBesideTheIntent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var written []bool
	f.Engine.NewProvider = func(cfg manifest.AgentConfig) (agent.Provider, error) {
		p, err := agent.New(cfg)
		if err != nil {
			return nil, err
		}
		return providerFunc(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
			if cfg.Provider == "command" {
				written = append(written, req.FileWritten)
			}
			return p.Call(ctx, req)
		}), nil
	}
	answer := `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}`
	f.WriteJob("j", job(command(0, "sh", "-c", `cp "$1" seen.json && echo "$2"`, "agent", "{request_file}", answer), okSupervisor()))
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("status %s (%s)", m.Status, m.Run.Reason)
	}
	if len(written) != 1 || !written[0] {
		t.Fatalf("FileWritten per call = %v, want [true]", written)
	}
	seen, err := os.ReadFile(filepath.Join(f.Dir, "j", "workspace", "seen.json"))
	if err != nil {
		t.Fatalf("the agent did not find its request file: %v", err)
	}
	var got agent.Request
	if err := json.Unmarshal(seen, &got); err != nil {
		t.Fatalf("request file %q: %v", seen, err)
	}
	intents := testkit.OfType(f.Records("j"), history.TypeIntent)
	if len(intents) == 0 || intents[0].Request == nil {
		t.Fatal("no intent recorded")
	}
	if got.JobID != "j" || got.Role != "worker" || got.Prompt == "" || got.Prompt != intents[0].Request.Prompt {
		t.Errorf("request file: job %q role %q prompt %q; intent's prompt %q", got.JobID, got.Role, got.Prompt, intents[0].Request.Prompt)
	}
}

// Issue 17 item 3: an evidence path out of the workspace is what an answer
// is refused for even when its summary and action are wrong too, and every
// violation is audited: listed in the response record and logged.
func TestEscalationEvidenceEscapeComesFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var logs bytes.Buffer
	f.Env.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	raw := `{"evidence_files":["/etc/shadow"],"summary_for_supervisor":""}`
	f.WriteJob("j", job(testkit.Script(rawStep(raw)), okSupervisor()))
	f.Run("j")
	last := checkEscalated(t, f, "j", codes.ProtocolViolation, 1)
	if !strings.Contains(f.Load("j").Run.Reason, "/etc/shadow") {
		t.Errorf("run.reason = %q", f.Load("j").Run.Reason)
	}
	var codes []string
	for _, v := range last.Violations {
		codes = append(codes, v.Code)
	}
	if strings.Join(codes, ",") != "SCHEMA_INVALID,PROTOCOL_VIOLATION,SUMMARY_MISSING" {
		t.Errorf("recorded violations %v", last.Violations)
	}
	for _, code := range codes {
		if !strings.Contains(logs.String(), `"error_code":"`+code+`"`) {
			t.Errorf("%s is not logged:\n%s", code, logs.String())
		}
	}
}

// Issue 23: a call cut off by a stopping run (a shutdown, in cluster mode
// a lease lost) records no response and is asked again; its cost must not
// go into the manifest with the AGENT_INTERRUPTED record, or the job pays
// for the call twice (and a cluster's database debits both: the chaos
// run's "responses cost 60000 µ$, the database debited 80000 µ$"). The
// job's cost is the sum of its responses' costs.
func TestInterruptedCallIsNotAccounted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", job(okSupervisor(), okSupervisor()))
	ctx, cancel := context.WithCancelCause(context.Background())
	var interrupted atomic.Bool
	var workerCalls atomic.Int32
	f.fake(func(_ context.Context, req *agent.Request) (*agent.Result, error) {
		if req.Role == "worker" {
			workerCalls.Add(1)
		}
		if req.Role == "worker" && interrupted.CompareAndSwap(false, true) {
			// Cut off as the run stops, after spending some money.
			cancel(ErrShutdown)
			return nil, &agent.Error{Code: codes.AgentExit, Transient: true, CostUSD: 0.02, Msg: "killed"}
		}
		a := answer("COMPLETED", req.Role+" finished")
		a.CostUSD = 0.01
		return a, nil
	})
	if err := f.Engine.Run(ctx, "j"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if m := f.Load("j"); m.Metrics.CumulativeCost != 0 || m.Metrics.CumulativeTimeSeconds != 0 {
		t.Fatalf("after the interrupted call: cost %v cents, time %vs; want none accounted (no response recorded)", m.Metrics.CumulativeCost, m.Metrics.CumulativeTimeSeconds)
	}
	f.Run("j")
	m := f.Load("j")
	if m.Status != lifecycle.Success {
		t.Fatalf("status = %s (%s)", m.Status, m.Run.Reason)
	}
	if n := workerCalls.Load(); n != 2 {
		t.Fatalf("the worker was called %d times, want 2 (the cut call asked again)", n)
	}
	var cents float64
	resps := testkit.OfType(f.Records("j"), history.TypeResponse)
	for _, r := range resps {
		cents += r.Response.CostUSD * 100
	}
	if len(resps) != 2 || math.Abs(cents-2) > 1e-9 || math.Abs(m.Metrics.CumulativeCost-cents) > 1e-9 {
		t.Fatalf("%d responses costing %v cents, manifest says %v cents; want 2 responses, 2 cents, the same", len(resps), cents, m.Metrics.CumulativeCost)
	}
}

// A call that answered just as the run was stopped was paid for: its
// answer is recorded (and accounted) like any other, never thrown away
// and asked again.
func TestAnswerAsRunStopsIsRecorded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", job(okSupervisor(), okSupervisor()))
	ctx, cancel := context.WithCancelCause(context.Background())
	var workerCalls atomic.Int32
	f.fake(func(_ context.Context, req *agent.Request) (*agent.Result, error) {
		a := answer("COMPLETED", req.Role+" finished")
		a.CostUSD = 0.01
		if req.Role == "worker" && workerCalls.Add(1) == 1 {
			// The answer is in, its money spent, as the run is stopped.
			cancel(ErrShutdown)
			a.CostUSD = 0.02
		}
		return a, nil
	})
	if err := f.Engine.Run(ctx, "j"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if m := f.Load("j"); math.Abs(m.Metrics.CumulativeCost-2) > 1e-9 {
		t.Fatalf("after the answer that came as the run stopped: cost %v cents, want 2 (it is recorded)", m.Metrics.CumulativeCost)
	}
	f.Run("j")
	m := f.Load("j")
	if m.Status != lifecycle.Success {
		t.Fatalf("status = %s (%s)", m.Status, m.Run.Reason)
	}
	if n := workerCalls.Load(); n != 1 {
		t.Fatalf("the worker was called %d times, want 1 (its answer was recorded, not asked again)", n)
	}
	var cents float64
	resps := testkit.OfType(f.Records("j"), history.TypeResponse)
	for _, r := range resps {
		cents += r.Response.CostUSD * 100
	}
	if len(resps) != 2 || math.Abs(cents-3) > 1e-9 || math.Abs(m.Metrics.CumulativeCost-cents) > 1e-9 {
		t.Fatalf("%d responses costing %v cents, manifest says %v cents; want 2 responses, 3 cents, the same", len(resps), cents, m.Metrics.CumulativeCost)
	}
}

// A job with encrypt_history keeps its requests sealed in the history; a
// call cut off and asked again after a restart must still reach its agent
// in plaintext (the stored request as it was before sealing), never as
// ciphertext.
func TestInterruptedCallOfEncryptedJobIsAskedInPlaintext(t *testing.T) {
	f := newFixture(t)
	// The first call hangs until it is killed; the second keeps the
	// request file it was given and answers.
	agentScript := `if [ ! -e started ]; then : > started; sleep 60; exit 1; fi
cp "$LOGIST_REQUEST_FILE" request-seen.json
echo '{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"done"}'`
	m := job(command(0, "sh", "-c", agentScript), okSupervisor())
	m["task_description"] = "Rename the flag --verbose to --loud."
	m["encrypt_history"] = true
	f.WriteJob("j", m)
	ws := filepath.Join(f.Dir, "j", "workspace")

	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Engine.Run(ctx, "j") }()
	testkit.WaitFor(t, "the first call to start", 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(ws, "started"))
		return err == nil
	})
	cancel(ErrShutdown)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after shutdown")
	}
	intents := testkit.OfType(f.Records("j"), history.TypeIntent)
	if len(intents) != 1 || !secrets.Sealed(intents[0].Request.Prompt) {
		t.Fatalf("the stored request should be sealed: %+v", intents)
	}

	f.Run("j") // the restart: the cut-off call is asked again
	if got := f.Load("j"); got.Status != lifecycle.Success {
		t.Fatalf("status = %s (%s)", got.Status, got.Run.Reason)
	}
	b, err := os.ReadFile(filepath.Join(ws, "request-seen.json"))
	if err != nil {
		t.Fatal(err)
	}
	var seen agent.Request
	if err := json.Unmarshal(b, &seen); err != nil {
		t.Fatal(err)
	}
	for what, s := range map[string]string{"prompt": seen.Prompt, "system prompt": seen.SystemPrompt, "task": seen.TaskDescription} {
		if secrets.Sealed(s) {
			t.Errorf("the re-attempt's %s is ciphertext: %.60q", what, s)
		}
	}
	if !strings.Contains(seen.Prompt, "Rename the flag --verbose to --loud.") || seen.TaskDescription != "Rename the flag --verbose to --loud." {
		t.Errorf("the re-attempt's request does not carry the task: %.200q", seen.Prompt)
	}
	if n := len(testkit.OfType(f.Records("j"), history.TypeIntent)); n != 2 {
		t.Errorf("%d intents, want the cut-off call's and the supervisor's", n)
	}
}

// openFDs counts this process's descriptors open on file p.
func openFDs(t *testing.T, p string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if to, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && to == p {
			n++
		}
	}
	return n
}

// A run keeps its job's pid log open from its first uncontained call to
// its end (agent.PidFile), not opened and closed per call: the second
// call finds it open, and nothing holds it once the run is over.
func TestRunKeepsThePidLogOpen(t *testing.T) {
	f := newFixture(t)
	log := filepath.Join(f.Env.Store.JobDir("j"), "requests", agent.PidLog)
	var seen []int
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		seen = append(seen, openFDs(t, log))
		if err := os.MkdirAll(filepath.Dir(log), 0o700); err != nil {
			return nil, err
		}
		spec := agent.ProcSpec{Argv: []string{"true"}, Dir: req.Workspace, PidLog: filepath.Join(req.JobDir, "requests", agent.PidLog), Interaction: req.Interaction}
		if _, err := agent.RunProcess(ctx, spec); err != nil {
			return nil, err
		}
		return answer("COMPLETED", "done"), nil
	})
	f.WriteJob("j", job(okSupervisor(), okSupervisor()))
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("status %s (%s)", m.Status, m.Run.Reason)
	}
	if fmt.Sprint(seen) != "[0 1]" {
		t.Errorf("descriptors open on the pid log at each call's start: %v, want [0 1]", seen)
	}
	if n := openFDs(t, log); n != 0 {
		t.Errorf("%d descriptors still open on the pid log after the run", n)
	}
	if b, err := os.ReadFile(log); err != nil || strings.Count(string(b), " ") != 4 {
		t.Errorf("the pid log after two calls: %q, %v", b, err)
	}
}

// Seed 002's request metadata carries the budgets the job runs under:
// the manifest's own, else logistd's defaults, never nothing.
func TestRequestMetadataNamesTheBudgets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cost, minutes := 250.0, 7.5
	f.Engine.Defaults.CostThreshold, f.Engine.Defaults.TimeThresholdMinutes = &cost, &minutes
	f.WriteJob("defaults", job(testkit.Script(testkit.Step("COMPLETED", "Done.")), okSupervisor()))
	own := job(testkit.Script(testkit.Step("COMPLETED", "Done.")), okSupervisor())
	own["cost_threshold"], own["time_threshold_minutes"] = 40, 2
	f.WriteJob("own", own)
	for id, want := range map[string][2]float64{"defaults": {250, 7.5}, "own": {40, 2}} {
		f.Run(id)
		intents := testkit.OfType(f.Records(id), history.TypeIntent)
		if len(intents) == 0 || intents[0].Request == nil {
			t.Fatalf("%s: no intent recorded", id)
		}
		meta := intents[0].Request.Metadata
		if meta["cost_threshold"] != want[0] || meta["time_threshold_minutes"] != want[1] {
			t.Errorf("%s: request metadata cost_threshold %v, time_threshold_minutes %v; want %v", id, meta["cost_threshold"], meta["time_threshold_minutes"], want)
		}
	}
}

// The notice of an interrupted call says what the next run does with it:
// asks the agent again, or adopts the call that outlived the daemon under
// its launcher (its answer kept: not asked again, not paid twice). It said
// "re-attempting" for both.
func TestInterruptedCallNoticeSaysAdoptedOrAskedAgain(t *testing.T) {
	t.Parallel()
	for _, adopted := range []bool{false, true} {
		f := newFixture(t)
		f.WriteJob("j", job(okSupervisor(), okSupervisor()))
		var blocked atomic.Bool
		started := make(chan struct{})
		f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
			if req.Role == "worker" && blocked.CompareAndSwap(false, true) {
				close(started)
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return answer("COMPLETED", req.Role+" finished"), nil
		})
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan error, 1)
		go func() { done <- f.Engine.Run(ctx, "j") }()
		<-started
		cancel(ErrShutdown)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		n := *testkit.OfType(f.Records("j"), history.TypeIntent)[0].Interaction
		if adopted {
			// What a contained call's launcher leaves when the call ended
			// after its daemon: its record (the launcher gone) and result.
			call := agent.CallDir(filepath.Join(f.Dir, "j"), n)
			if err := os.MkdirAll(call, 0o700); err != nil {
				t.Fatal(err)
			}
			for name, body := range map[string]string{"launcher.pid": "999999999 1\n", "result.json": "{}"} {
				if err := os.WriteFile(filepath.Join(call, name), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		f.Run("j")
		errs := testkit.OfType(f.Records("j"), history.TypeError)
		if len(errs) != 2 {
			t.Fatalf("%d error records", len(errs))
		}
		msg, want := errs[1].Error.Message, "asking the agent again with its stored request"
		if adopted {
			want = "is adopted: its answer is taken, the agent is not asked again"
		}
		if !strings.Contains(msg, want) || strings.Contains(msg, "re-attempting") {
			t.Errorf("adopted %v: notice %q, want %q", adopted, msg, want)
		}
	}
}
