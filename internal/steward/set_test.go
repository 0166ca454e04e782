package steward_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/deliberation/negotiation"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
	"github.com/logist/logist/internal/verify"
	"github.com/logist/logist/schemas"
)

func set(path, value string) steward.Assignment {
	return steward.Assignment{Path: path, Value: json.RawMessage(value)}
}

// signedFixture is a fixture whose histories are signed, for verify.
func signedFixture(t *testing.T) (*fixture, *signing.Key) {
	f := newFixture(t)
	key, err := signing.LoadOrCreate(f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	f.Env.History = history.Options{Signer: key}
	return f, key
}

func verified(t *testing.T, f *fixture, key *signing.Key, id string) {
	t.Helper()
	r, err := verify.Job(id, filepath.Join(f.Dir, id), verify.Options{Public: key.Public(), Manifest: f.Load(id)})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("verify %s: %v", id, r.Problems)
	}
}

const answerScript = `echo '{"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "done"}'`

// An agent whose program cannot start stops the job at intake; the hint
// names logist set (guidance cannot fix an argv); set records the change
// (old and new value, the new configuration's hash), the job stays
// stopped, and resumed it runs with the new argv; verify accepts it all.
func TestSetFixesAnAgentThatCannotStart(t *testing.T) {
	f, key := signedFixture(t)
	f.WriteJob("j", map[string]any{"agents": map[string]any{
		"worker":     map[string]any{"provider": "command", "command": map[string]any{"argv": []string{"logist-no-such-agent", "--request", "{request_file}"}}},
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "ok")),
	}})
	if err := os.WriteFile(filepath.Join(f.Dir, "j", "agent.sh"), []byte(answerScript), 0o600); err != nil {
		t.Fatal(err)
	}
	f.Run("j")
	m := f.Load("j")
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.AgentConfig {
		t.Fatalf("after intake: %s %s (%s)", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	if h := steward.HintFor(m, "j"); !strings.Contains(h, `logist set j agents.worker.command.argv='["PROGRAM","{request_file}"]'`) || !strings.Contains(h, "logist resume j") {
		t.Errorf("hint %q does not show how to fix the argv", h)
	}

	m, changes, err := f.St.Set("j", []steward.Assignment{set("agents.worker.command.argv", `["sh", "../agent.sh", "{request_file}"]`)}, "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != lifecycle.InterventionRequired {
		t.Errorf("status after set %s: set must not move the job", m.Status)
	}
	c, ok := changes["agents.worker.command.argv"]
	if len(changes) != 1 || !ok || !reflect.DeepEqual(c.Old, []any{"logist-no-such-agent", "--request", "{request_file}"}) ||
		!reflect.DeepEqual(c.New, []any{"sh", "../agent.sh", "{request_file}"}) {
		t.Fatalf("changes %#v", changes)
	}
	stored := f.Load("j")
	if got := stored.Agents["worker"].Command.Argv; strings.Join(got, " ") != "sh ../agent.sh {request_file}" {
		t.Fatalf("stored argv %q", got)
	}
	if a := stored.History[len(stored.History)-1]; a.Action != "SET" || a.Note != "set agents.worker.command.argv" {
		t.Errorf("audit entry %+v", a)
	}
	sw := testkit.OfType(f.Records("j"), history.TypeSteward)
	if len(sw) != 1 {
		t.Fatalf("%d steward records", len(sw))
	}
	rec := sw[0].Steward
	sum, _ := stored.ConfigHash()
	if rec.Command != "set" || rec.ConfigSHA256 != sum || rec.CommandID == "" {
		t.Errorf("record %+v, want command set with config_sha256 %s", rec, sum)
	}
	if old, new, ok := rec.Change("agents.worker.command.argv"); !ok || !reflect.DeepEqual(old, []any{"logist-no-such-agent", "--request", "{request_file}"}) ||
		!reflect.DeepEqual(new, []any{"sh", "../agent.sh", "{request_file}"}) {
		t.Errorf("recorded change %v -> %v (%v)", old, new, ok)
	}

	if _, err := f.St.Resume("j", steward.ResumeOptions{}); err != nil {
		t.Fatal(err)
	}
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("after resume: %s (%s)", m.Status, m.Run.Reason)
	}
	verified(t, f, key, "j")
}

