package manifest

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/lifecycle"
)

func decodeOK(t *testing.T, s string) *Manifest {
	t.Helper()
	m, err := Decode("job.json", []byte(s))
	if err != nil {
		t.Fatalf("Decode: %v\n%s", err, s)
	}
	return m
}

// problems flattens a Decode error into its *Error parts.
func problems(t *testing.T, err error) []*Error {
	t.Helper()
	if err == nil {
		t.Fatal("Decode succeeded, want an error")
	}
	var es Errors
	if errors.As(err, &es) {
		if len(es) == 0 {
			t.Fatal("empty Errors")
		}
		return es
	}
	var e *Error
	if errors.As(err, &e) {
		return []*Error{e}
	}
	t.Fatalf("error %v (%T) is neither Errors nor *Error", err, err)
	return nil
}

// wantProblem asserts that decoding s fails with a problem at pointer whose
// reason contains reasonPart, and that every problem names the file. It
// returns that problem; callers that want only the assertion drop it.
func wantProblem(t *testing.T, s, pointer, reasonPart string) *Error {
	t.Helper()
	m, err := Decode("jobs/x/job.json", []byte(s))
	if m != nil {
		t.Errorf("manifest returned with error")
	}
	ps := problems(t, err)
	var hit *Error
	for _, p := range ps {
		if p.File != "jobs/x/job.json" {
			t.Errorf("problem %v names file %q", p, p.File)
		}
		if p.Reason == "" {
			t.Errorf("problem %v has no reason", p)
		}
		if p.Pointer == pointer && strings.Contains(p.Reason, reasonPart) {
			hit = p
		}
	}
	if hit == nil {
		t.Fatalf("no problem at %q mentioning %q; got %v", pointer, reasonPart, err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "jobs/x/job.json") || (pointer != "" && !strings.Contains(msg, pointer)) {
		t.Errorf("message %q does not name file and pointer", msg)
	}
	return hit
}

func TestDecodeMinimalGetsDefaults(t *testing.T) {
	m := decodeOK(t, minimal)
	if m.Status != lifecycle.Pending {
		t.Errorf("Status = %q, want PENDING", m.Status)
	}
	if m.SchemaVersion != CurrentVersion || CurrentVersion != 1 {
		t.Errorf("SchemaVersion = %d, want 1", m.SchemaVersion)
	}
	if m.JobID != "" || m.CurrentPhase != nil || m.Phase() != "" {
		t.Errorf("JobID %q phase %v, want empty", m.JobID, m.CurrentPhase)
	}
	if m.History == nil || len(m.History) != 0 {
		t.Errorf("History = %#v, want empty non-nil", m.History)
	}
	if m.TaskDescription != "Write hello.txt" {
		t.Errorf("TaskDescription = %q", m.TaskDescription)
	}
	w, ok := m.Agents["worker"]
	if !ok || w.Provider != "script" || len(w.Script) != 1 || w.Script[0].Action != "COMPLETED" || w.Script[0].Summary != "done" {
		t.Errorf("worker = %+v", w)
	}
	if _, ok := m.Agents["supervisor"]; !ok {
		t.Error("supervisor missing")
	}
	if m.MaxRetries() != DefaultMaxRetries || m.MaxAPIRetries() != DefaultMaxAPIRetries {
		t.Errorf("retries %d/%d", m.MaxRetries(), m.MaxAPIRetries())
	}
	if m.BackoffInitial() != time.Second {
		t.Errorf("BackoffInitial = %v", m.BackoffInitial())
	}
	if m.CallTimeout("worker") != 30*time.Minute {
		t.Errorf("CallTimeout = %v", m.CallTimeout("worker"))
	}
	if m.TimeBudget() != 0 || m.OverCost() || m.OverTime() {
		t.Errorf("budgets without thresholds: %v %v %v", m.TimeBudget(), m.OverCost(), m.OverTime())
	}
}

func TestDecodeExplicitFields(t *testing.T) {
	m := decodeOK(t, withFields(`"schema_version": 1, "job_id": "job-1.a_b", "status": "REVIEWING", "current_phase": "review",
		"created_at": "2025-01-29T10:00:00Z", "description": "d", "context_files": ["spec.md", "dir/a.txt", "..notparent"],
		"prompts": {"worker": "prompts/w.md"}, "cost_threshold": 100, "time_threshold_minutes": 60, "seed": 7,
		"metrics": {"cumulative_cost": 5, "cumulative_time_seconds": 10, "agent_calls": 2},
		"history": [{"timestamp": "2025-01-29T10:00:00Z", "role": "worker", "action": "COMPLETED", "phase": "work", "evidence_files": ["a"]}],
		"run": {"reason": "r", "phase_retries": 1}`))
	if m.JobID != "job-1.a_b" || m.Status != lifecycle.Reviewing || m.Phase() != "review" {
		t.Errorf("got %q %q %q", m.JobID, m.Status, m.Phase())
	}
	if len(m.ContextFiles) != 3 || m.Prompts["worker"] != "prompts/w.md" || *m.Seed != 7 {
		t.Errorf("context %v prompts %v", m.ContextFiles, m.Prompts)
	}
	if m.Metrics.CumulativeCost != 5 || m.Metrics.AgentCalls != 2 || len(m.History) != 1 || *m.History[0].Phase != "work" {
		t.Errorf("metrics %+v history %+v", m.Metrics, m.History)
	}
	if m.Run.Reason != "r" || m.Run.PhaseRetries != 1 {
		t.Errorf("run %+v", m.Run)
	}
	if m.TimeBudget() != time.Hour {
		t.Errorf("TimeBudget = %v", m.TimeBudget())
	}
}

func TestDecodeEveryStatus(t *testing.T) {
	for _, s := range lifecycle.All {
		fields := `"status": "` + string(s) + `"`
		if s == lifecycle.Running || s == lifecycle.Reviewing {
			// A running job must say where it is.
			if _, err := Decode("job.json", []byte(withFields(fields))); err == nil || !strings.Contains(err.Error(), "/current_phase") {
				t.Errorf("%s without current_phase: err = %v", s, err)
			}
			fields += `, "current_phase": "work"`
		}
		m := decodeOK(t, withFields(fields))
		if m.Status != s {
			t.Errorf("status %s decoded as %s", s, m.Status)
		}
	}
}

func TestDecodeInvalidJSON(t *testing.T) {
	for _, c := range []struct{ name, data, where string }{
		{"truncated", "{\n  \"task_description\": \"t\",\n  \"agents\": {", "line 3"},
		{"bad token", "{\n  \"task_description\": \"t\",\n  \"agents\": x\n}", "line 3 column 14"},
		{"trailing comma", `{"task_description": "t",}`, "line 1"},
		{"nul byte", "{\"task_description\": \"t\x00\"}", "line 1"},
		{"nul outside", "{\x00}", "line 1 column 3"},
		{"empty", "", ""},
		{"two values", minimal + minimal, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := wantProblem(t, c.data, "", "invalid JSON")
			if !strings.Contains(p.Reason, c.where) {
				t.Errorf("reason %q does not locate the error at %q", p.Reason, c.where)
			}
		})
	}
}

