package steward_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
)

// ---------------------------------------------------------------------------
// Resume
// ---------------------------------------------------------------------------

func TestResumeWithGuidanceReachesTheNextPrompt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", map[string]any{"agents": map[string]any{
		"worker":     testkit.Script(testkit.Step("STUCK", "Dropping legacy_email needs a human decision."), testkit.Step("COMPLETED", "Migration keeps legacy_email.")),
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "Safe migration.")),
	}})
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.InterventionRequired || m.Phase() != "work" {
		t.Fatalf("before resume: %s/%s", m.Status, m.Phase())
	}
	const guidance = "Keep legacy_email; add email_v2 instead."
	m, err := f.St.Resume("j", steward.ResumeOptions{Guidance: guidance})
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != lifecycle.Pending || m.Phase() != "work" || m.Run.Guidance != guidance {
		t.Fatalf("returned manifest: %s/%s guidance %q", m.Status, m.Phase(), m.Run.Guidance)
	}
	stored := f.Load("j")
	if stored.Status != lifecycle.Pending || stored.Phase() != "work" || stored.Run.Reason != "" || stored.Run.ErrorCode != "" {
		t.Fatalf("stored manifest: %s/%s run %+v", stored.Status, stored.Phase(), stored.Run)
	}
	if a := stored.History[len(stored.History)-1]; a.Role != "Steward" || a.Action != "RESUME" || a.Note != guidance {
		t.Errorf("audit entry %+v", a)
	}
	recs := f.Records("j")
	sw := testkit.OfType(recs, history.TypeSteward)
	if len(sw) != 1 {
		t.Fatalf("%d steward records", len(sw))
	}
	s := sw[0]
	if s.Steward.Command != "resume" || s.Steward.Guidance != guidance || s.Steward.CommandID == "" ||
		s.StateBefore != string(lifecycle.InterventionRequired) || s.Phase != "work" {
		t.Errorf("steward record = %+v %+v", s, s.Steward)
	}
	trs := testkit.OfType(recs, history.TypeTransition)
	if tr := trs[len(trs)-1].Transition; tr.Event != string(lifecycle.EvResume) || tr.To != string(lifecycle.Pending) || tr.Actor != "STEWARD" ||
		tr.ToPhase != "work" {
		t.Errorf("transition = %+v", tr)
	}
	if trs[len(trs)-1].Seq < s.Seq {
		t.Errorf("transition recorded before the steward command")
	}

	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success || m.Run.Guidance != "" {
		t.Fatalf("after running on: %s, guidance %q (must be cleared once delivered)", m.Status, m.Run.Guidance)
	}
	intents := testkit.OfType(f.Records("j"), history.TypeIntent)
	if len(intents) != 3 {
		t.Fatalf("%d intents", len(intents))
	}
	const head = "## Guidance from the human steward\n"
	if !strings.Contains(intents[1].Request.Prompt, head+guidance) {
		t.Errorf("worker prompt after resume lacks the guidance:\n%s", intents[1].Request.Prompt)
	}
	if strings.Contains(intents[0].Request.Prompt, guidance) || strings.Contains(intents[2].Request.Prompt, guidance) {
		t.Errorf("guidance leaked into a prompt before or after the one it was meant for")
	}
	if intents[1].Phase != "work" || intents[1].Role != "worker" {
		t.Errorf("resumed at %s/%s, want work/worker", intents[1].Phase, intents[1].Role)
	}
}