// Set is for configuration, on stopped jobs, validated as a whole manifest
// before anything is saved; whatever it refuses leaves the job untouched.
func TestSetRefuses(t *testing.T) {
	f := newFixture(t)
	f.WriteJob("stuck", withStatus("INTERVENTION_REQUIRED", "work"))
	f.WriteJob("queued", withStatus("PENDING", ""))
	f.WriteJob("done", withStatus("SUCCESS", "review"))
	f.WriteJob("draft", withStatus("DRAFT", ""))
	for _, c := range []struct {
		name, id string
		as       []steward.Assignment
		want     string // in the error
		kind     string // ooo, set, manifest
	}{
		{"pending job", "queued", []steward.Assignment{set("limits.max_retries", "5")}, "only a stopped job", "ooo"},
		{"finished job", "done", []steward.Assignment{set("limits.max_retries", "5")}, "only a stopped job", "ooo"},
		{"run state", "stuck", []steward.Assignment{set("status", `"PENDING"`)}, "Logist keeps the status", "set"},
		{"run state by pointer", "stuck", []steward.Assignment{set("/run/reason", `"x"`)}, "Logist keeps the run state", "set"},
		{"budget", "stuck", []steward.Assignment{set("cost_threshold", "900")}, "logist resume JOB --cost-threshold", "set"},
		{"what the job is", "stuck", []steward.Assignment{set("task_description", `"other"`)}, "submit a new job", "set"},
		{"no such field", "stuck", []steward.Assignment{set("agentz.worker", `{}`)}, `no field "agentz"`, "set"},
		{"not JSON", "stuck", []steward.Assignment{set("agents.worker.model", `gpt-5`)}, `a string needs quotes`, "set"},
		{"two values", "stuck", []steward.Assignment{set("limits.max_retries", `1 2`)}, `not JSON`, "set"},
		{"array index out of range", "stuck", []steward.Assignment{set("agents.worker.script.7", `{}`)}, `"7" is not an element`, "set"},
		{"schema", "stuck", []steward.Assignment{set("limits.max_retries", `"many"`)}, "/limits/max_retries", "manifest"},
		{"empty program", "stuck", []steward.Assignment{set("agents.worker", `{"provider": "command", "command": {"argv": [""]}}`)}, "/agents/worker/command/argv/0: the program to run is empty", "manifest"},
		{"missing program", "stuck", []steward.Assignment{set("agents.worker", `{"provider": "command", "command": {"argv": ["logist-no-such-agent"]}}`)},
			`/agents/worker/command/argv/0: program "logist-no-such-agent" not found on the PATH of this shell`, "manifest"},
		{"unknown role of the workflow removed", "stuck", []steward.Assignment{set("agents.supervisor", "null")}, `needs an agent for role "supervisor"`, "manifest"},
		{"nothing changes", "stuck", []steward.Assignment{set("agents.worker.provider", `"script"`)}, "already says so", "set"},
		{"nothing given", "stuck", nil, "no FIELD=VALUE", "set"},
		{"role misspelt", "stuck", []steward.Assignment{set("agents.wrker.command.argv", `["sh"]`)}, `the job has no role "wrker" (its roles: supervisor, worker)`, "set"},
		{"role misspelt by pointer", "stuck", []steward.Assignment{set("/agents/wrker/provider", `"command"`)}, `no role "wrker"`, "set"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := f.snapshot(c.id)
			_, _, err := f.St.Set(c.id, c.as, "")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one saying %q", err, c.want)
			}
			var se *steward.SetError
			var me manifest.Errors
			switch _, ooo := isOutOfOrder(err); {
			case c.kind == "ooo" && !ooo, c.kind == "set" && !errors.As(err, &se), c.kind == "manifest" && !errors.As(err, &me):
				t.Errorf("err %T %v, want kind %s", err, err, c.kind)
			}
			if c.kind == "manifest" && !strings.Contains(err.Error(), filepath.Join(f.Dir, c.id, jobstore.ManifestFile)+": ") {
				t.Errorf("err %v does not name the job's manifest file", err)
			}
			if f.snapshot(c.id) != before {
				t.Error("a refused set changed the job")
			}
		})
	}
	// A schedule is reconfigured while paused: its next runs get the change.
	f.WriteJob("tpl", map[string]any{"schedule": map[string]any{"cron": "@daily"}})
	if _, _, err := f.St.Set("tpl", []steward.Assignment{set("limits.max_retries", "1")}, ""); err == nil || !strings.Contains(err.Error(), "logist schedules pause tpl first") {
		t.Errorf("set on an active schedule: %v", err)
	}
	if _, err := f.St.PauseSchedule("tpl", ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.St.Set("tpl", []steward.Assignment{set("limits.max_retries", "1")}, ""); err != nil {
		t.Errorf("set on a paused schedule: %v", err)
	}
	// A DRAFT job is configured before it is activated.
	if _, _, err := f.St.Set("draft", []steward.Assignment{set("limits.max_retries", "1")}, "before activation"); err != nil {
		t.Fatal(err)
	}
	if m := f.Load("draft"); m.Status != lifecycle.Draft || m.MaxRetries() != 1 {
		t.Errorf("draft: %s, max_retries %d", m.Status, m.MaxRetries())
	}
}

