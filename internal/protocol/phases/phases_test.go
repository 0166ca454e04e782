package phases_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/protocol"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
	"github.com/logist/logist/internal/verify"
)

// The protocol workflow end to end on the engine, with scripted roles.

type fx struct {
	*testkit.Fixture
	eng *runner.Engine
}

func newFx(t *testing.T) *fx {
	t.Helper()
	k := testkit.New(t)
	eng := runner.NewEngine(k.Env, builtins.Effects())
	eng.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	k.Runner = eng
	return &fx{Fixture: k, eng: eng}
}

// step is one scripted answer: action, summary and the role's fields.
func step(action string, fields map[string]any) map[string]any {
	return map[string]any{"action": action, "summary": "scripted " + strings.ToLower(action), "fields": fields}
}

func done(fields map[string]any) map[string]any { return step("COMPLETED", fields) }

func proposal(id string) map[string]any {
	return map[string]any{"id": id, "objective": "write the greeting", "assumptions": []string{}, "required_tools": []string{"write_file", "shell"}, "expected_evidence": []string{"cat output"}}
}

func intent(id, tool, risk string, input map[string]any) map[string]any {
	return map[string]any{"id": id, "proposal_id": "p1", "tool": tool, "input": input, "risk_class": risk, "justification": "needed"}
}

func writeGreeting(id string) map[string]any {
	return intent(id, "write_file", "low", map[string]any{"path": "greeting.txt", "content": "hello\n"})
}

func catGreeting(id string) map[string]any {
	return intent(id, "shell", "low", map[string]any{"command": "cat greeting.txt"})
}

func claim(id string, evidence ...string) map[string]any {
	if evidence == nil {
		evidence = []string{}
	}
	return map[string]any{"id": id, "text": "greeting.txt says hello", "confidence": 0.9, "evidence": evidence}
}

func approve(ids ...string) map[string]any {
	var rs []any
	for _, id := range ids {
		rs = append(rs, map[string]any{"proposal_id": id, "decision": "approved", "reason": "safe"})
	}
	return done(map[string]any{"reviews": rs})
}

var (
	plan       = done(map[string]any{"proposals": []any{proposal("p1")}})
	final      = done(map[string]any{"final_statement": map[string]any{"summary": "done", "claim_ids": []string{"c1"}}})
	noIntents  = done(map[string]any{"tool_intents": []any{}})
	accept     = done(map[string]any{"challenges": []any{}})
	passVerdct = done(map[string]any{"verdict": map[string]any{"status": "pass", "notes": "ok"}})
	tools      = done(map[string]any{"tool_intents": []any{writeGreeting("t1"), catGreeting("t2")}})
	claims     = done(map[string]any{"claims": []any{claim("c1", "tool:t2")}})
)

// happy are the agents of a session that completes.
func happy() map[string]any {
	return map[string]any{
		"planner":  testkit.Script(plan, final),
		"critic":   testkit.Script(approve("p1"), accept),
		"executor": testkit.Script(tools, noIntents, claims),
		"auditor":  testkit.Script(passVerdct),
	}
}

func (f *fx) write(id string, agents map[string]any, extra map[string]any) {
	f.T.Helper()
	m := map[string]any{"schema_version": 1, "job_id": id, "task_description": "Write greeting.txt.", "workflow": "protocol",
		"agents": agents, "metrics": map[string]any{"cumulative_cost": 0, "cumulative_time_seconds": 0}}
	for k, v := range extra {
		m[k] = v
	}
	f.WriteJob(id, m)
}

// run runs job id to its stop and returns its manifest then.
func (f *fx) run(id string) *manifest.Manifest {
	f.T.Helper()
	f.Run(id)
	return f.Load(id)
}

// events are the job's protocol event types, in order.
func (f *fx) events(id string) []string {
	var out []string
	for _, r := range f.Records(id) {
		if r.Event != nil {
			out = append(out, r.Event.Type)
		}
	}
	return out
}