func TestResumeRefusedOutOfOrder(t *testing.T) {
	t.Parallel()
	for _, st := range []lifecycle.Status{lifecycle.Success, lifecycle.Pending, lifecycle.Draft, lifecycle.Canceled, lifecycle.Running} {
		t.Run(string(st), func(t *testing.T) {
			f := newFixture(t)
			phase := ""
			if st == lifecycle.Running {
				phase = "work"
			}
			f.WriteJob("j", withStatus(string(st), phase))
			before := f.snapshot("j")
			_, err := f.St.Resume("j", steward.ResumeOptions{Guidance: "try again"})
			e, ok := isOutOfOrder(err)
			if !ok {
				t.Fatalf("err = %v, want *jobtx.OutOfOrderError", err)
			}
			if e.Status != st || e.ID != "j" || !strings.Contains(err.Error(), "resumed") {
				t.Errorf("error = %+v", e)
			}
			if f.snapshot("j") != before {
				t.Errorf("a refused resume changed the job")
			}
		})
	}
	t.Run("missing job", func(t *testing.T) {
		f := newFixture(t)
		if _, err := f.St.Resume("nope", steward.ResumeOptions{}); !errors.Is(err, jobstore.ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
	})
}

func TestResumeWaitingStatuses(t *testing.T) {
	t.Parallel()
	for _, st := range []lifecycle.Status{lifecycle.InterventionRequired, lifecycle.HaltedCost, lifecycle.HaltedTime} {
		t.Run(string(st), func(t *testing.T) {
			f := newFixture(t)
			f.WriteJob("j", withStatus(string(st), "review"))
			m, err := f.St.Resume("j", steward.ResumeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if m.Status != lifecycle.Pending || m.Phase() != "review" {
				t.Errorf("%s/%s", m.Status, m.Phase())
			}
		})
	}
}

func TestConcurrentResumeTakesEffectOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("b", withStatus("INTERVENTION_REQUIRED", "work"))
	// Meanwhile the engine works on another job of the same folder.
	f.WriteJob("a", map[string]any{"agents": map[string]any{
		"worker": testkit.Script(map[string]any{"action": "COMPLETED", "summary": "w", "delay_ms": 40}),
		"supervisor": testkit.Script(map[string]any{"action": "RETRY", "summary": "redo", "delay_ms": 40},
			map[string]any{"action": "COMPLETED", "summary": "ok", "delay_ms": 40}),
	}})
	engineDone := make(chan error, 1)
	go func() { engineDone <- f.Engine.Run(context.Background(), "a") }()

	const n = 20
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, ooo  int
		other    []error
		runningA int
	)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := f.St.Resume("b", steward.ResumeOptions{Guidance: fmt.Sprintf("guidance %d", i)})
			// Resuming the job the engine runs is refused, never applied.
			_, errA := f.St.Resume("a", steward.ResumeOptions{})
			mu.Lock()
			defer mu.Unlock()
			switch _, isOOO := isOutOfOrder(err); {
			case err == nil:
				ok++
			case isOOO:
				ooo++
			default:
				other = append(other, err)
			}
			if _, isOOO := isOutOfOrder(errA); isOOO {
				runningA++
			} else {
				other = append(other, fmt.Errorf("resume of running job a: %v", errA))
			}
		}()
	}
	close(start)
	wg.Wait()
	if ok != 1 || ooo != n-1 || len(other) != 0 {
		t.Errorf("%d succeeded, %d out of order, others %v; want 1 and %d", ok, ooo, other, n-1)
	}
	if runningA != n {
		t.Errorf("%d of %d resumes of the running job were refused", runningA, n)
	}
	recs := f.Records("b")
	var resumes int
	for _, r := range testkit.OfType(recs, history.TypeSteward) {
		if r.Steward.Command == "resume" {
			resumes++
		}
	}
	if resumes != 1 || len(testkit.OfType(recs, history.TypeTransition)) != 1 {
		t.Errorf("%d steward resume records and %d transitions, want 1 each", resumes, len(testkit.OfType(recs, history.TypeTransition)))
	}
	m := f.Load("b")
	if m.Status != lifecycle.Pending || !strings.HasPrefix(m.Run.Guidance, "guidance ") {
		t.Errorf("b = %s guidance %q", m.Status, m.Run.Guidance)
	}

	select {
	case err := <-engineDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("engine did not finish job a")
	}
	a := f.Load("a")
	if a.Status != lifecycle.Success || a.Metrics.AgentCalls != 4 {
		t.Errorf("a = %s after %d calls, want SUCCESS after 4", a.Status, a.Metrics.AgentCalls)
	}
	ra := f.Records("a")
	if len(testkit.OfType(ra, history.TypeSteward)) != 0 || len(testkit.OfType(ra, history.TypeResponse)) != 4 {
		t.Errorf("job a's history was disturbed: %d steward records, %d responses",
			len(testkit.OfType(ra, history.TypeSteward)), len(testkit.OfType(ra, history.TypeResponse)))
	}
}

