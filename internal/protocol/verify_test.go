package protocol

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/logist/logist/internal/history"
)

func verifyComplete(t *testing.T, b *tb, recs []history.Record) *Report {
	t.Helper()
	return Verify(recs, b.store, b.p, VerifyOptions{Complete: true})
}

// eventIndex finds the record of an event type (the first one).
func eventIndex(t *testing.T, recs []history.Record, typ string) int {
	t.Helper()
	for i, r := range recs {
		if r.Event != nil && r.Event.Type == typ {
			return i
		}
	}
	t.Fatalf("no %s in the trace", typ)
	return -1
}

func TestVerifyCompleteTracePasses(t *testing.T) {
	b := completeTrace(t)
	rep := verifyComplete(t, b, roundTrip(t, b.recs))
	if rep.Status != VerdictPass || rep.Events != 10 || rep.Head != b.l.Head {
		t.Fatalf("%s %d %s\n%s", rep.Status, rep.Events, rep.Head, rep.Markdown())
	}
	if len(rep.Checks) != len(checkOrder) {
		t.Errorf("%d checks", len(rep.Checks))
	}
	md := rep.Markdown()
	for _, want := range []string{"Status: **pass**", "| signatures | ok |", rep.Head} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// The same trace, not complete: a session still auditing passes too,
	// but with Complete it must have finished.
	i := eventIndex(t, b.recs, VerificationCompleted)
	if rep := Verify(b.recs[:i], b.store, b.p, VerifyOptions{}); rep.Status != VerdictPass {
		t.Errorf("trace under audit: %s", rep.Status)
	}
	if rep := Verify(b.recs[:i], b.store, b.p, VerifyOptions{Complete: true}); classes(rep)[FailFinalization] != 1 {
		t.Errorf("unfinished trace as complete: %v", classes(rep))
	}
}

// TestVerifyTampering: every way of tampering with a complete valid trace
// (as read back from history) makes the verification fail with the right
// class.
func TestVerifyTampering(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, b *tb, recs []history.Record) []history.Record
		class  string
	}{
		{"edit a body", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			recs[eventIndex(t, recs, ClaimIssued)].Event.Body["text"] = "there are no files"
			return recs
		}, FailHashMismatch},
		{"edit a body and rehash it", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			e := recs[eventIndex(t, recs, ProposalReviewed)].Event
			e.Body["decision"] = "rejected"
			e.Hash = Hash(e)
			return recs
		}, FailChainBreak},
		{"edit a signed body, rehash it", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			e := recs[eventIndex(t, recs, ClaimIssued)].Event
			e.Body["confidence"] = 1.0
			e.Hash = Hash(e)
			return recs
		}, FailSignatureInvalid},
		{"delete an event", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			i := eventIndex(t, recs, ProposalReviewed)
			return append(recs[:i], recs[i+1:]...)
		}, FailChainBreak},
		{"reorder two events", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			i := eventIndex(t, recs, ToolExecutionStarted)
			recs[i-1], recs[i] = recs[i], recs[i-1]
			return recs
		}, FailChainBreak},
		{"truncate the trace", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			return recs[:eventIndex(t, recs, FinalStatementSigned)]
		}, FailFinalization},
		{"truncate the last event", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			return recs[:len(recs)-1]
		}, FailFinalization},
		{"swap two signatures", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			x, y := recs[eventIndex(t, recs, ProposalCreated)].Event, recs[eventIndex(t, recs, ClaimIssued)].Event
			x.Sig, y.Sig = y.Sig, x.Sig
			return recs
		}, FailSignatureInvalid},
		{"swap signatures and key ids", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			x, y := recs[eventIndex(t, recs, ProposalCreated)].Event, recs[eventIndex(t, recs, ClaimIssued)].Event
			x.Sig, y.Sig, x.KeyID, y.KeyID = y.Sig, x.Sig, y.KeyID, x.KeyID
			return recs
		}, FailSignatureInvalid},
		{"re-sign with the wrong role's key", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			e := recs[eventIndex(t, recs, FinalStatementSigned)].Event
			e.KeyID, e.Sig, _ = b.keys.Sign(Executor, e.Hash)
			return recs
		}, FailSignatureInvalid},
		{"strip a signature", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			e := recs[eventIndex(t, recs, VerificationCompleted)].Event
			e.KeyID, e.Sig = "", ""
			return recs
		}, FailSignatureInvalid},
		{"replace the session's keys", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			e := recs[eventIndex(t, recs, SessionInitialized)].Event
			e.Body["roles"] = nil2keys(t).Public()
			e.Hash = Hash(e)
			return recs
		}, FailSignatureInvalid},
		{"corrupt an artifact", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			id := b.l.Claims["c1"].Evidence[0]
			if err := os.WriteFile(b.store.path(id), []byte(`{"exit_code":0,"stdout":"forged"}`), 0o600); err != nil {
				t.Fatal(err)
			}
			return recs
		}, FailHashMismatch},
		{"remove an artifact", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			if err := os.Remove(b.store.path(b.l.Intents["i1"].InputArtifact)); err != nil {
				t.Fatal(err)
			}
			return recs
		}, FailMissingArtifact},
		{"remove the report", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			if err := os.Remove(b.store.path(b.l.Verification.ReportArtifact)); err != nil {
				t.Fatal(err)
			}
			return recs
		}, FailMissingArtifact},
		{"change the role of a record", func(t *testing.T, b *tb, recs []history.Record) []history.Record {
			recs[eventIndex(t, recs, ProposalCreated)].Role = Critic
			return recs
		}, FailRolePolicy},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := completeTrace(t)
			recs := c.tamper(t, b, roundTrip(t, b.recs))
			rep := verifyComplete(t, b, recs)
			if rep.Status != VerdictFail || classes(rep)[c.class] == 0 {
				t.Errorf("status %s, classes %v, want %s\n%s", rep.Status, classes(rep), c.class, rep.Markdown())
			}
		})
	}
}

