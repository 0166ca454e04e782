package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/logist/logist/internal/history"
)

// tb builds protocol traces the way the engine does: each event is built
// with NewEvent on the ledger's head, checked by the guards, applied and
// kept as a history record.
type tb struct {
	t     testing.TB
	dir   string // job folder
	ws    string // workspace
	keys  *Keys
	store Store
	p     Policy
	l     *Ledger
	recs  []history.Record
	seq   int64
}

func newTB(t *testing.T) *tb {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	return newTBIn(t, dir, ws)
}

func newTBIn(t testing.TB, dir, ws string) *tb {
	keys, err := LoadOrCreateKeys(dir, Roles)
	if err != nil {
		t.Fatal(err)
	}
	b := &tb{t: t, dir: dir, ws: ws, keys: keys, store: NewStore(dir), p: Policy{}.WithDefaults()}
	b.l = NewLedger(&b.store)
	return b
}

// event builds an event on the current head. A mandatory type emitted by
// a role without a key (SYSTEM) is left unsigned.
func (b *tb) event(typ, role, subject string, body map[string]any) *history.ProtocolEvent {
	b.t.Helper()
	keys := b.keys
	if _, ok := keys.priv[role]; !ok {
		keys = nil
	}
	if keys == nil && Mandatory[typ] {
		plain, _ := plainBody(body)
		e := &history.ProtocolEvent{Type: typ, Role: role, Subject: subject, Body: plain, PrevEvent: b.l.Head}
		e.Hash = Hash(e)
		return e
	}
	e, err := NewEvent(typ, role, subject, body, b.l.Head, keys)
	if err != nil {
		b.t.Fatalf("NewEvent(%s): %v", typ, err)
	}
	return e
}

// emit builds, checks and appends an event; the guards must accept it.
func (b *tb) emit(typ, subject string, body map[string]any) *history.ProtocolEvent {
	b.t.Helper()
	e := b.event(typ, Emitters[typ], subject, body)
	if err := b.l.Check(e, b.p); err != nil {
		b.t.Fatalf("Check(%s %s): %v", typ, subject, err)
	}
	b.append(e)
	return e
}

// refuse builds an event that the guards must refuse, and returns why.
func (b *tb) refuse(typ, role, subject string, body map[string]any) *GuardError {
	b.t.Helper()
	return b.refuseEvent(b.event(typ, role, subject, body))
}

func (b *tb) refuseEvent(e *history.ProtocolEvent) *GuardError {
	b.t.Helper()
	err := b.l.Check(e, b.p)
	if err == nil {
		b.t.Fatalf("Check(%s %s) accepted an event it must refuse", e.Type, e.Subject)
	}
	var g *GuardError
	if !errors.As(err, &g) {
		b.t.Fatalf("Check returned %T, want *GuardError", err)
	}
	return g
}

// append adds an event without checking it (to build invalid traces).
func (b *tb) append(e *history.ProtocolEvent) {
	b.t.Helper()
	b.seq++
	r := history.Record{V: history.RecordVersion, Seq: b.seq, Type: history.TypeEvent, Role: e.Role, Event: e}
	if err := b.l.ApplyRecord(r); err != nil {
		b.t.Fatal(err)
	}
	b.recs = append(b.recs, r)
}

// other adds a non-event record (the verifier must skip it).
func (b *tb) other() {
	b.seq++
	b.recs = append(b.recs, history.Record{V: history.RecordVersion, Seq: b.seq, Type: history.TypeTransition,
		Transition: &history.Transition{From: "PENDING", To: "RUNNING", Event: "start", Actor: "daemon"}})
}

func (b *tb) init() {
	b.emit(SessionInitialized, "", SessionBody(b.keys, "count the files", b.p))
}

func (b *tb) propose(id string) {
	b.emit(ProposalCreated, id, proposalBody(""))
}

func proposalBody(revises string) map[string]any {
	m := map[string]any{
		"objective": "list the workspace", "assumptions": []string{"a shell exists"},
		"required_tools": []string{"shell"}, "expected_evidence": []string{"the listing"},
	}
	if revises != "" {
		m["revises"] = revises
	}
	return m
}