func TestDecodeNotAnObject(t *testing.T) {
	for _, s := range []string{`[]`, `"x"`, `1`, `null`} {
		_ = wantProblem(t, s, "", "JSON object")
	}
}

func TestDecodeDeeplyNested(t *testing.T) {
	for _, depth := range []int{200, 5000, 20000} {
		s := withFields(`"seed": ` + strings.Repeat("[", depth) + strings.Repeat("]", depth))
		_, err := Decode("job.json", []byte(s))
		if err == nil {
			t.Fatalf("depth %d accepted", depth)
		}
		problems(t, err)
	}
}

func TestDecodeTooLarge(t *testing.T) {
	big := withFields(`"description": "` + strings.Repeat("x", MaxSize) + `"`)
	p := wantProblem(t, big, "", "larger than")
	if !strings.Contains(p.Reason, "1048576") {
		t.Errorf("reason %q does not state the limit", p.Reason)
	}
	// Exactly MaxSize bytes is not refused for its size.
	pad := MaxSize - len(minimal)
	exact := minimal + strings.Repeat(" ", pad)
	if len(exact) != MaxSize {
		t.Fatal("bad padding")
	}
	decodeOK(t, exact)
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "job.json")
	if err := os.WriteFile(p, []byte(minimal), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := ReadFile(p)
	if err != nil || m.Status != lifecycle.Pending {
		t.Fatalf("ReadFile: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
	// A huge file is refused by size, naming the file.
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(strings.Repeat(" ", MaxSize+10)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = ReadFile(big)
	var e *Error
	if !errors.As(err, &e) || e.File != big || !strings.Contains(e.Reason, "larger than") {
		t.Errorf("big file: %v", err)
	}
}

func TestDecodeSchemaViolations(t *testing.T) {
	cases := []struct {
		name, data, pointer, reason string
	}{
		{"unknown top-level field", withFields(`"colour": "blue"`), "/", "colour"},
		{"cost_threshold string", withFields(`"cost_threshold": "5"`), "/cost_threshold", "string"},
		{"cost_threshold negative", withFields(`"cost_threshold": -1`), "/cost_threshold", ""},
		{"time threshold zero", withFields(`"time_threshold_minutes": 0`), "/time_threshold_minutes", ""},
		{"unknown status", withFields(`"status": "DONE"`), "/status", "PENDING"},
		{"lowercase status", withFields(`"status": "pending"`), "/status", ""},
		{"status number", withFields(`"status": 1`), "/status", ""},
		{"job_id slash", withFields(`"job_id": "a/b"`), "/job_id", ""},
		{"job_id dotdot", withFields(`"job_id": "a..b"`), "/job_id", ""},
		{"job_id only dotdot", withFields(`"job_id": ".."`), "/job_id", ""},
		{"job_id control char", withFields(`"job_id": "ab\u0007c"`), "/job_id", ""},
		{"job_id newline", withFields(`"job_id": "abc\n"`), "/job_id", ""},
		{"job_id leading dash", withFields(`"job_id": "-rf"`), "/job_id", ""},
		{"job_id leading dot", withFields(`"job_id": ".hidden"`), "/job_id", ""},
		{"job_id empty", withFields(`"job_id": ""`), "/job_id", ""},
		{"job_id too long", withFields(`"job_id": "` + strings.Repeat("a", 129) + `"`), "/job_id", ""},
		{"job_id number", withFields(`"job_id": 5`), "/job_id", ""},
		{"missing task", `{` + agentsJSON + `}`, "/", "task_description"},
		{"empty task", `{"task_description": "", ` + agentsJSON + `}`, "/task_description", ""},
		{"missing agents", `{"task_description": "t"}`, "/", "agents"},
		{"no agents", `{"task_description": "t", "agents": {}}`, "/agents", ""},
		{"unknown provider", `{"task_description": "t", "agents": {"worker": {"provider": "openai"}}}`, "/agents/worker/provider", ""},
		{"script without steps", `{"task_description": "t", "agents": {"worker": {"provider": "script"}}}`, "/agents/worker", "script"},
		{"empty script", `{"task_description": "t", "agents": {"worker": {"provider": "script", "script": []}, "supervisor": {"provider": "script", "script": [{}]}}}`, "/agents/worker/script", ""},
		{"command without command", `{"task_description": "t", "agents": {"worker": {"provider": "command"}}}`, "/agents/worker", "command"},
		{"unknown agent field", `{"task_description": "t", "agents": {"worker": {"provider": "script", "script": [{}], "temperature": 1}}}`, "/agents/worker", "temperature"},
		{"bad role name", `{"task_description": "t", "agents": {"Worker": {"provider": "script", "script": [{}]}}}`, "/agents/Worker", "must be a name: a lowercase letter"},
		{"bad script error", `{"task_description": "t", "agents": {"worker": {"provider": "script", "script": [{"error": "boom"}]}}}`, "/agents/worker/script/0/error", ""},
		{"max_retries string", withFields(`"limits": {"max_retries": "3"}`), "/limits/max_retries", ""},
		{"limits unknown", withFields(`"limits": {"retries": 3}`), "/limits", "retries"},
		{"metrics negative", withFields(`"metrics": {"cumulative_cost": -1}`), "/metrics/cumulative_cost", ""},
		{"created_at not a date", withFields(`"created_at": "yesterday"`), "/created_at", ""},
		{"history bad timestamp", withFields(`"history": [{"timestamp": "now"}]`), "/history/0/timestamp", ""},
		{"context file absolute", withFields(`"context_files": ["/etc/passwd"]`), "/context_files/0", ""},
		{"context file parent", withFields(`"context_files": ["ok.md", "../secret"]`), "/context_files/1", ""},
		{"context file inner parent", withFields(`"context_files": ["a/../../b"]`), "/context_files/0", ""},
		{"context file nul", withFields(`"context_files": ["a\u0000b"]`), "/context_files/0", ""},
		{"prompt absolute", withFields(`"prompts": {"worker": "/etc/passwd"}`), "/prompts/worker", ""},
		{"workflow bad name", withFields(`"workflow": "Not A Name"`), "/workflow", ""},
		// The object's own problem, not "expected string" from the other branch.
		{"workflow inline missing on", withFields(`"workflow": {"name": "w", "start": "a", "phases": {"a": {"role": "worker"}}}`), "/workflow/phases/a", "missing properties: 'on'"},
		{"workflow phase name with a space", withFields(`"workflow": {"name": "w", "start": "a", "phases": {"a": {"role": "worker", "on": {"COMPLETED": "final review", "RETRY": "a", "STUCK": "a"}}, "final review": {"role": "worker", "on": {"COMPLETED": "SUCCESS", "RETRY": "a", "STUCK": "a"}}}}`), "/workflow/phases/final review", "must be a name: a lowercase letter"},
		{"schema_version zero", withFields(`"schema_version": 0`), "/schema_version", ""},
		{"schema_version string", withFields(`"schema_version": "1"`), "/schema_version", ""},
		{"command answer bad", `{"task_description": "t", "agents": {"worker": {"provider": "command", "command": {"argv": ["x"], "answer": "socket"}}, "supervisor": {"provider": "script", "script": [{}]}}}`, "/agents/worker/command/answer", ""},
		{"command empty argv", `{"task_description": "t", "agents": {"worker": {"provider": "command", "command": {"argv": []}}, "supervisor": {"provider": "script", "script": [{}]}}}`, "/agents/worker/command/argv", ""},
	}
	for _, c := range cases {
		_ = t.Run(c.name, func(t *testing.T) { _ = wantProblem(t, c.data, c.pointer, c.reason) })
	}
}

func TestDecodeReportsAllSchemaViolations(t *testing.T) {
	_, err := Decode("job.json", []byte(withFields(`"status": "DONE", "cost_threshold": "x", "job_id": "a/b"`)))
	ps := problems(t, err)
	got := map[string]bool{}
	for _, p := range ps {
		got[p.Pointer] = true
	}
	for _, want := range []string{"/status", "/cost_threshold", "/job_id"} {
		if !got[want] {
			t.Errorf("no problem at %s in %v", want, err)
		}
	}
}

func TestDecodeTooNew(t *testing.T) {
	for _, v := range []string{"2", "99"} {
		p := wantProblem(t, withFields(`"schema_version": `+v), "/schema_version", "newer")
		if !strings.Contains(p.Reason, "version "+v) || !strings.Contains(p.Reason, "upgrade") {
			t.Errorf("reason %q", p.Reason)
		}
		// Said once (it read "... newer than this logist supports
		// (version 2 is newer than this logist supports, 1; ...)").
		if n := strings.Count(p.Error(), "newer than"); n != 1 {
			t.Errorf("%q says it %d times", p.Error(), n)
		}
	}
	// A newer manifest is refused before schema checks, even if it has
	// fields this version does not know.
	p := wantProblem(t, `{"schema_version": 2, "brand_new_field": {}}`, "/schema_version", "newer")
	if strings.Contains(p.Reason, "brand_new_field") {
		t.Errorf("reason %q", p.Reason)
	}
}

func TestDecodeSemanticChecks(t *testing.T) {
	t.Run("unknown builtin workflow", func(t *testing.T) {
		_ = wantProblem(t, withFields(`"workflow": "nonexistent"`), "/workflow", "nonexistent")
	})
	t.Run("inline target missing", func(t *testing.T) {
		_ = wantProblem(t, withFields(`"workflow": {"name": "w", "start": "a", "phases": {"a": {"role": "worker", "on": {"COMPLETED": "b", "RETRY": "a", "STUCK": "INTERVENTION_REQUIRED"}}}}`), "/workflow/phases/a/on/COMPLETED", `"b"`)
	})
	t.Run("inline start missing", func(t *testing.T) {
		_ = wantProblem(t, withFields(`"workflow": {"name": "w", "start": "zzz", "phases": {"a": {"role": "worker", "on": {"COMPLETED": "SUCCESS", "RETRY": "a", "STUCK": "a"}}}}`), "/workflow/start", "zzz")
	})
	t.Run("role without agent", func(t *testing.T) {
		_ = wantProblem(t, `{"task_description": "t", "agents": {"worker": {"provider": "script", "script": [{}]}}}`, "/agents", `"supervisor"`)
	})
	t.Run("inline role without agent", func(t *testing.T) {
		_ = wantProblem(t, withFields(`"workflow": {"name": "w", "start": "a", "phases": {"a": {"role": "critic", "on": {"COMPLETED": "SUCCESS", "RETRY": "a", "STUCK": "INTERVENTION_REQUIRED"}}}}`), "/agents", `"critic"`)
	})
	t.Run("current phase unknown", func(t *testing.T) {
		_ = wantProblem(t, withFields(`"current_phase": "deploy"`), "/current_phase", "deploy")
	})
	t.Run("answer file without placeholder", func(t *testing.T) {
		_ = wantProblem(t, `{"task_description": "t", "agents": {"worker": {"provider": "command", "command": {"argv": ["agent", "--out", "x.json"], "answer": "file"}}, "supervisor": {"provider": "script", "script": [{}]}}}`,
			"/agents/worker/command/argv", "{answer_file}")
	})
	t.Run("empty program", func(t *testing.T) {
		for _, argv := range []string{`[""]`, `["  ", "--request", "{request_file}"]`} {
			_ = wantProblem(t, `{"task_description": "t", "agents": {"worker": {"provider": "command", "command": {"argv": `+argv+`}}, "supervisor": {"provider": "script", "script": [{}]}}}`,
				"/agents/worker/command/argv/0", "empty")
		}
	})
	t.Run("answer file with placeholder", func(t *testing.T) {
		m := decodeOK(t, `{"task_description": "t", "agents": {"worker": {"provider": "command", "command": {"argv": ["agent", "--out={answer_file}"], "answer": "file", "stdin": "request"}}, "supervisor": {"provider": "script", "script": [{}]}}}`)
		if c := m.Agents["worker"].Command; c == nil || c.Answer != "file" || c.Stdin != "request" || len(c.Argv) != 2 {
			t.Errorf("command %+v", c)
		}
	})
	t.Run("time threshold underflows to zero", func(t *testing.T) {
		_ = wantProblem(t, withFields(`"time_threshold_minutes": 1e-400`), "/time_threshold_minutes", "> 0")
	})
	t.Run("call timeout underflows to zero", func(t *testing.T) {
		_ = wantProblem(t, withFields(`"limits": {"call_timeout_seconds": 1e-400}`), "/limits/call_timeout_seconds", "> 0")
	})
	t.Run("context file starting with dots is inside", func(t *testing.T) {
		m := decodeOK(t, withFields(`"context_files": ["..hidden", "a/..b"]`))
		if len(m.ContextFiles) != 2 {
			t.Errorf("context files %v", m.ContextFiles)
		}
	})
}

func TestCheckContextFilesDirectly(t *testing.T) {
	// The schema already refuses these; check() must too, in case a
	// manifest is built in code and checked without the schema.
	m := decodeOK(t, minimal)
	m.ContextFiles = []string{"ok.md", "../up", "/abs", "a/../../b", "..", "..x"}
	err := m.check("job.json")
	ps := problems(t, err)
	got := map[string]bool{}
	for _, p := range ps {
		got[p.Pointer] = true
	}
	for _, want := range []string{"/context_files/1", "/context_files/2", "/context_files/3", "/context_files/4"} {
		if !got[want] {
			t.Errorf("no problem at %s: %v", want, err)
		}
	}
	for _, not := range []string{"/context_files/0", "/context_files/5"} {
		if got[not] {
			t.Errorf("unexpected problem at %s: %v", not, err)
		}
	}
}

func TestValidID(t *testing.T) {
	for _, id := range []string{"a", "job-1", "A.b_c-9", strings.Repeat("x", 128), "a.b"} {
		if err := ValidID(id); err != nil {
			t.Errorf("ValidID(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", "-a", ".a", "_a", "a/b", "a\\b", "a..b", "..", "a b", "a\x00", "a\n", "é", strings.Repeat("x", 129)} {
		if err := ValidID(id); err == nil {
			t.Errorf("ValidID(%q) = nil", id)
		}
	}
}

// FuzzIDChars holds idChars to the regular expression it replaced (a loop
// because compiling that expression cost every program's start).
func FuzzIDChars(f *testing.F) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	for _, id := range []string{"", "a", "-a", "a-", "a.b_c-9", "é", "a\xff", "a\n", strings.Repeat("x", 128), strings.Repeat("x", 129), "x" + strings.Repeat("é", 60)} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := idChars(id), re.MatchString(id); got != want {
			t.Fatalf("idChars(%q) = %v, the expression says %v", id, got, want)
		}
	})
}

func TestResolveWorkflow(t *testing.T) {
	m := decodeOK(t, minimal)
	w, err := m.ResolveWorkflow()
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "supervised" || w.Start != "work" {
		t.Errorf("default workflow %s start %s", w.Name, w.Start)
	}
	if roles := w.Roles(); len(roles) != 2 || roles[0] != "supervisor" || roles[1] != "worker" {
		t.Errorf("roles %v", roles)
	}
	if next, err := w.Next("review", "COMPLETED"); err != nil || next != "SUCCESS" {
		t.Errorf("review COMPLETED -> %q %v", next, err)
	}

	m = decodeOK(t, withFields(`"workflow": "supervised"`))
	if w, err := m.ResolveWorkflow(); err != nil || w.Name != "supervised" {
		t.Errorf("named supervised: %v %v", w, err)
	}

	m = decodeOK(t, withFields(`"workflow": {"name": "solo", "start": "do", "phases": {
		"do": {"role": "worker", "on": {"COMPLETED": "check", "RETRY": "do", "STUCK": "INTERVENTION_REQUIRED"}},
		"check": {"role": "supervisor", "status": "REVIEWING", "on": {"COMPLETED": "SUCCESS", "RETRY": "do", "STUCK": "INTERVENTION_REQUIRED"}}}}`))
	w, err = m.ResolveWorkflow()
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "solo" || w.Start != "do" || len(w.Phases) != 2 {
		t.Errorf("inline workflow %+v", w)
	}
	if w.Phases["do"].Status != lifecycle.Running || w.Phases["check"].Status != lifecycle.Reviewing {
		t.Errorf("phase statuses %q %q (missing status defaults to RUNNING)", w.Phases["do"].Status, w.Phases["check"].Status)
	}

	// Built directly, without Decode.
	bad := &Manifest{Workflow: json.RawMessage(`"nope"`)}
	if _, err := bad.ResolveWorkflow(); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown workflow: %v", err)
	}
	bad = &Manifest{Workflow: json.RawMessage(`{"name": 5}`)}
	if _, err := bad.ResolveWorkflow(); err == nil {
		t.Error("malformed inline workflow accepted")
	}
}

func TestLimits(t *testing.T) {
	m := decodeOK(t, withFields(`"limits": {"max_retries": 0, "max_api_retries": 7, "backoff_initial_ms": 250, "call_timeout_seconds": 12.5}`))
	if m.MaxRetries() != 0 {
		t.Errorf("MaxRetries = %d, want explicit 0", m.MaxRetries())
	}
	if m.MaxAPIRetries() != 7 {
		t.Errorf("MaxAPIRetries = %d", m.MaxAPIRetries())
	}
	if m.BackoffInitial() != 250*time.Millisecond {
		t.Errorf("BackoffInitial = %v", m.BackoffInitial())
	}
	if m.CallTimeout("worker") != 12500*time.Millisecond {
		t.Errorf("CallTimeout = %v", m.CallTimeout("worker"))
	}

	// A role's own timeout wins over limits; other roles use limits.
	m = decodeOK(t, `{"task_description": "t", "limits": {"call_timeout_seconds": 60}, "agents": {
		"worker": {"provider": "script", "script": [{}], "timeout_seconds": 5},
		"supervisor": {"provider": "script", "script": [{}]}}}`)
	if m.CallTimeout("worker") != 5*time.Second || m.CallTimeout("supervisor") != time.Minute || m.CallTimeout("nobody") != time.Minute {
		t.Errorf("CallTimeout worker %v supervisor %v nobody %v", m.CallTimeout("worker"), m.CallTimeout("supervisor"), m.CallTimeout("nobody"))
	}
	// Only a role timeout, no limits: default for the others.
	m = decodeOK(t, `{"task_description": "t", "agents": {
		"worker": {"provider": "script", "script": [{}], "timeout_seconds": 0.25},
		"supervisor": {"provider": "script", "script": [{}]}}}`)
	if m.CallTimeout("worker") != 250*time.Millisecond || m.CallTimeout("supervisor") != DefaultCallTimeoutSecs*time.Second {
		t.Errorf("CallTimeout worker %v supervisor %v", m.CallTimeout("worker"), m.CallTimeout("supervisor"))
	}
	// Partial limits keep the other defaults.
	m = decodeOK(t, withFields(`"limits": {"max_api_retries": 1}`))
	if m.MaxRetries() != DefaultMaxRetries || m.MaxAPIRetries() != 1 || m.BackoffInitial() != DefaultBackoffMS*time.Millisecond {
		t.Errorf("partial limits: %d %d %v", m.MaxRetries(), m.MaxAPIRetries(), m.BackoffInitial())
	}
}

func f64(v float64) *float64 { return &v }

func TestOverCostOverTime(t *testing.T) {
	cases := []struct {
		name               string
		cost, timeMin      *float64
		spent, spentSecs   float64
		overCost, overTime bool
	}{
		{"no budgets", nil, nil, 1e9, 1e9, false, false},
		{"under cost", f64(100), nil, 99.99, 0, false, false},
		{"at cost", f64(100), nil, 100, 0, true, false},
		{"over cost", f64(100), nil, 150, 0, true, false},
		{"zero cost budget", f64(0), nil, 0, 0, true, false},
		{"under time", nil, f64(2), 0, 119, false, false},
		{"at time", nil, f64(2), 0, 120, false, true},
		{"over time", nil, f64(2), 0, 121, false, true},
		{"fractional time", nil, f64(0.5), 0, 29.9, false, false},
		{"both over", f64(1), f64(1), 2, 61, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &Manifest{CostThreshold: c.cost, TimeThresholdMinutes: c.timeMin,
				Metrics: Metrics{CumulativeCost: c.spent, CumulativeTimeSeconds: c.spentSecs}}
			if got := m.OverCost(); got != c.overCost {
				t.Errorf("OverCost = %v, want %v", got, c.overCost)
			}
			if got := m.OverTime(); got != c.overTime {
				t.Errorf("OverTime = %v, want %v", got, c.overTime)
			}
		})
	}
	m := decodeOK(t, withFields(`"cost_threshold": 50, "time_threshold_minutes": 1, "metrics": {"cumulative_cost": 50, "cumulative_time_seconds": 59}`))
	if !m.OverCost() || m.OverTime() {
		t.Errorf("decoded: OverCost %v OverTime %v", m.OverCost(), m.OverTime())
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	m := decodeOK(t, withFields(`"job_id": "rt", "status": "RUNNING", "current_phase": "work", "cost_threshold": 10,
		"workflow": "supervised", "limits": {"max_retries": 2}, "run": {"feedback": "more tests"}`))
	m.Metrics.CumulativeCost = 3.5
	m.Audit(time.Date(2025, 1, 29, 10, 0, 0, 0, time.FixedZone("X", 3600)), "worker", "COMPLETED", "note", []string{"a.txt"})
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Error("Encode output lacks a trailing newline")
	}
	m2 := decodeOK(t, string(b))
	if m2.JobID != "rt" || m2.Status != lifecycle.Running || m2.Phase() != "work" || *m2.CostThreshold != 10 ||
		m2.MaxRetries() != 2 || m2.Run.Feedback != "more tests" || m2.Metrics.CumulativeCost != 3.5 {
		t.Errorf("round trip lost data: %+v", m2)
	}
	if len(m2.History) != 1 {
		t.Fatalf("history %+v", m2.History)
	}
	h := m2.History[0]
	if h.Timestamp != "2025-01-29T09:00:00Z" || h.Role != "worker" || h.Action != "COMPLETED" || h.Note != "note" ||
		h.Phase == nil || *h.Phase != "work" || len(h.EvidenceFiles) != 1 {
		t.Errorf("audit entry %+v", h)
	}
	// Audit copies the phase: changing it later does not rewrite history.
	m.SetPhase("review")
	if *m.History[0].Phase != "work" {
		t.Error("audit entry aliases the current phase")
	}
	m.SetPhase("")
	if m.CurrentPhase != nil || m.Phase() != "" {
		t.Error("SetPhase(\"\") did not clear the phase")
	}
}