// Several assignments in one command, dotted paths, pointers, array
// elements, objects made on the way and null removing a field: one record
// of the leaf fields that changed.
func TestSetPathsAndValues(t *testing.T) {
	f := newFixture(t)
	f.WriteJob("j", map[string]any{"status": "HALTED_TIME", "current_phase": "work", "limits": map[string]any{"call_timeout_seconds": 60}, "agents": map[string]any{
		"worker":     map[string]any{"provider": "command", "command": map[string]any{"argv": []string{"sh", "-c", "exit 1"}}},
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "ok")),
	}})
	_, changes, err := f.St.Set("j", []steward.Assignment{
		set("/agents/worker/command/argv/2", `"exit 0"`),
		set("limits.max_retries", "7"),
		set("limits.call_timeout_seconds", "null"),
		set("agents.worker.command.env.MODE", `"careful"`),
	}, "fix the worker")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range changes {
		keys = append(keys, k)
	}
	if len(keys) != 4 || changes["limits.call_timeout_seconds"].New != nil || changes["agents.worker.command.env.MODE"].Old != nil {
		t.Fatalf("changes %#v", changes)
	}
	m := f.Load("j")
	if a := m.Agents["worker"].Command; a.Argv[2] != "exit 0" || a.Env["MODE"] != "careful" || m.MaxRetries() != 7 || m.Limits.CallTimeoutSeconds != nil {
		t.Fatalf("manifest %+v limits %+v", a, m.Limits)
	}
	if rec := testkit.OfType(f.Records("j"), history.TypeSteward)[0].Steward; rec.Reason != "fix the worker" || len(rec.Changes) != 4 {
		t.Errorf("record %+v", rec)
	}
}

// Every manifest field is in Set's table, as settable or with the reason
// it is not, so a new field is a decision, not an accident.
func TestSetCoversEveryManifestField(t *testing.T) {
	typ := reflect.TypeOf(manifest.Manifest{})
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if _, ok := steward.Settable(name); !ok {
			t.Errorf("manifest field %s is not in set's table", name)
		}
	}
}

// verify replays the decisions a retry limit changed by set led to: each
// under the limit in force when it was taken.
func TestVerifyFollowsARetryLimitSet(t *testing.T) {
	f, key := signedFixture(t)
	retry := testkit.Step("RETRY", "again")
	f.WriteJob("j", map[string]any{"agents": map[string]any{
		"worker":     testkit.Script(retry, retry, retry, retry, retry, retry, testkit.Step("COMPLETED", "done")),
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "ok")),
	}})
	f.Run("j") // 3 RETRYs allowed: the 4th stops it
	if m := f.Load("j"); m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != "RETRY_LIMIT" {
		t.Fatalf("%s %s", m.Status, m.Run.ErrorCode)
	}
	if _, _, err := f.St.Set("j", []steward.Assignment{set("limits.max_retries", "1")}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.St.Resume("j", steward.ResumeOptions{}); err != nil {
		t.Fatal(err)
	}
	f.Run("j") // 1 RETRY allowed: the 2nd stops it
	m := f.Load("j")
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != "RETRY_LIMIT" || m.Metrics.AgentCalls != 6 {
		t.Fatalf("%s %s after %d calls", m.Status, m.Run.ErrorCode, m.Metrics.AgentCalls)
	}
	verified(t, f, key, "j")
}

// A steward opts a stopped job out of the sandbox (or picks a layer) with
// logist set: a signed record whose config hash covers the choice.
func TestSetSandboxIsASignedChoice(t *testing.T) {
	f, _ := signedFixture(t)
	f.WriteJob("j", map[string]any{"agents": map[string]any{
		"worker":     map[string]any{"provider": "command", "command": map[string]any{"argv": []string{"logist-no-such-agent"}}},
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "ok")),
	}})
	f.Run("j")
	m, _, err := f.St.Set("j", []steward.Assignment{set("sandbox", `"none"`), set("sandbox_network", `"host"`)}, "host has no sandbox")
	if err != nil {
		t.Fatal(err)
	}
	if m.Sandbox != "none" || m.SandboxNetwork != "host" {
		t.Fatalf("sandbox %q network %q", m.Sandbox, m.SandboxNetwork)
	}
	sw := testkit.OfType(f.Records("j"), history.TypeSteward)
	sum, _ := f.Load("j").ConfigHash()
	if len(sw) != 1 || sw[0].Steward.ConfigSHA256 != sum {
		t.Fatalf("steward records %+v, want one set with config hash %s", sw, sum)
	}
	if _, _, err := f.St.Set("j", []steward.Assignment{set("sandbox", `"off"`)}, ""); err == nil {
		t.Error("sandbox \"off\" accepted")
	}
}