// TestVerifyFailureClasses: each failure class from a trace whose events
// are well-formed and correctly signed but break one rule (appended
// without the guards, as a buggy or hostile writer would).
func TestVerifyFailureClasses(t *testing.T) {
	t.Parallel()
	other := nil2keys(t)
	cases := []struct {
		name  string
		build func(b *tb)
		check string
		class string
	}{
		{"signature by a key the session did not record", func(b *tb) {
			b.executing()
			e, _ := NewEvent(ProposalCreated, Planner, "p2", proposalBody(""), b.l.Head, other)
			b.append(e)
		}, CheckSignatures, FailSignatureInvalid},
		{"prev link to a foreign event", func(b *tb) {
			b.init()
			e, _ := NewEvent(ProposalCreated, Planner, "p1", proposalBody(""), zeros(63)+"f", b.keys)
			b.append(e)
		}, CheckChain, FailChainBreak},
		{"stored hash is not the content's", func(b *tb) {
			b.init()
			e := b.event(ProposalCreated, Planner, "p1", proposalBody(""))
			e.Hash = zeros(64)
			b.append(e)
		}, CheckChain, FailHashMismatch},
		{"event by the wrong role", func(b *tb) {
			b.init()
			b.append(b.event(ProposalCreated, Critic, "p1", proposalBody("")))
		}, CheckRolePolicy, FailRolePolicy},
		{"body outside the schema", func(b *tb) {
			b.init()
			body := proposalBody("")
			body["priority"] = 1
			b.append(b.event(ProposalCreated, Planner, "p1", body))
		}, CheckSchema, FailSchemaInvalid},
		{"event record without event", func(b *tb) {
			b.init()
			b.seq++
			b.recs = append(b.recs, history.Record{V: 2, Seq: b.seq, Type: history.TypeEvent})
		}, CheckSchema, FailSchemaInvalid},
		{"execution before the intent", func(b *tb) {
			b.executing()
			b.append(b.event(ToolExecutionStarted, System, "i1", StartedBody(shellIntent("i1", "p1", "true", "low"))))
		}, CheckOrdering, FailOrdering},
		{"claim on evidence of a later run", func(b *tb) {
			b.executing()
			in := shellIntent("i1", "p1", "echo x", "low")
			b.intent(in)
			res, err := Execute(context.Background(), b.ws, in, b.store, b.p)
			if err != nil {
				b.t.Fatal(err)
			}
			b.append(b.event(ClaimIssued, Executor, "c1", claimBody(0.9, "", res.OutputArtifact)))
			// The run is recorded after the claim that cites it.
			b.l.State = Executing
			b.append(b.event(ToolExecutionStarted, System, "i1", StartedBody(in)))
			typ, body := ResultEvent(res)
			b.append(b.event(typ, System, "i1", body))
		}, CheckOrdering, FailOrdering + ":comes from a tool execution after the claim"},
		{"claim on evidence no run produced", func(b *tb) {
			res := b.claiming()
			id, _ := b.store.Put([]byte("planted"))
			b.emit(ClaimIssued, "c2", claimBody(0.9, "", res.OutputArtifact, id))
		}, CheckEvidence, FailMissingArtifact},
		{"claim without evidence", func(b *tb) {
			b.claiming()
			b.append(b.event(ClaimIssued, Executor, "c2", claimBody(0.9, "")))
		}, CheckEvidence, FailMissingArtifact},
		{"high-risk run without approval", func(b *tb) {
			b.executing()
			in := shellIntent("i1", "p1", "true", "high")
			b.intent(in)
			b.append(b.event(ToolExecutionStarted, System, "i1", StartedBody(in)))
		}, CheckAction, FailRolePolicy},
		{"final statement over a challenged claim", func(b *tb) {
			b.claiming()
			b.emit(ClaimChallenged, "c1", map[string]any{"reason": "weak"})
			b.append(b.event(FinalStatementSigned, Planner, "", map[string]any{"summary": "s", "claim_ids": []string{"c1"}}))
		}, CheckFinalization, FailFinalization},
		{"verification without a final statement", func(b *tb) {
			b.claiming()
			b.append(b.event(VerificationStarted, Auditor, "", nil))
			id, _ := b.store.Put([]byte("r"))
			b.append(b.event(VerificationCompleted, Auditor, "", map[string]any{"status": "pass", "report_artifact": id, "final_event": zeros(64)}))
		}, CheckFinalization, FailFinalization + ":without final_statement_signed"},
		{"role event after the final statement", func(b *tb) {
			b.claiming()
			b.final("c1")
			b.append(b.event(ClaimChallenged, Critic, "c1", map[string]any{"reason": "late"}))
		}, CheckFinalization, FailFinalization},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newTB(t)
			c.build(b)
			rep := Verify(roundTrip(t, b.recs), b.store, b.p, VerifyOptions{})
			class, detail, _ := strings.Cut(c.class, ":")
			var found bool
			for _, cr := range rep.Checks {
				for _, f := range cr.Failures {
					if cr.Name == c.check && f.Class == class && f.Seq > 0 && strings.Contains(f.Detail, detail) {
						found = true
					}
				}
			}
			if !found || rep.Status != VerdictFail {
				t.Errorf("want %s in check %s; got %s\n%s", c.class, c.check, rep.Status, rep.Markdown())
			}
		})
	}
}