// ---------------------------------------------------------------------------
// Halt and activate
// ---------------------------------------------------------------------------

func TestHalt(t *testing.T) {
	t.Parallel()
	for _, st := range []lifecycle.Status{lifecycle.Draft, lifecycle.Pending, lifecycle.InterventionRequired, lifecycle.HaltedCost} {
		t.Run(string(st), func(t *testing.T) {
			f := newFixture(t)
			f.WriteJob("j", withStatus(string(st), ""))
			m, err := f.St.Halt("j", "no longer needed")
			if err != nil {
				t.Fatal(err)
			}
			if m.Status != lifecycle.Canceled {
				t.Errorf("status %s", m.Status)
			}
			stored := f.Load("j")
			if stored.Status != lifecycle.Canceled || stored.Run.Reason != "no longer needed" || stored.Run.FinishedAt == "" {
				t.Errorf("stored: %s run %+v", stored.Status, stored.Run)
			}
			recs := f.Records("j")
			sw := testkit.OfType(recs, history.TypeSteward)
			if len(sw) != 1 || sw[0].Steward.Command != "halt" || sw[0].Steward.Reason != "no longer needed" {
				t.Errorf("steward records %+v", sw)
			}
			trs := testkit.OfType(recs, history.TypeTransition)
			if len(trs) != 1 || trs[0].Transition.Event != string(lifecycle.EvHalt) || trs[0].Transition.From != string(st) {
				t.Errorf("transitions %+v", trs)
			}
			if _, err := os.Stat(filepath.Join(f.Dir, "j", history.JobHistoryFile)); err != nil {
				t.Errorf("jobHistory.json missing after halt: %v", err)
			}

			// Halting it again is out of order and changes nothing.
			before := f.snapshot("j")
			_, err = f.St.Halt("j", "again")
			if e, ok := isOutOfOrder(err); !ok || e.Status != lifecycle.Canceled {
				t.Errorf("second halt: err = %v", err)
			}
			if f.snapshot("j") != before {
				t.Errorf("a refused halt changed the job")
			}
		})
	}
	t.Run("SUCCESS", func(t *testing.T) {
		f := newFixture(t)
		f.WriteJob("j", withStatus("SUCCESS", ""))
		if _, err := f.St.Halt("j", ""); !jobtx.IsOutOfOrder(err) {
			t.Errorf("halt of a finished job: err = %v", err)
		}
	})
	t.Run("default reason", func(t *testing.T) {
		f := newFixture(t)
		f.WriteJob("j", withStatus("PENDING", ""))
		m, err := f.St.Halt("j", "")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(m.Run.Reason, "halted by") {
			t.Errorf("reason %q", m.Run.Reason)
		}
	})
}

func TestActivate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", withStatus("DRAFT", ""))
	// The engine leaves a DRAFT alone.
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Draft || len(f.Records("j")) != 0 {
		t.Fatalf("engine touched a DRAFT: %s", m.Status)
	}
	m, err := f.St.Activate("j")
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != lifecycle.Pending || f.Load("j").Status != lifecycle.Pending {
		t.Fatalf("after activate: %s", f.Load("j").Status)
	}
	recs := f.Records("j")
	if sw := testkit.OfType(recs, history.TypeSteward); len(sw) != 1 || sw[0].Steward.Command != "activate" {
		t.Errorf("steward records %+v", sw)
	}
	if trs := testkit.OfType(recs, history.TypeTransition); len(trs) != 1 || trs[0].Transition.Event != string(lifecycle.EvActivate) {
		t.Errorf("transitions %+v", trs)
	}
	before := f.snapshot("j")
	_, err = f.St.Activate("j")
	if e, ok := isOutOfOrder(err); !ok || e.Status != lifecycle.Pending {
		t.Errorf("activate of PENDING: err = %v", err)
	}
	if f.snapshot("j") != before {
		t.Errorf("a refused activate changed the job")
	}
	// And the activated job runs.
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Errorf("activated job ended %s", m.Status)
	}
}