// A configuration change that no steward command made is flagged by
// verify: job.json edited by hand while the job is stopped (its budget
// raised, which the daemon keeps, as it keeps any edit of a stopped
// job) is committed by the next transaction, and no steward record left
// that configuration. The same edit made with logist set verifies.
func TestVerifyFlagsAnUnrecordedConfigChange(t *testing.T) {
	for _, bySteward := range []bool{false, true} {
		f, key := signedFixture(t)
		f.WriteJob("j", map[string]any{"cost_threshold": 50, "agents": map[string]any{
			"worker":     map[string]any{"provider": "command", "command": map[string]any{"argv": []string{"logist-no-such-agent", "{request_file}"}}},
			"supervisor": testkit.Script(testkit.Step("COMPLETED", "ok")),
		}})
		f.Run("j")
		if m := f.Load("j"); m.Status != lifecycle.InterventionRequired {
			t.Fatalf("after intake: %s (%s)", m.Status, m.Run.Reason)
		}
		if bySteward {
			if _, _, err := f.St.Set("j", []steward.Assignment{set("limits", `{"max_retries": 7}`)}, "more retries"); err != nil {
				t.Fatal(err)
			}
		} else {
			file := filepath.Join(f.Dir, "j", jobstore.ManifestFile)
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var raw map[string]any
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
			raw["limits"] = map[string]any{"max_retries": 7}
			b, _ = json.MarshalIndent(raw, "", "  ")
			if err := os.WriteFile(file, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.St.Resume("j", steward.ResumeOptions{Guidance: "try again"}); err != nil {
			t.Fatal(err)
		}
		r, err := verify.Job("j", filepath.Join(f.Dir, "j"), verify.Options{Public: key.Public(), Manifest: f.Load("j")})
		if err != nil {
			t.Fatal(err)
		}
		var flagged bool
		for _, p := range r.Problems {
			flagged = flagged || p.Class == verify.ClassUnrecordedChange
		}
		if flagged == bySteward || (bySteward && !r.OK()) {
			t.Errorf("by steward %v: problems %v", bySteward, r.Problems)
		}
	}
}

// A play move's answer's reason (a vote's) is held to the game's limit
// (Move.Check) by Play whoever calls it: refused naming the field, its
// length and the limit before the job is read. The limit is the vote
// schema's: a reason Check takes the schema takes, and one over it Check
// refuses (before, Check allowed a steward's 4000 characters, and a
// reason of 2001 passed it to be refused late by the schema's 2000).
// Other moves and answers without a string reason are left to the game.
func TestPlayMoveReasonLimit(t *testing.T) {
	vote := func(n int) []byte { return []byte(`{"vote":"YES","reason":"` + strings.Repeat("é", n) + `"}`) }
	limit := steward.MaxVoteReasonChars
	var doc struct {
		Properties struct {
			Reason struct {
				MaxLength int `json:"maxLength"`
			} `json:"reason"`
		} `json:"properties"`
	}
	if raw, err := schemas.Raw(negotiation.SchemaVote); err != nil || json.Unmarshal(raw, &doc) != nil || doc.Properties.Reason.MaxLength != limit {
		t.Errorf("%s: reason's maxLength %d, the steward's MaxVoteReasonChars %d (%v)", negotiation.SchemaVote, doc.Properties.Reason.MaxLength, limit, err)
	}
	for _, n := range []int{limit - 1, limit, limit + 1, steward.MaxReasonChars} {
		checked := steward.Move{Control: steward.ControlAnswer, Answer: vote(n)}.Check()
		valid := schemas.ValidateJSON(negotiation.SchemaVote, vote(n))
		if (checked == nil) != (valid == nil) {
			t.Errorf("a reason of %d characters: Check %v, the vote's schema %v", n, checked, valid)
		}
	}
	var oe *steward.OptionError
	want := fmt.Sprintf("is %d characters long, more than the limit of %d", limit+1, limit)
	if _, err := (&steward.Steward{}).Play("any", "estoria", steward.Move{Control: steward.ControlAnswer, Answer: vote(limit + 1)}); !errors.As(err, &oe) || oe.Field != "reason" || oe.Reason != want {
		t.Errorf("Play with a reason over the limit: %v, want reason %s", err, want)
	}
	for _, mv := range []steward.Move{
		{Control: steward.ControlAnswer, Answer: vote(limit)},
		{Control: steward.ControlAnswer, Answer: []byte(`{"reason":4}`)},
		{Control: steward.ControlAnswer, Answer: []byte(`[1]`)},
		{Control: steward.ControlSkip},
	} {
		if err := mv.Check(); err != nil {
			t.Errorf("%s %.40s: %v", mv.Control, mv.Answer, err)
		}
	}
}