func (b *tb) review(id, decision string) {
	body := map[string]any{"decision": decision, "reason": "fine"}
	if decision == StatusConditional {
		body["conditions"] = "read only"
	}
	b.emit(ProposalReviewed, id, body)
}

func shellIntent(id, pid, cmd, risk string) Intent {
	return Intent{ID: id, ProposalID: pid, Tool: ToolShell, Input: map[string]any{"command": cmd}, RiskClass: risk, Justification: "need it"}
}

func (b *tb) intentBody(in Intent) map[string]any {
	b.t.Helper()
	body, err := IntentBody(in, b.store)
	if err != nil {
		b.t.Fatal(err)
	}
	return body
}

func (b *tb) intent(in Intent) {
	b.t.Helper()
	b.emit(ToolIntentSigned, in.ID, b.intentBody(in))
}

func (b *tb) reviewIntent(id, decision string) {
	b.emit(ToolIntentReviewed, id, map[string]any{"decision": decision, "reason": "checked"})
}

// run starts, executes and records an intent; it returns the result.
func (b *tb) run(in Intent) *ToolResult {
	b.t.Helper()
	b.emit(ToolExecutionStarted, in.ID, StartedBody(in))
	res, err := Execute(context.Background(), b.ws, in, b.store, b.p)
	if err != nil {
		b.t.Fatal(err)
	}
	typ, body := ResultEvent(res)
	b.emit(typ, in.ID, body)
	return res
}

func claimBody(conf float64, revises string, evidence ...string) map[string]any {
	if evidence == nil {
		evidence = []string{}
	}
	m := map[string]any{"text": "there are files", "confidence": conf, "evidence": evidence}
	if revises != "" {
		m["revises"] = revises
	}
	return m
}

func (b *tb) claim(id string, evidence ...string) {
	b.emit(ClaimIssued, id, claimBody(0.9, "", evidence...))
}

func (b *tb) final(ids ...string) {
	b.emit(FinalStatementSigned, "", map[string]any{"summary": "done", "claim_ids": ids})
}

// verification runs the verifier like the Auditor and records the run.
func (b *tb) verification() *Report {
	b.t.Helper()
	b.emit(VerificationStarted, "", map[string]any{"checks": []string{"schema", "chain"}})
	rep := Verify(b.recs, b.store, b.p, VerifyOptions{})
	id, err := b.store.Put([]byte(rep.Markdown()))
	if err != nil {
		b.t.Fatal(err)
	}
	b.emit(VerificationCompleted, "", VerificationBody(rep, id, b.l.Final.Hash, "auditor's notes"))
	return rep
}

// executing builds a trace up to an approved proposal p1.
func (b *tb) executing() {
	b.init()
	b.propose("p1")
	b.review("p1", StatusApproved)
}

// claiming builds a trace up to one claim c1 on a completed run of i1; it
// returns the run's result.
func (b *tb) claiming() *ToolResult {
	b.t.Helper()
	b.executing()
	in := shellIntent("i1", "p1", "echo hello", "low")
	b.intent(in)
	res := b.run(in)
	if !res.OK {
		b.t.Fatalf("run: %+v", res)
	}
	b.claim("c1", res.OutputArtifact)
	return res
}

// complete builds a whole valid trace, with a non-event record among the
// events; the verification it records passed.
func completeTrace(t *testing.T) *tb {
	t.Helper()
	b := newTB(t)
	b.init()
	b.other()
	b.claimingRest()
	b.final("c1")
	if rep := b.verification(); rep.Status != VerdictPass {
		t.Fatalf("verification of a valid trace: %s\n%s", rep.Status, rep.Markdown())
	}
	return b
}

func (b *tb) claimingRest() {
	b.propose("p1")
	b.review("p1", StatusApproved)
	in := shellIntent("i1", "p1", "echo hello", "low")
	b.intent(in)
	res := b.run(in)
	b.claim("c1", res.OutputArtifact)
}

// roundTrip is what history.jsonl gives back: records through JSON.
func roundTrip(t *testing.T, recs []history.Record) []history.Record {
	t.Helper()
	data, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	var out []history.Record
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// classes lists the failure classes of a report.
func classes(r *Report) map[string]int {
	out := map[string]int{}
	for _, f := range r.Failures() {
		out[f.Class]++
	}
	return out
}