// ---------------------------------------------------------------------------
// Submit
// ---------------------------------------------------------------------------

func writeFile(t *testing.T, p string, b []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSubmit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	src := t.TempDir()

	// The id comes from the file name when the manifest names none.
	p := writeFile(t, filepath.Join(src, "nightly-report.json"), testkit.ManifestJSON(t, "", map[string]any{}))
	id, m, err := f.St.Submit(p)
	if err != nil {
		t.Fatal(err)
	}
	if id != "nightly-report" || m.JobID != id {
		t.Errorf("id = %q / %q", id, m.JobID)
	}
	stored := f.Load(id)
	if stored.Status != lifecycle.Pending || stored.JobID != id {
		t.Errorf("stored = %s %q", stored.Status, stored.JobID)
	}
	if fi, err := os.Stat(f.Env.Store.Workspace(id)); err != nil || !fi.IsDir() {
		t.Errorf("workspace not created: %v", err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Errorf("submit removed its source file: %v", err)
	}
	// A placed job runs.
	f.Run(id)
	if m := f.Load(id); m.Status != lifecycle.Success {
		t.Errorf("submitted job ended %s", m.Status)
	}

	// The same id again is refused, whatever the file.
	before := f.snapshot(id)
	_, _, err = f.St.Submit(p)
	var ee *steward.ExistsError
	if !errors.As(err, &ee) || ee.ID != id {
		t.Errorf("resubmit: err = %v, want *ExistsError", err)
	}
	p2 := writeFile(t, filepath.Join(src, "other.json"), testkit.ManifestJSON(t, id, map[string]any{}))
	if _, _, err := f.St.Submit(p2); !errors.As(err, &ee) {
		t.Errorf("submit of an existing job_id: err = %v", err)
	}
	if f.snapshot(id) != before {
		t.Errorf("a refused submit changed the existing job")
	}

	// job.json takes its id from its folder.
	p3 := writeFile(t, filepath.Join(src, "from-folder", "job.json"), testkit.ManifestJSON(t, "", map[string]any{"status": "DRAFT"}))
	id3, m3, err := f.St.Submit(p3)
	if err != nil {
		t.Fatal(err)
	}
	if id3 != "from-folder" || m3.Status != lifecycle.Draft || f.Load("from-folder").Status != lifecycle.Draft {
		t.Errorf("id %q status %s", id3, m3.Status)
	}

	// An explicit job_id wins over the file name.
	p4 := writeFile(t, filepath.Join(src, "file-name.json"), testkit.ManifestJSON(t, "explicit-id", map[string]any{}))
	if id4, _, err := f.St.Submit(p4); err != nil || id4 != "explicit-id" {
		t.Errorf("id = %q, err = %v", id4, err)
	}
	if _, err := os.Stat(filepath.Join(f.Dir, "file-name")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a folder named after the file was created")
	}
}

func TestSubmitRefusesInvalidManifests(t *testing.T) {
	t.Parallel()
	cases := map[string][]byte{
		"not json":            []byte(`{"task_description": "x", `),
		"missing agents":      []byte(`{"task_description": "x"}`),
		"unknown field":       []byte(`{"task_description": "x", "agents": {"worker": {"provider": "script", "script": []}, "supervisor": {"provider": "script", "script": []}}, "colour": "red"}`),
		"missing role":        []byte(`{"task_description": "x", "agents": {"worker": {"provider": "script", "script": []}}}`),
		"finished status":     nil, // filled below
		"running status":      nil,
		"invalid derived id":  nil,
		"metrics spent":       nil,
		"audit history":       nil,
		"run state":           nil,
		"bad workflow":        []byte(`{"task_description": "x", "workflow": "nope", "agents": {"worker": {"provider": "script", "script": []}}}`),
		"context escapes":     []byte(`{"task_description": "x", "context_files": ["../secret"], "agents": {"worker": {"provider": "script", "script": []}, "supervisor": {"provider": "script", "script": []}}}`),
		"wrong status string": []byte(`{"task_description": "x", "status": "DONE", "agents": {"worker": {"provider": "script", "script": []}, "supervisor": {"provider": "script", "script": []}}}`),
	}
	for name := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			src := t.TempDir()
			file := filepath.Join(src, "job-x.json")
			body := cases[name]
			switch name {
			case "finished status":
				body = testkit.ManifestJSON(t, "", map[string]any{"status": "SUCCESS"})
			case "running status":
				body = testkit.ManifestJSON(t, "", map[string]any{"status": "RUNNING", "current_phase": "work"})
			case "invalid derived id":
				body = testkit.ManifestJSON(t, "", map[string]any{})
				file = filepath.Join(src, "-bad name.json")
			case "metrics spent": // it halted the job before any call
				body = testkit.ManifestJSON(t, "", map[string]any{"metrics": map[string]any{"cumulative_cost": 999999}})
			case "audit history":
				body = testkit.ManifestJSON(t, "", map[string]any{"history": []any{map[string]any{"role": "Worker", "action": "COMPLETED"}}})
			case "run state":
				body = testkit.ManifestJSON(t, "", map[string]any{"run": map[string]any{"guidance": "from another job"}})
			}
			writeFile(t, file, body)
			id, m, err := f.St.Submit(file)
			if err == nil {
				t.Fatalf("accepted as %q: %+v", id, m)
			}
			var me *manifest.Error
			var mes manifest.Errors
			if !errors.As(err, &me) && !errors.As(err, &mes) {
				t.Errorf("err = %T %v, want a manifest error", err, err)
			}
			if kept := map[string]string{"metrics spent": "/metrics", "audit history": "/history", "run state": "/run"}[name]; kept != "" &&
				(len(mes) != 1 || mes[0].Pointer != kept || !strings.Contains(mes[0].Reason, "a new job starts without it")) {
				t.Errorf("err = %v, want one problem at %s", err, kept)
			}
			ents, _ := os.ReadDir(f.Dir)
			if len(ents) != 0 {
				t.Errorf("a refused submit left %d entries in the jobs folder", len(ents))
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Halt while a call is in flight
// ---------------------------------------------------------------------------

func TestHaltKillsTheCallInFlight(t *testing.T) {
	f := newFixture(t)
	pidFile := filepath.Join(t.TempDir(), "agent.pid")
	worker := map[string]any{"provider": "command", "timeout_seconds": 120,
		"command": map[string]any{"argv": []string{"sh", "-c", `echo $$ > "$1"; exec sleep 30`, "agent", pidFile}}}
	f.WriteJob("j", map[string]any{"agents": map[string]any{"worker": worker, "supervisor": testkit.Script(testkit.Step("COMPLETED", "ok"))}})
	// Another job runs alongside and must be unaffected.
	f.WriteJob("k", map[string]any{})

	s := runner.NewScheduler(context.Background(), f.Engine, 4, testkit.Logger())
	defer s.Stop(runner.ErrShutdown)
	s.Nudge("j")
	s.Nudge("k")
	var pid int
	testkit.WaitFor(t, "the agent to start", 10*time.Second, func() bool {
		var ok bool
		pid, ok = testkit.ReadPID(pidFile)
		return ok && len(testkit.OfType(f.Records("j"), history.TypeIntent)) == 1
	})

	start := time.Now()
	if _, err := f.St.Halt("j", "wrong task"); err != nil {
		t.Fatal(err)
	}
	s.Nudge("j")
	testkit.WaitFor(t, "the run of j to end", 5*time.Second, func() bool {
		return len(testkit.OfType(f.Records("j"), history.TypeResponse)) == 1
	})
	select {
	case <-s.Idle():
	case <-time.After(5 * time.Second):
		t.Fatal("scheduler still busy after the halt")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("halt took %s to stop the agent", d)
	}
	testkit.WaitFor(t, "the agent process to be gone", 2*time.Second, func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})

	m := f.Load("j")
	if m.Status != lifecycle.Canceled || m.Run.Reason != "wrong task" {
		t.Fatalf("status %s reason %q, want CANCELED", m.Status, m.Run.Reason)
	}
	recs := f.Records("j")
	resps := testkit.OfType(recs, history.TypeResponse)
	if r := resps[0].Response; r.ErrorCode != codes.AgentCanceled || r.Status != history.StatusError || r.ExecutionTimeSeconds > 5 {
		t.Errorf("response = %+v, want ERROR/AGENT_CANCELED", r)
	}
	trs := testkit.OfType(recs, history.TypeTransition)
	if last := trs[len(trs)-1].Transition; last.To != string(lifecycle.Canceled) || last.Event != string(lifecycle.EvHalt) {
		t.Errorf("last transition %+v: the engine overwrote the halt", last)
	}
	if n := len(testkit.OfType(recs, history.TypeIntent)); n != 1 {
		t.Errorf("%d intents: the halted job was called again", n)
	}
	// jobHistory.json, refreshed when a job parks, includes that response.
	var jh history.JobHistory
	b, err := os.ReadFile(filepath.Join(f.Dir, "j", history.JobHistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &jh); err != nil {
		t.Fatal(err)
	}
	var inter *history.Interaction
	for i := range jh.Interactions {
		if jh.Interactions[i].Role == "worker" {
			inter = &jh.Interactions[i]
		}
	}
	if inter == nil || inter.Response == nil || inter.Response.ErrorCode != codes.AgentCanceled {
		t.Errorf("jobHistory.json is stale: the canceled call has no response there: %+v", inter)
	}
	// Nudging a finished job starts nothing.
	s.Nudge("j")
	if f.Load("j").Status != lifecycle.Canceled {
		t.Errorf("status changed after a later nudge")
	}
	if k := f.Load("k"); k.Status != lifecycle.Success {
		t.Errorf("the other job ended %s", k.Status)
	}
	if c := f.Load("j").Metrics.AgentCalls; c != 1 {
		t.Errorf("agent_calls = %d", c)
	}
}

// ---------------------------------------------------------------------------
// G. Illegal transitions are refused
// ---------------------------------------------------------------------------

func TestIllegalTransitionChangesNothing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		from, phase string
		ev          lifecycle.Event
		to          lifecycle.Status
	}{
		{"PENDING", "", lifecycle.EvResume, lifecycle.Pending},
		{"SUCCESS", "review", lifecycle.EvResume, lifecycle.Pending},
		{"CANCELED", "work", lifecycle.EvActivate, lifecycle.Pending},
		{"DRAFT", "", lifecycle.EvStart, lifecycle.Running},
		{"RUNNING", "work", lifecycle.EvSucceed, lifecycle.Canceled},
		{"RUNNING", "work", lifecycle.EvAdvance, lifecycle.Success},
		{"INTERVENTION_REQUIRED", "work", lifecycle.EvAdvance, lifecycle.Running},
		{"HALTED_COST", "work", lifecycle.EvStart, lifecycle.Running},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s-%s-%s", tc.from, tc.ev, tc.to), func(t *testing.T) {
			f := newFixture(t)
			f.WriteJob("j", withStatus(tc.from, tc.phase))
			tx, err := jobtx.Begin(f.Env, "j", nil)
			if err != nil {
				t.Fatal(err)
			}
			err = tx.Transition(tc.ev, tc.to, "", "TEST", "should be refused")
			var it *lifecycle.IllegalTransition
			if !errors.As(err, &it) {
				tx.Close()
				t.Fatalf("err = %v, want *lifecycle.IllegalTransition", err)
			}
			if it.From != lifecycle.Status(tc.from) || it.To != tc.to || it.Event != tc.ev {
				t.Errorf("error = %+v", it)
			}
			if tx.M.Status != lifecycle.Status(tc.from) || tx.M.Phase() != tc.phase {
				t.Errorf("in-memory manifest changed to %s/%s", tx.M.Status, tx.M.Phase())
			}
			// Even a commit after the refusal must not record it.
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			tx.Close()
			m := f.Load("j")
			if m.Status != lifecycle.Status(tc.from) || m.Phase() != tc.phase {
				t.Errorf("stored manifest became %s/%s", m.Status, m.Phase())
			}
			// The refusal itself is recorded (the daemon logs it when
			// another process made it), the transition is not.
			recs := f.Records("j")
			if len(recs) != 1 || recs[0].Type != history.TypeError || recs[0].Error == nil ||
				recs[0].Error.Code != codes.IllegalTransition || recs[0].Role != "TEST" || recs[0].StateBefore != tc.from {
				t.Errorf("history after a refused transition: %+v, want one ILLEGAL_TRANSITION error by TEST in %s", recs, tc.from)
			}
		})
	}
	t.Run("untouched without commit", func(t *testing.T) {
		f := newFixture(t)
		f.WriteJob("j", withStatus("SUCCESS", "review"))
		before := f.Load("j")
		tx, err := jobtx.Begin(f.Env, "j", nil)
		if err != nil {
			t.Fatal(err)
		}
		// A change in progress when the refusal comes is dropped with
		// it; the refusal's record is written at once, on its own.
		tx.M.Run.Guidance = "dropped"
		if err := tx.Append(&history.Record{Type: history.TypeSteward, Steward: &history.Steward{Command: "halt"}}); err != nil {
			t.Fatal(err)
		}
		err = tx.Transition(lifecycle.EvHalt, lifecycle.Canceled, "", "TEST", "")
		tx.Close()
		var it *lifecycle.IllegalTransition
		if !errors.As(err, &it) {
			t.Fatalf("err = %v", err)
		}
		if !strings.Contains(err.Error(), "recorded in its history as ILLEGAL_TRANSITION") {
			t.Errorf("err = %v, want it to say the refusal is recorded", err)
		}
		if after := f.Load("j"); after.Run.Guidance != before.Run.Guidance || after.Status != before.Status {
			t.Errorf("manifest changed")
		}
		recs := f.Records("j")
		if len(recs) != 1 || recs[0].Type != history.TypeError || recs[0].Error.Code != codes.IllegalTransition {
			t.Errorf("history: %+v, want the ILLEGAL_TRANSITION error alone", recs)
		}
	})
	t.Run("a legal one is applied", func(t *testing.T) {
		f := newFixture(t)
		f.WriteJob("j", withStatus("PENDING", ""))
		tx, err := jobtx.Begin(f.Env, "j", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Transition(lifecycle.EvStart, lifecycle.Running, "work", "TEST", ""); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		tx.Close()
		if m := f.Load("j"); m.Status != lifecycle.Running || m.Phase() != "work" {
			t.Errorf("stored %s/%s", m.Status, m.Phase())
		}
		if trs := testkit.OfType(f.Records("j"), history.TypeTransition); len(trs) != 1 {
			t.Errorf("%d transitions recorded", len(trs))
		}
	})
}