// TestVerifyWarnings: a challenged-then-revised claim, a low confidence
// and a failed run pass with warnings.
func TestVerifyWarnings(t *testing.T) {
	t.Parallel()
	b := newTB(t)
	b.p.ApprovalRisk = []string{} // Logist classifies "exit 1" high
	b.executing()
	bad := shellIntent("i0", "p1", "exit 1", "high")
	b.intent(bad)
	b.run(bad)
	in := shellIntent("i1", "p1", "echo hello", "low")
	b.intent(in)
	res := b.run(in)
	b.claim("c1", res.OutputArtifact)
	b.emit(ClaimChallenged, "c1", map[string]any{"reason": "one listing proves little"})
	b.emit(ClaimIssued, "c2", claimBody(0.4, "c1", res.OutputArtifact)) // evidence is a completed run's output, never its input
	b.final("c2")
	rep := b.verification()
	if rep.Status != VerdictPassWarnings {
		t.Fatalf("%s\n%s", rep.Status, rep.Markdown())
	}
	md := rep.Markdown()
	for _, want := range []string{`claim "c1" was challenged`, `claim "c2" has low confidence 0.40`, `intent "i0" failed: exit status 1`} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if b.l.State != Completed {
		t.Errorf("state %s", b.l.State)
	}
	if rep := verifyComplete(t, b, roundTrip(t, b.recs)); rep.Status != VerdictPassWarnings {
		t.Errorf("re-verification: %s", rep.Status)
	}
}

// TestRunChecks: the job's own checks run in the workspace; a failing one
// fails the report and its output is an artifact.
func TestRunChecks(t *testing.T) {
	b := completeTrace(t)
	if err := os.WriteFile(b.ws+"/marker", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := b.p
	p.Checks = []Check{
		{Name: "marker", Argv: []string{"test", "-f", "marker"}},
		{Name: "suite", Argv: []string{"/bin/sh", "-c", "echo 2 tests failed; exit 2"}},
		{Name: "empty"},
	}
	res, err := RunChecks(context.Background(), b.ws, b.store, p)
	if err != nil || len(res) != 3 {
		t.Fatalf("%v %v", res, err)
	}
	if !res[0].OK || res[1].OK || res[2].OK || res[1].Failures[0].Class != FailCheck {
		t.Fatalf("%+v", res)
	}
	out, err := b.store.Get(res[1].Artifact)
	if err != nil || !strings.Contains(string(out), "2 tests failed") || !strings.Contains(string(out), `"exit_code":2`) {
		t.Errorf("check output %s %v", out, err)
	}
	rep := verifyComplete(t, b, b.recs)
	rep.Add(res[0])
	if rep.Status != VerdictPass {
		t.Errorf("passing check: %s", rep.Status)
	}
	rep.Add(res[1])
	if rep.Status != VerdictFail || !strings.Contains(rep.Markdown(), "check:suite") {
		t.Errorf("failing check: %s", rep.Status)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunChecks(ctx, b.ws, b.store, p); err == nil {
		t.Error("cancelled RunChecks succeeded")
	}
}