// A manifest whose optional fields hold their zero values must survive
// Encode -> Decode (the daemon saves and reloads manifests all the time).
func TestEncodeRoundTripZeroValues(t *testing.T) {
	m := decodeOK(t, withFields(`"job_id": "z", "history": [{}], "prompts": {}, "context_files": [], "run": {}, "metrics": {}`))
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	decodeOK(t, string(b))
}

func TestErrorFormatting(t *testing.T) {
	e := &Error{File: "f.json", Pointer: "/a/b", Reason: "bad"}
	if e.Error() != "f.json: /a/b: bad" {
		t.Errorf("Error() = %q", e.Error())
	}
	e = &Error{File: "f.json", Reason: "bad"}
	if e.Error() != "f.json: bad" {
		t.Errorf("Error() without pointer = %q", e.Error())
	}
	es := Errors{{File: "f", Pointer: "/x", Reason: "r1"}, {File: "f", Pointer: "/y", Reason: "r2"}}
	if es.Error() != "f: /x: r1; f: /y: r2" {
		t.Errorf("Errors.Error() = %q", es.Error())
	}
}

// Logist never writes a manifest it could not read back (hostile input
// H101), and the audit trail keeps a few evidence paths per entry.
func TestEncodeRefusesWhatDecodeWouldRefuse(t *testing.T) {
	t.Parallel()
	m, err := Decode("job.json", []byte(`{"task_description": "t", "agents": {"worker": {"provider": "script", "script": [{}]}, "supervisor": {"provider": "script", "script": [{}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	m.Run.Feedback = strings.Repeat("x", MaxSize)
	if _, err := m.Encode(); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "larger than the 1048576 logist reads") {
		t.Fatalf("Encode of a manifest over MaxSize: %v", err)
	}
	m.Run.Feedback = ""
	many := make([]string, 100)
	for i := range many {
		many[i] = strings.Repeat("p", 1024)
	}
	for range MaxAuditEntries + 5 {
		m.Run.Evidence = many
		m.Audit(time.Now(), "worker", "COMPLETED", "n", many)
	}
	if got := len(m.History[len(m.History)-1].EvidenceFiles); got != MaxAuditEvidence {
		t.Errorf("audit entry keeps %d evidence paths, want %d", got, MaxAuditEvidence)
	}
	if b, err := m.Encode(); err != nil {
		t.Errorf("a manifest at every cap: %v", err)
	} else if len(b) > MaxSize/2 {
		t.Errorf("a manifest at every cap is %d bytes: too close to MaxSize", len(b))
	}
}

// A key given twice in one object of a manifest is refused, naming the
// key and the object: the schema and the engine would act on the last
// value, a person or another reader perhaps on the first.
func TestDecodeRefusesAKeyGivenTwice(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"task_description": "t", "cost_threshold": 100, "cost_threshold": 0.0001}`,
			`job.json: /: key "cost_threshold" is given twice in this object; give each key once`},
		{`{"task_description": "t", "agents": {"worker": {"provider": "script", "provider": "command"}}}`,
			`job.json: /agents/worker: key "provider" is given twice`},
		{`{"task_description": "t", "\u0074ask_description": "u"}`,
			`job.json: /: key "task_description" is given twice`},
	} {
		_, err := Decode("job.json", []byte(c.body))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Decode(%s) = %v; want %s…", c.body, err, c.want)
		}
	}
	if _, err := Decode("job.json", []byte(`{"task_description": "t", "limits": {"max_retries": 1}, "metrics": {"agent_calls": 1}}`)); err != nil && strings.Contains(err.Error(), "given twice") {
		t.Errorf("distinct keys refused: %v", err)
	}
}