// A resume's new budgets pass one rule, whoever asks: an infinite or NaN
// budget (which would turn it off), a negative cost, a time of 0 and no
// calls are refused, naming the field, and the job is left as it was.
func TestResumeRefusesABudgetThatIsNone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", map[string]any{"agents": map[string]any{
		"worker":     testkit.Script(testkit.Step("STUCK", "needs a human")),
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "ok")),
	}})
	f.Run("j")
	before := len(f.Records("j"))
	num := func(v float64) *float64 { return &v }
	zero := 0
	for _, c := range []struct {
		o     steward.ResumeOptions
		field string
	}{
		{steward.ResumeOptions{CostThreshold: num(math.NaN())}, "cost_threshold"},
		{steward.ResumeOptions{CostThreshold: num(math.Inf(1))}, "cost_threshold"},
		{steward.ResumeOptions{CostThreshold: num(-1)}, "cost_threshold"},
		{steward.ResumeOptions{TimeThresholdMinutes: num(math.Inf(1))}, "time_threshold_minutes"},
		{steward.ResumeOptions{TimeThresholdMinutes: num(0)}, "time_threshold_minutes"},
		{steward.ResumeOptions{MaxAgentCalls: &zero}, "max_agent_calls"},
	} {
		_, err := f.St.Resume("j", c.o)
		var bad *steward.OptionError
		if !errors.As(err, &bad) || bad.Field != c.field {
			t.Errorf("%+v: %v, want an OptionError on %s", c.o, err, c.field)
		}
	}
	if m := f.Load("j"); m.Status != lifecycle.InterventionRequired || len(f.Records("j")) != before {
		t.Fatalf("a refused resume changed the job: %s, %d records (had %d)", m.Status, len(f.Records("j")), before)
	}
	if _, err := f.St.Resume("j", steward.ResumeOptions{CostThreshold: num(5), TimeThresholdMinutes: num(1)}); err != nil {
		t.Fatalf("finite budgets: %v", err)
	}
}