// phases are the phases of the job's responses, in order.
func (f *fx) phases(id string) string {
	var out []string
	for _, r := range f.Records(id) {
		if r.Type == history.TypeResponse {
			p := r.Phase
			if o := r.Response.Outcome; o != "" {
				p += ":" + o
			}
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}

func (f *fx) verify(id string) *verify.Report {
	f.T.Helper()
	m, _ := f.Env.Store.Load(id)
	rep, err := verify.Job(id, filepath.Join(f.Dir, id), verify.Options{Manifest: m})
	if err != nil {
		f.T.Fatal(err)
	}
	return rep
}

func requireStatus(t *testing.T, m *manifest.Manifest, st lifecycle.Status, state string) {
	t.Helper()
	if m.Status != st || m.Run.WorkflowState != state {
		t.Fatalf("job is %s (session %s), want %s (%s); reason: %s", m.Status, m.Run.WorkflowState, st, state, m.Run.Reason)
	}
}

func TestSessionCompletes(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	f.write("j", happy(), map[string]any{"protocol": map[string]any{"checks": []any{map[string]any{"name": "greeting", "argv": []string{"grep", "-q", "hello", "greeting.txt"}}}}})
	m := f.run("j")
	requireStatus(t, m, lifecycle.Success, "completed")
	want := "planning reviewing executing:RUN tools executing:CLAIM claiming claim_review finalizing verifying auditing"
	if got := f.phases("j"); got != want {
		t.Errorf("phases:\n got %s\nwant %s", got, want)
	}
	wantEv := "session_initialized proposal_created proposal_reviewed tool_intent_signed tool_intent_signed tool_execution_started tool_execution_started tool_execution_completed tool_execution_completed claim_issued final_statement_signed verification_run_started verification_run_completed"
	if got := strings.Join(f.events("j"), " "); got != wantEv {
		t.Errorf("events:\n got %s\nwant %s", got, wantEv)
	}
	if b, err := os.ReadFile(filepath.Join(f.Dir, "j", "workspace", "greeting.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("greeting.txt = %q, %v", b, err)
	}
	// The six mandatory types are signed by their role's key; every event
	// links to the one before.
	prev := history.GenesisHash
	for _, r := range f.Records("j") {
		if e := r.Event; e != nil {
			if e.PrevEvent != prev {
				t.Errorf("%s links to %s, want %s", e.Type, e.PrevEvent, prev)
			}
			prev = e.Hash
			if protocol.Mandatory[e.Type] != (e.Sig != "") || (e.Sig != "" && !strings.HasPrefix(e.KeyID, e.Role+":")) {
				t.Errorf("%s by %s: key %q sig %v", e.Type, e.Role, e.KeyID, e.Sig != "")
			}
		}
	}
	if rep := f.verify("j"); !rep.OK() || rep.Protocol != "pass" {
		t.Errorf("verify: %+v", rep)
	}
	// The claim's evidence is the output artifact of t2, resolved from tool:t2.
	var ev []any
	for _, r := range f.Records("j") {
		if r.Event != nil && r.Event.Type == protocol.ClaimIssued {
			ev, _ = r.Event.Body["evidence"].([]any)
		}
	}
	if len(ev) != 1 || !strings.HasPrefix(ev[0].(string), "sha256:") {
		t.Errorf("claim evidence = %v", ev)
	}
}

func TestRejectedProposalsGoBackToThePlanner(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := happy()
	reject := done(map[string]any{"reviews": []any{map[string]any{"proposal_id": "p0", "decision": "rejected", "reason": "too broad"}}})
	p0 := done(map[string]any{"proposals": []any{proposal("p0")}})
	p1 := done(map[string]any{"proposals": []any{func() map[string]any { p := proposal("p1"); p["revises"] = "p0"; return p }()}})
	a["planner"] = testkit.Script(p0, p1, final)
	a["critic"] = testkit.Script(reject, approve("p1"), accept)
	f.write("j", a, nil)
	m := f.run("j")
	requireStatus(t, m, lifecycle.Success, "completed")
	if got := f.phases("j"); !strings.HasPrefix(got, "planning reviewing:REJECTED planning reviewing executing:RUN") {
		t.Errorf("phases: %s", got)
	}
	// The rejected proposal's reason reached the Planner.
	recs := f.Records("j")
	var second string
	n := 0
	for _, r := range recs {
		if r.Type == history.TypeIntent && r.Phase == "planning" {
			n++
			if n == 2 {
				second = r.Request.Prompt
			}
		}
	}
	if !strings.Contains(second, "too broad") {
		t.Errorf("the second planning prompt lacks the Critic's reason:\n%s", second)
	}
}

func TestIntentForRejectedProposalIsRefused(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := happy()
	a["planner"] = testkit.Script(done(map[string]any{"proposals": []any{proposal("p1"), proposal("p2")}}), final)
	a["critic"] = testkit.Script(done(map[string]any{"reviews": []any{
		map[string]any{"proposal_id": "p1", "decision": "approved", "reason": "ok"},
		map[string]any{"proposal_id": "p2", "decision": "rejected", "reason": "no"}}}), accept)
	bad := intent("t9", "shell", "low", map[string]any{"command": "true"})
	bad["proposal_id"] = "p2"
	a["executor"] = testkit.Script(done(map[string]any{"tool_intents": []any{bad}}), tools, noIntents, claims)
	f.write("j", a, nil)
	m := f.run("j")
	requireStatus(t, m, lifecycle.Success, "completed")
	if got := f.phases("j"); !strings.HasPrefix(got, "planning reviewing executing:VIOLATION executing:RUN") {
		t.Errorf("phases: %s", got)
	}
	for _, r := range f.Records("j") {
		if r.Event != nil && r.Event.Subject == "t9" {
			t.Errorf("an intent for a rejected proposal was recorded: %s", r.Event.Type)
		}
	}
}

func TestRiskyIntentNeedsTheCritic(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := happy()
	risky := intent("t1", "write_file", "high", map[string]any{"path": "greeting.txt", "content": "hello\n"})
	block := done(map[string]any{"intent_reviews": []any{map[string]any{"intent_id": "t1", "decision": "blocked", "reason": "write it as low risk"}}})
	allow := done(map[string]any{"intent_reviews": []any{map[string]any{"intent_id": "t3", "decision": "approved", "reason": "fine"}}})
	risky3 := intent("t3", "write_file", "high", map[string]any{"path": "greeting.txt", "content": "hello\n"})
	a["critic"] = testkit.Script(approve("p1"), block, allow, accept)
	a["executor"] = testkit.Script(done(map[string]any{"tool_intents": []any{risky}}), done(map[string]any{"tool_intents": []any{risky3, catGreeting("t2")}}), noIntents, claims)
	f.write("j", a, nil)
	m := f.run("j")
	requireStatus(t, m, lifecycle.Success, "completed")
	want := "planning reviewing executing:REVIEW intent_review:BLOCKED executing:REVIEW intent_review tools executing:CLAIM"
	if got := f.phases("j"); !strings.HasPrefix(got, want) {
		t.Errorf("phases:\n got %s\nwant %s…", got, want)
	}
	// The blocked intent never started; the approved one did.
	started := map[string]bool{}
	for _, r := range f.Records("j") {
		if r.Event != nil && r.Event.Type == protocol.ToolExecutionStarted {
			started[r.Event.Subject] = true
		}
	}
	if started["t1"] || !started["t3"] || !started["t2"] {
		t.Errorf("started: %v", started)
	}
}

func TestToolFailureIsANewIntentOrAFallback(t *testing.T) {
	t.Parallel()
	fail := done(map[string]any{"tool_intents": []any{intent("t0", "shell", "low", map[string]any{"command": "exit 3"})}})
	for _, fallback := range []bool{false, true} {
		f := newFx(t)
		a := happy()
		a["executor"] = testkit.Script(fail, tools, noIntents, claims)
		if fallback {
			p2 := done(map[string]any{"proposals": []any{func() map[string]any { p := proposal("p2"); p["revises"] = "p1"; return p }()}})
			a["planner"] = testkit.Script(plan, p2, final)
			a["critic"] = testkit.Script(approve("p1"), approve("p2"), accept)
			two := func(m map[string]any) map[string]any { m["proposal_id"] = "p2"; return m }
			a["executor"] = testkit.Script(fail, done(map[string]any{"tool_intents": []any{two(writeGreeting("t1")), two(catGreeting("t2"))}}), noIntents, claims)
		}
		// Logist classifies "exit 3" high: no class needs the Critic here.
		f.write("j", a, map[string]any{"protocol": map[string]any{"allow_fallback": fallback, "approval_risk": []any{}}})
		m := f.run("j")
		requireStatus(t, m, lifecycle.Success, "completed")
		got := f.phases("j")
		want := "planning reviewing executing:RUN tools executing:RUN tools"
		if fallback {
			want = "planning reviewing executing:RUN tools:FALLBACK planning reviewing executing:RUN tools"
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("fallback %v: phases\n got %s\nwant %s…", fallback, got, want)
		}
		evs := strings.Join(f.events("j"), " ")
		if !strings.Contains(evs, "tool_execution_failed") {
			t.Errorf("no failure event: %s", evs)
		}
		if rep := f.verify("j"); !rep.OK() || rep.Protocol != "pass_with_warnings" {
			t.Errorf("fallback %v: verify %+v", fallback, rep)
		}
	}
}

func TestEvidenceGuardAndChallenges(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := happy()
	noEvidence := done(map[string]any{"claims": []any{claim("c0")}})
	challenge := done(map[string]any{"challenges": []any{map[string]any{"claim_id": "c0", "reason": "cite the cat output"}}})
	weak := done(map[string]any{"claims": []any{claim("c0", "tool:t1")}})
	revised := func() map[string]any {
		c := claim("c1", "tool:t2")
		c["revises"] = "c0"
		return done(map[string]any{"claims": []any{c}})
	}()
	a["executor"] = testkit.Script(tools, noIntents, noEvidence, weak, revised)
	a["critic"] = testkit.Script(approve("p1"), challenge, accept)
	f.write("j", a, nil)
	m := f.run("j")
	requireStatus(t, m, lifecycle.Success, "completed")
	want := "claiming:VIOLATION claiming claim_review:CHALLENGED claiming claim_review finalizing"
	if got := f.phases("j"); !strings.Contains(got, want) {
		t.Errorf("phases:\n got %s\nwant …%s…", got, want)
	}
}

func TestFinalizationBlockedWhileAClaimIsChallenged(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := happy()
	// The Critic's challenge is answered with a second claim, not a
	// revision; the Planner bundles the challenged one.
	challenge := done(map[string]any{"challenges": []any{map[string]any{"claim_id": "c1", "reason": "weak"}}})
	both := done(map[string]any{"final_statement": map[string]any{"summary": "done", "claim_ids": []string{"c1"}}})
	revised := func() map[string]any {
		c := claim("c2", "tool:t2")
		c["revises"] = "c1"
		return done(map[string]any{"claims": []any{c}})
	}()
	finalC2 := done(map[string]any{"final_statement": map[string]any{"summary": "done", "claim_ids": []string{"c2"}}})
	a["critic"] = testkit.Script(approve("p1"), challenge, accept, accept)
	a["executor"] = testkit.Script(tools, noIntents, claims, done(map[string]any{"claims": []any{claim("c3", "tool:t2")}}), revised)
	a["planner"] = testkit.Script(plan, both, finalC2)
	f.write("j", a, nil)
	m := f.run("j")
	requireStatus(t, m, lifecycle.Success, "completed")
	if got := f.phases("j"); !strings.Contains(got, "finalizing:BLOCKED claiming") {
		t.Errorf("phases: %s", got)
	}
}

func TestMissingArtifactAtClaimTimeFailsVerification(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := happy()
	ghost := "sha256:" + strings.Repeat("ab", 32)
	a["executor"] = testkit.Script(tools, noIntents, done(map[string]any{"claims": []any{claim("c1", ghost)}}))
	f.write("j", a, nil)
	m := f.run("j")
	// The session went on to auditing, which failed as expected.
	requireStatus(t, m, lifecycle.InterventionRequired, "auditing")
	if m.Run.ErrorCode != "VERIFICATION_FAILED" {
		t.Errorf("error code %s", m.Run.ErrorCode)
	}
	evs := f.events("j")
	if evs[len(evs)-1] != protocol.VerificationCompleted {
		t.Errorf("last event %s", evs[len(evs)-1])
	}
	rep := f.verify("j")
	found := false
	for _, p := range rep.Problems {
		found = found || p.Class == "MISSING_ARTIFACT"
	}
	if !found {
		t.Errorf("verify does not report the missing artifact: %+v", rep.Problems)
	}
}

func TestAuditorCannotRaiseAFailedCheck(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	// The suite passes when the final statement is signed (the
	// finalization guard requires it) and fails when Logist verifies.
	flaky := []string{"sh", "-c", "if [ -e .suite-ran ]; then exit 1; fi; touch .suite-ran"}
	f.write("j", happy(), map[string]any{"protocol": map[string]any{"checks": []any{map[string]any{"name": "suite", "argv": flaky}}}})
	m := f.run("j")
	requireStatus(t, m, lifecycle.InterventionRequired, "auditing")
	var status string
	for _, r := range f.Records("j") {
		if r.Event != nil && r.Event.Type == protocol.VerificationCompleted {
			status, _ = r.Event.Body["status"].(string)
		}
	}
	if status != "fail" {
		t.Errorf("verification_run_completed status %q, want fail (the auditor said pass)", status)
	}
}

func TestWrongRoleKeyFailsTheSession(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := happy()
	// The Critic stops at its first turn (STUCK), so the key can be swapped
	// before it signs anything; its challenge is a mandatory signed event.
	challenge := done(map[string]any{"challenges": []any{map[string]any{"claim_id": "c1", "reason": "x"}}})
	a["critic"] = testkit.Script(step("STUCK", map[string]any{}), approve("p1"), challenge)
	f.write("j", a, nil)
	m := f.run("j")
	requireStatus(t, m, lifecycle.InterventionRequired, "reviewing")
	keys := filepath.Join(f.Dir, "j", ".protocol", "keys")
	// Forge: the executor's key file becomes the critic's. Signatures by
	// the "critic" no longer verify against the key in session_initialized.
	b, err := os.ReadFile(filepath.Join(keys, "executor.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keys, "critic.key"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	f.write("j2", happy(), nil) // an unaffected neighbour
	st := steward.New(f.Env, f.eng.Effects)
	if _, err := st.Resume("j", steward.ResumeOptions{}); err != nil {
		t.Fatal(err)
	}
	m = f.run("j")
	requireStatus(t, m, lifecycle.InterventionRequired, "failed")
	if m.Run.ErrorCode != "PROTOCOL_FAILED" || !strings.Contains(m.Run.Reason, "signature") {
		t.Errorf("error code %s (%s)", m.Run.ErrorCode, m.Run.Reason)
	}
	evs := f.events("j")
	if evs[len(evs)-1] != protocol.SessionFailed {
		t.Errorf("events end %v", evs[len(evs)-3:])
	}
	for _, r := range f.Records("j") {
		if r.Event != nil && r.Event.Type == protocol.ClaimChallenged {
			t.Error("the badly signed challenge was recorded")
		}
	}
	// A failed session stops progression: resuming changes nothing.
	if _, err := st.Resume("j", steward.ResumeOptions{}); err != nil {
		t.Fatal(err)
	}
	m = f.run("j")
	requireStatus(t, m, lifecycle.InterventionRequired, "failed")
	if m2 := f.run("j2"); m2.Status != lifecycle.Success {
		t.Errorf("neighbour job %s", m2.Status)
	}
	if rep := f.verify("j"); !rep.OK() {
		t.Errorf("the recorded trace itself is intact: %+v", rep.Problems)
	}
}

func TestHaltAbortsTheSession(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := happy()
	a["critic"] = testkit.Script(step("STUCK", map[string]any{}))
	f.write("j", a, nil)
	f.run("j")
	st := steward.New(f.Env, f.eng.Effects)
	m, err := st.Halt("j", "operator abort")
	if err != nil {
		t.Fatal(err)
	}
	requireStatus(t, m, lifecycle.Canceled, "aborted")
	evs := f.events("j")
	if evs[len(evs)-1] != protocol.SessionAborted {
		t.Errorf("events end with %s", evs[len(evs)-1])
	}
	if rep := f.verify("j"); !rep.OK() {
		t.Errorf("verify after abort: %+v", rep.Problems)
	}
}

func TestInterruptedToolRunIsRecordedAsFailedNotRerun(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := happy()
	slow := done(map[string]any{"tool_intents": []any{intent("t0", "shell", "low", map[string]any{"command": "echo run >> runs.txt; sleep 30"})}})
	a["executor"] = testkit.Script(slow, tools, noIntents, claims)
	// Logist classifies the slow command high: no class needs the Critic here.
	f.write("j", a, map[string]any{"protocol": map[string]any{"approval_risk": []any{}}})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan bool, 1)
	go func() {
		// Shut down (like SIGTERM) once the tool is running.
		defer cancel()
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			// The file exists once the shell opens it; wait for the write.
			if b, err := os.ReadFile(filepath.Join(f.Dir, "j", "workspace", "runs.txt")); err == nil && strings.Contains(string(b), "run") {
				started <- true
				return
			}
		}
		started <- false
	}()
	_ = f.eng.Run(ctx, "j") // shut down on purpose: what it left is checked below
	if !<-started {
		t.Fatal("the slow tool never started")
	}
	m := f.run("j")
	requireStatus(t, m, lifecycle.Success, "completed")
	// Not run again, and nothing of the interrupted run stays: the
	// workspace is back at the recovery point the runs started from
	// (issue 20 item 3; it used to keep the cut-off run's write).
	if b, err := os.ReadFile(filepath.Join(f.Dir, "j", "workspace", "runs.txt")); err == nil {
		t.Errorf("runs.txt = %q: the interrupted run's write stayed, or it ran again", b)
	}
	var failed string
	for _, r := range f.Records("j") {
		if r.Event != nil && r.Event.Type == protocol.ToolExecutionFailed && r.Event.Subject == "t0" {
			failed, _ = r.Event.Body["error"].(string)
		}
	}
	if !strings.Contains(failed, "interrupted") || !strings.Contains(failed, "workspace restored to recovery point cp-") {
		t.Errorf("t0 failure = %q", failed)
	}
	if rep := f.verify("j"); !rep.OK() {
		t.Errorf("verify: %+v", rep.Problems)
	}
}

func TestSchemaOfThePhaseIsEnforced(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := happy()
	a["planner"] = testkit.Script(done(map[string]any{"proposals": []any{map[string]any{"id": "P 1", "objective": ""}}}))
	f.write("j", a, nil)
	m := f.run("j")
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != "SCHEMA_INVALID" {
		t.Fatalf("status %s code %s", m.Status, m.Run.ErrorCode)
	}
	if evs := f.events("j"); len(evs) != 1 {
		t.Errorf("events after an invalid answer: %v", evs)
	}
}

func TestVerifyDetectsTamperingOfARealTrace(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	f.write("j", happy(), nil)
	f.run("j")
	path := history.Path(filepath.Join(f.Dir, "j"))
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(orig), "\n")
	claimLine := -1
	for i, l := range lines {
		if strings.Contains(l, `"claim_issued"`) {
			claimLine = i
		}
	}
	cases := map[string]func() string{
		"edit": func() string {
			return strings.Replace(string(orig), "greeting.txt says hello", "greeting.txt says bye!", 1)
		},
		"delete": func() string {
			return strings.Join(append(append([]string{}, lines[:claimLine]...), lines[claimLine+1:]...), "")
		},
		"reorder": func() string {
			l := append([]string{}, lines...)
			l[claimLine], l[claimLine-1] = l[claimLine-1], l[claimLine]
			return strings.Join(l, "")
		},
		"truncate": func() string { return strings.Join(lines[:claimLine], "") },
	}
	for name, mk := range cases {
		if err := os.WriteFile(path, []byte(mk()), 0o600); err != nil {
			t.Fatal(err)
		}
		rep := f.verify("j")
		if rep.OK() {
			t.Errorf("%s: verify found nothing", name)
		}
	}
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if rep := f.verify("j"); !rep.OK() {
		t.Fatalf("restored trace: %+v", rep.Problems)
	}
}

// Seed 003's finalization guard: the final statement is blocked until the
// job's required checks pass. They run before it is signed, it names
// their outputs, and a failing check sends the work back to the claims
// with no final statement recorded.
func TestFinalStatementWaitsForTheRequiredChecks(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	f.write("bad", happy(), map[string]any{"protocol": map[string]any{"checks": []any{map[string]any{"name": "suite", "argv": []string{"false"}}}}})
	f.run("bad")
	if got := f.phases("bad"); !strings.Contains(got, "finalizing:BLOCKED claiming") {
		t.Errorf("phases: %s", got)
	}
	for _, ev := range f.events("bad") {
		if ev == protocol.FinalStatementSigned {
			t.Fatal("a final statement was signed while a required check fails")
		}
	}

	f.write("good", happy(), map[string]any{"protocol": map[string]any{"checks": []any{map[string]any{"name": "greeting", "argv": []string{"grep", "-q", "hello", "greeting.txt"}}}}})
	requireStatus(t, f.run("good"), lifecycle.Success, "completed")
	var checks []any
	for _, r := range f.Records("good") {
		if r.Event != nil && r.Event.Type == protocol.FinalStatementSigned {
			checks, _ = r.Event.Body["checks"].([]any)
		}
	}
	c, _ := checks[0].(map[string]any)
	if len(checks) != 1 || c["name"] != "greeting" || c["passed"] != true {
		t.Fatalf("final statement checks %v", checks)
	}
	store := protocol.NewStore(filepath.Join(f.Dir, "good"))
	if err := store.Verify(c["artifact"].(string)); err != nil {
		t.Errorf("the check's output: %v", err)
	}
}

// An Executor that labels a write outside the workspace "low" does not get
// it run unreviewed: Logist classifies the run high, the signed intent
// says so, and it waits for the Critic, who blocks it.
func TestLogistClassifiesTheRiskItself(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := happy()
	hostile := intent("t0", "shell", "low", map[string]any{"command": "echo pwned > ../outside.txt"})
	block := done(map[string]any{"intent_reviews": []any{map[string]any{"intent_id": "t0", "decision": "blocked", "reason": "outside the workspace"}}})
	a["critic"] = testkit.Script(approve("p1"), block, accept)
	a["executor"] = testkit.Script(done(map[string]any{"tool_intents": []any{hostile}}), tools, noIntents, claims)
	f.write("j", a, nil)
	m := f.run("j")
	requireStatus(t, m, lifecycle.Success, "completed")
	if got := f.phases("j"); !strings.HasPrefix(got, "planning reviewing executing:REVIEW intent_review:BLOCKED") {
		t.Errorf("phases: %s", got)
	}
	for _, r := range f.Records("j") {
		if r.Event != nil && r.Event.Type == protocol.ToolIntentSigned && r.Event.Subject == "t0" && r.Event.Body["risk_class"] != "high" {
			t.Errorf("signed intent t0 risk %v, want high", r.Event.Body["risk_class"])
		}
		if r.Event != nil && r.Event.Type == protocol.ToolExecutionStarted && r.Event.Subject == "t0" {
			t.Error("the hostile intent ran")
		}
	}
	if _, err := os.Stat(filepath.Join(f.Dir, "j", "outside.txt")); err == nil {
		t.Error("the hostile intent wrote outside the workspace")
	}
}

// A claim citing tool:ID of a failed run is refused: nothing of the answer
// is recorded and the Executor is asked again.
func TestToolEvidenceOfAFailedRunIsRefused(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := happy()
	fail := done(map[string]any{"tool_intents": []any{intent("t0", "shell", "high", map[string]any{"command": "exit 3"})}})
	a["executor"] = testkit.Script(fail, tools, noIntents, done(map[string]any{"claims": []any{claim("c1", "tool:t0")}}), claims)
	f.write("j", a, map[string]any{"protocol": map[string]any{"approval_risk": []any{}}})
	m := f.run("j")
	requireStatus(t, m, lifecycle.Success, "completed")
	if got := f.phases("j"); !strings.Contains(got, "claiming:VIOLATION claiming claim_review") {
		t.Errorf("phases: %s", got)
	}
}

// A guard's refusal reaches the steward: the transition that sends the
// phase back says why (the guard's message), and when the Critic keeps
// reviewing a proposal that does not exist until the RETRY limit, the
// job's reason names the guard, not only the Critic's summary.
func TestGuardsMessageIsTheTransitionsReason(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := happy()
	ghost := done(map[string]any{"reviews": []any{map[string]any{"proposal_id": "p9", "decision": "approved", "reason": "safe"}}})
	a["critic"] = testkit.Script(ghost, ghost, ghost, ghost)
	f.write("j", a, map[string]any{"limits": map[string]any{"max_retries": 1}})
	m := f.run("j")
	requireStatus(t, m, lifecycle.InterventionRequired, "reviewing")
	if !strings.Contains(m.Run.Reason, "RETRY limit of 1") || !strings.Contains(m.Run.Reason, `"p9"`) || !strings.Contains(m.Run.Reason, "VIOLATION") {
		t.Errorf("the job's reason does not name the guard: %s", m.Run.Reason)
	}
	var retries []string
	for _, r := range f.Records("j") {
		if r.Transition != nil && r.Transition.Event == string(lifecycle.EvRetry) {
			retries = append(retries, r.Transition.Reason)
		}
	}
	if len(retries) != 1 || !strings.HasPrefix(retries[0], "VIOLATION: ") || !strings.Contains(retries[0], `"p9"`) {
		t.Errorf("the phase_retry transitions' reasons: %q, want the guard's message", retries)
	}
	if rep := f.verify("j"); !rep.OK() {
		t.Errorf("verify: %+v", rep.Problems)
	}
}