// A manifest's prompt files come with it: submit copies each from beside
// the manifest into the job's folder before the job can start, and the
// job's agents get them; a prompt file that is not there is refused at
// its field, and nothing is placed.
func TestSubmitBringsThePromptFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "worker-prompt.md"), []byte("You are the careful worker."))
	writeFile(t, filepath.Join(src, "prompts", "sup.md"), []byte("You review."))
	p := writeFile(t, filepath.Join(src, "with-prompts.json"), testkit.ManifestJSON(t, "", map[string]any{
		"prompts": map[string]any{"worker": "worker-prompt.md", "supervisor": "prompts/sup.md"}}))
	id, _, err := f.St.Submit(p)
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]string{"worker-prompt.md": "You are the careful worker.", "prompts/sup.md": "You review."} {
		if b, err := os.ReadFile(filepath.Join(f.Dir, id, rel)); err != nil || string(b) != want {
			t.Errorf("%s in the job folder: %q, %v", rel, b, err)
		}
	}
	f.Run(id)
	if m := f.Load(id); m.Status != lifecycle.Success {
		t.Fatalf("the job ended %s (%s)", m.Status, m.Run.Reason)
	}
	intents := testkit.OfType(f.Records(id), history.TypeIntent)
	if len(intents) == 0 || intents[0].Request.SystemPrompt != "You are the careful worker." {
		t.Errorf("the worker's system prompt is not its file's")
	}

	p2 := writeFile(t, filepath.Join(src, "missing-prompt.json"), testkit.ManifestJSON(t, "", map[string]any{
		"prompts": map[string]any{"worker": "nowhere.md"}}))
	_, _, err = f.St.Submit(p2)
	if err == nil || !strings.Contains(err.Error(), "/prompts/worker") || !strings.Contains(err.Error(), `prompt file "nowhere.md", beside the manifest`) {
		t.Errorf("a missing prompt file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.Dir, "missing-prompt")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a refused submit placed its job")
	}
}

// A steward's command on a job whose history was removed whole (its log,
// head and mark) while job.json shows recorded work is refused, as a run
// is: its record would start a new history and drop the old one for
// good, after which the run would go on and verify would find nothing
// wrong. Nothing is written; restoring the files lets the job go on.
func TestCommandOnAJobWhoseHistoryIsGoneIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", map[string]any{"agents": map[string]any{
		"worker":     testkit.Script(testkit.Step("STUCK", "Needs a human."), testkit.Step("COMPLETED", "Done.")),
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "Fine.")),
	}})
	f.Run("j")
	dir := f.Env.Store.JobDir("j")
	moved := t.TempDir()
	files := []string{history.FileName, history.HeadFile, "history-mark.json"}
	for _, name := range files {
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(moved, name)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	before, _ := os.ReadFile(filepath.Join(dir, jobstore.ManifestFile))
	_, err := f.St.Resume("j", steward.ResumeOptions{Guidance: "go on"})
	var missing *jobtx.HistoryMissingError
	if !errors.As(err, &missing) || !strings.Contains(err.Error(), "restore the file") {
		t.Fatalf("resume with the history gone: %v; want a HistoryMissingError", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, history.FileName)); err == nil && fi.Size() > 0 {
		t.Errorf("a new history was started: %d bytes", fi.Size())
	}
	if after, _ := os.ReadFile(filepath.Join(dir, jobstore.ManifestFile)); string(after) != string(before) {
		t.Errorf("job.json changed")
	}
	for _, name := range files {
		if err := os.Rename(filepath.Join(moved, name), filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if _, err := f.St.Resume("j", steward.ResumeOptions{Guidance: "go on"}); err != nil {
		t.Fatalf("resume once the history is back: %v", err)
	}
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("after the history's return: %s", m.Status)
	}
}
