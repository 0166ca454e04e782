package protocol

import (
	"os"
	"strings"
	"testing"

	"github.com/logist/logist/internal/history"
)

var allStates = []State{Initialized, Planning, Reviewing, Executing, Claiming, Auditing, Completed, Failed, Aborted}

// TestCanTransitionTable checks every pair of states against seed 003's
// table: the forward path, and any state to failed or aborted (but a
// failed or aborted session is over).
func TestCanTransitionTable(t *testing.T) {
	forward := map[State]State{Initialized: Planning, Planning: Reviewing, Reviewing: Executing,
		Executing: Claiming, Claiming: Auditing, Auditing: Completed}
	for _, from := range allStates {
		for _, to := range allStates {
			want := forward[from] == to
			if (to == Failed || to == Aborted) && from != Failed && from != Aborted {
				want = true
			}
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
	if CanTransition("bogus", Failed) || CanTransition(Initialized, "bogus") {
		t.Error("unknown state accepted")
	}
}

// TestSessionStates walks the seed's lifecycle event by event.
func TestSessionStates(t *testing.T) {
	t.Parallel()
	b := newTB(t)
	want := func(s State) {
		t.Helper()
		if b.l.State != s {
			t.Fatalf("state %s, want %s", b.l.State, s)
		}
	}
	want(Initialized)
	b.init()
	want(Planning) // 1. after session_initialized
	b.propose("p1")
	want(Reviewing) // 2. after a proposal
	b.review("p1", StatusRejected)
	want(Reviewing) // a rejection does not start execution
	b.emit(ProposalCreated, "p2", proposalBody("p1"))
	b.review("p2", StatusConditional)
	want(Executing) // 3. after an approval (conditional counts)
	in := shellIntent("i1", "p2", "echo hi", "low")
	b.intent(in)
	res := b.run(in)
	want(Executing)
	b.claim("c1", res.OutputArtifact)
	want(Claiming) // 4. execution done, first claim
	b.final("c1")
	want(Claiming)
	b.emit(VerificationStarted, "", nil)
	want(Auditing) // 5. claims issued, verification running
	id, _ := b.store.Put([]byte("report"))
	b.emit(VerificationCompleted, "", map[string]any{"status": VerdictPassWarnings, "report_artifact": id, "final_event": b.l.Final.Hash})
	want(Completed) // 6. pass with warnings completes
	b.emit(SessionFailed, "", map[string]any{"reason": "integrity violation found later"})
	want(Failed) // 7. any state to failed
	if g := b.refuse(SessionAborted, System, "", map[string]any{"reason": "x"}); g.Class != FailOrdering {
		t.Errorf("event after failure: %v", g)
	}
}

// TestVerificationFailKeepsAuditing: a failing verification does not
// complete the session; it may only fail or be aborted afterwards.
func TestVerificationFailKeepsAuditing(t *testing.T) {
	t.Parallel()
	b := newTB(t)
	res := b.claiming()
	_ = res
	b.final("c1")
	b.emit(VerificationStarted, "", nil)
	id, _ := b.store.Put([]byte("report"))
	b.emit(VerificationCompleted, "", map[string]any{"status": VerdictFail, "report_artifact": id, "final_event": b.l.Final.Hash})
	if b.l.State != Auditing || b.l.Verification.Status != VerdictFail {
		t.Fatalf("state %s, verification %+v", b.l.State, b.l.Verification)
	}
	if g := b.refuse(VerificationStarted, Auditor, "", nil); g.Class != FailOrdering {
		t.Errorf("event after completion: %v", g)
	}
	b.emit(SessionFailed, "", map[string]any{"reason": "verification failed", "class": "missing_artifact"})
	if b.l.State != Failed {
		t.Fatal(b.l.State)
	}
}

// TestAbortFromEveryState: session_aborted is accepted in every live
// state, moves to aborted, and nothing follows it.
func TestAbortFromEveryState(t *testing.T) {
	t.Parallel()
	steps := []func(b *tb){
		func(b *tb) {},
		func(b *tb) { b.init() },
		func(b *tb) { b.init(); b.propose("p1") },
		func(b *tb) { b.executing() },
		func(b *tb) { b.claiming() },
		func(b *tb) { b.claiming(); b.final("c1"); b.emit(VerificationStarted, "", nil) },
	}
	for i, step := range steps {
		b := newTB(t)
		step(b)
		from := b.l.State
		if i == 0 {
			// The first event must be session_initialized, even an abort.
			if g := b.refuse(SessionAborted, System, "", map[string]any{"reason": "halt"}); g.Class != FailOrdering {
				t.Errorf("abort as first event: %v", g)
			}
			continue
		}
		b.emit(SessionAborted, "", map[string]any{"reason": "logist halt", "by": "steward"})
		if b.l.State != Aborted {
			t.Errorf("abort from %s: state %s", from, b.l.State)
		}
		if g := b.refuse(SessionFailed, System, "", map[string]any{"reason": "x"}); g.Class != FailOrdering {
			t.Errorf("event after abort from %s: %v", from, g)
		}
	}
}

type guardCase struct {
	name  string
	setup func(b *tb)
	event func(b *tb) *history.ProtocolEvent
	guard string
	class string
}

func ev(typ, subject string, body map[string]any) func(b *tb) *history.ProtocolEvent {
	return func(b *tb) *history.ProtocolEvent { return b.event(typ, Emitters[typ], subject, body) }
}

func evAs(typ, role, subject string, body map[string]any) func(b *tb) *history.ProtocolEvent {
	return func(b *tb) *history.ProtocolEvent { return b.event(typ, role, subject, body) }
}

func initOnly(b *tb) { b.init() }

func runGuardCases(t *testing.T, cases []guardCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newTB(t)
			if c.setup != nil {
				c.setup(b)
			}
			before := len(b.l.Events)
			g := b.refuseEvent(c.event(b))
			t.Log(g.Msg)
			if g.Guard != c.guard || g.Class != c.class {
				t.Errorf("got %v, want guard %s class %s", g, c.guard, c.class)
			}
			if len(b.l.Events) != before {
				t.Error("Check changed the ledger")
			}
		})
	}
}

func TestRoleGuard(t *testing.T) {
	t.Parallel()
	// Every type by every wrong role.
	for typ, role := range Emitters {
		for _, r := range append([]string{System}, Roles...) {
			if r == role {
				continue
			}
			b := newTB(t)
			if typ != SessionInitialized {
				b.init()
			}
			if g := b.refuse(typ, r, "x", map[string]any{}); g.Guard != GuardRole || g.Class != FailRolePolicy {
				t.Errorf("%s by %s: %v", typ, r, g)
			}
		}
	}
}

func TestChainGuard(t *testing.T) {
	other := nil2keys(t)
	runGuardCases(t, []guardCase{
		{"prev is not the head", initOnly, func(b *tb) *history.ProtocolEvent {
			e, _ := NewEvent(ProposalCreated, Planner, "p1", proposalBody(""), history.GenesisHash, b.keys)
			return e
		}, GuardChain, FailChainBreak},
		{"hash is not the content's", initOnly, func(b *tb) *history.ProtocolEvent {
			e := b.event(ProposalCreated, Planner, "p1", proposalBody(""))
			e.Body["objective"] = "something else"
			return e
		}, GuardChain, FailHashMismatch},
		{"unsigned mandatory type", initOnly, func(b *tb) *history.ProtocolEvent {
			e := b.event(ProposalCreated, Planner, "p1", proposalBody(""))
			e.Sig, e.KeyID = "", ""
			return e
		}, GuardChain, FailSignatureInvalid},
		{"signed by another role's key", initOnly, func(b *tb) *history.ProtocolEvent {
			e := b.event(ProposalCreated, Planner, "p1", proposalBody(""))
			e.KeyID, e.Sig, _ = b.keys.Sign(Critic, e.Hash)
			return e
		}, GuardChain, FailSignatureInvalid},
		{"signed by a key the session did not record", initOnly, func(b *tb) *history.ProtocolEvent {
			e, _ := NewEvent(ProposalCreated, Planner, "p1", proposalBody(""), b.l.Head, other)
			return e
		}, GuardChain, FailSignatureInvalid},
	})
}

func TestSchemaGuard(t *testing.T) {
	noObjective := proposalBody("")
	delete(noObjective, "objective")
	extra := proposalBody("")
	extra["hidden"] = "payload"
	runGuardCases(t, []guardCase{
		{"unknown type", initOnly, evAs("proposal_deleted", Planner, "p1", nil), GuardSchema, FailSchemaInvalid},
		{"missing field", initOnly, ev(ProposalCreated, "p1", noObjective), GuardSchema, FailSchemaInvalid},
		{"unknown field", initOnly, ev(ProposalCreated, "p1", extra), GuardSchema, FailSchemaInvalid},
		{"bad subject", initOnly, ev(ProposalCreated, "P 1", proposalBody("")), GuardSchema, FailSchemaInvalid},
		{"no subject", initOnly, ev(ProposalCreated, "", proposalBody("")), GuardSchema, FailSchemaInvalid},
		{"subject on a session event", initOnly, ev(SessionAborted, "x", map[string]any{"reason": "r"}), GuardSchema, FailSchemaInvalid},
		{"null body", initOnly, func(b *tb) *history.ProtocolEvent {
			e := b.event(SessionAborted, System, "", nil)
			e.Body = nil
			e.Hash = Hash(e)
			return e
		}, GuardSchema, FailSchemaInvalid},
		{"conditional approval without conditions", func(b *tb) { b.init(); b.propose("p1") },
			ev(ProposalReviewed, "p1", map[string]any{"decision": StatusConditional, "reason": "r"}), GuardSchema, FailSchemaInvalid},
		{"unknown decision", func(b *tb) { b.init(); b.propose("p1") },
			ev(ProposalReviewed, "p1", map[string]any{"decision": "maybe", "reason": "r"}), GuardSchema, FailSchemaInvalid},
		{"confidence above 1", func(b *tb) { b.claiming() },
			func(b *tb) *history.ProtocolEvent {
				return b.event(ClaimIssued, Executor, "c2", claimBody(1.5, "", b.l.Claims["c1"].Evidence...))
			}, GuardSchema, FailSchemaInvalid},
		{"evidence not an artifact id", func(b *tb) { b.claiming() },
			ev(ClaimIssued, "c2", claimBody(0.5, "", "workspace/file.txt")), GuardSchema, FailSchemaInvalid},
		{"fractional exit code", func(b *tb) {
			b.executing()
			in := shellIntent("i1", "p1", "true", "low")
			b.intent(in)
			b.emit(ToolExecutionStarted, "i1", StartedBody(in))
		}, func(b *tb) *history.ProtocolEvent {
			in := b.l.Intents["i1"]
			return b.event(ToolExecutionCompleted, System, "i1", map[string]any{"input_artifact": in.InputArtifact,
				"output_artifact": in.InputArtifact, "exit_code": 0.5, "duration_ms": 1})
		}, GuardSchema, FailSchemaInvalid},
		{"session without all role keys", nil, func(b *tb) *history.ProtocolEvent {
			pub := b.keys.Public()
			delete(pub, Auditor)
			return b.event(SessionInitialized, System, "", map[string]any{"roles": pub})
		}, GuardSchema, FailSchemaInvalid},
	})
}

func TestOrderingGuard(t *testing.T) {
	two := func(b *tb) { b.init(); b.propose("p1"); b.propose("p2"); b.review("p1", StatusApproved) }
	started := func(b *tb) {
		b.executing()
		in := shellIntent("i1", "p1", "true", "low")
		b.intent(in)
		b.emit(ToolExecutionStarted, "i1", StartedBody(in))
	}
	inI2 := shellIntent("i2", "p1", "true", "low")
	runGuardCases(t, []guardCase{
		{"first event is not session_initialized", nil, ev(ProposalCreated, "p1", proposalBody("")), GuardOrdering, FailOrdering},
		{"session_initialized twice", initOnly, func(b *tb) *history.ProtocolEvent {
			return b.event(SessionInitialized, System, "", map[string]any{"roles": b.keys.Public()})
		}, GuardOrdering, FailOrdering},
		{"duplicate proposal id", func(b *tb) { b.init(); b.propose("p1") }, ev(ProposalCreated, "p1", proposalBody("")), GuardOrdering, FailOrdering},
		{"revision of an unknown proposal", initOnly, ev(ProposalCreated, "p2", proposalBody("p9")), GuardOrdering, FailOrdering},
		{"proposal during execution without fallback", func(b *tb) { b.executing() }, ev(ProposalCreated, "p2", proposalBody("")), GuardOrdering, FailOrdering},
		{"proposal after claims", func(b *tb) { b.claiming() }, ev(ProposalCreated, "p2", proposalBody("")), GuardOrdering, FailOrdering},
		{"review of an unknown proposal", func(b *tb) { b.init(); b.propose("p1") },
			ev(ProposalReviewed, "p2", map[string]any{"decision": "approved", "reason": "r"}), GuardOrdering, FailOrdering},
		{"review twice", func(b *tb) { b.executing() },
			ev(ProposalReviewed, "p1", map[string]any{"decision": "rejected", "reason": "r"}), GuardOrdering, FailOrdering},
		{"intent before any approval", func(b *tb) { b.init(); b.propose("p1") },
			func(b *tb) *history.ProtocolEvent {
				return b.event(ToolIntentSigned, Executor, "i1", b.intentBody(shellIntent("i1", "p1", "true", "low")))
			}, GuardOrdering, FailOrdering},
		{"intent for an unreviewed proposal", two, func(b *tb) *history.ProtocolEvent {
			return b.event(ToolIntentSigned, Executor, "i1", b.intentBody(shellIntent("i1", "p2", "true", "low")))
		}, GuardOrdering, FailOrdering},
		{"intent for an unknown proposal", two, func(b *tb) *history.ProtocolEvent {
			return b.event(ToolIntentSigned, Executor, "i1", b.intentBody(shellIntent("i1", "p9", "true", "low")))
		}, GuardOrdering, FailOrdering},
		{"duplicate intent id", started, func(b *tb) *history.ProtocolEvent {
			return b.event(ToolIntentSigned, Executor, "i1", b.intentBody(shellIntent("i1", "p1", "true", "low")))
		}, GuardOrdering, FailOrdering},
		{"review of an unknown intent", func(b *tb) { b.executing() },
			ev(ToolIntentReviewed, "i9", map[string]any{"decision": "approved", "reason": "r"}), GuardOrdering, FailOrdering},
		{"intent review after start", started,
			ev(ToolIntentReviewed, "i1", map[string]any{"decision": "approved", "reason": "r"}), GuardOrdering, FailOrdering},
		{"execution without intent", func(b *tb) { b.executing() }, ev(ToolExecutionStarted, "i2", StartedBody(inI2)), GuardOrdering, FailOrdering},
		{"second run of an intent", started, func(b *tb) *history.ProtocolEvent {
			return b.event(ToolExecutionStarted, System, "i1", StartedBody(shellIntent("i1", "p1", "true", "low")))
		}, GuardOrdering, FailOrdering},
		{"completion without start", func(b *tb) { b.executing(); b.intent(inI2) }, func(b *tb) *history.ProtocolEvent {
			a := b.l.Intents["i2"].InputArtifact
			return b.event(ToolExecutionCompleted, System, "i2", map[string]any{"input_artifact": a, "output_artifact": a, "exit_code": 0, "duration_ms": 1})
		}, GuardOrdering, FailOrdering},
		{"failure without start", func(b *tb) { b.executing(); b.intent(inI2) }, func(b *tb) *history.ProtocolEvent {
			return b.event(ToolExecutionFailed, System, "i2", map[string]any{"input_artifact": b.l.Intents["i2"].InputArtifact, "error": "x"})
		}, GuardOrdering, FailOrdering},
		{"claim before execution", func(b *tb) { b.init(); b.propose("p1") },
			ev(ClaimIssued, "c1", claimBody(0.9, "", "sha256:"+zeros(64))), GuardOrdering, FailOrdering},
		{"claim while a run is in flight", started,
			func(b *tb) *history.ProtocolEvent {
				return b.event(ClaimIssued, Executor, "c1", claimBody(0.9, "", b.l.Intents["i1"].InputArtifact))
			}, GuardOrdering, FailOrdering},
		{"duplicate claim id", func(b *tb) { b.claiming() }, func(b *tb) *history.ProtocolEvent {
			return b.event(ClaimIssued, Executor, "c1", claimBody(0.9, "", b.l.Claims["c1"].Evidence...))
		}, GuardOrdering, FailOrdering},
		{"revision of an unknown claim", func(b *tb) { b.claiming() }, func(b *tb) *history.ProtocolEvent {
			return b.event(ClaimIssued, Executor, "c2", claimBody(0.9, "c9", b.l.Claims["c1"].Evidence...))
		}, GuardOrdering, FailOrdering},
		{"revision of a superseded claim", func(b *tb) {
			b.claiming()
			b.emit(ClaimIssued, "c2", claimBody(0.9, "c1", b.l.Claims["c1"].Evidence...))
		}, func(b *tb) *history.ProtocolEvent {
			return b.event(ClaimIssued, Executor, "c3", claimBody(0.9, "c1", b.l.Claims["c1"].Evidence...))
		}, GuardOrdering, FailOrdering},
		{"challenge of an unknown claim", func(b *tb) { b.claiming() },
			ev(ClaimChallenged, "c9", map[string]any{"reason": "r"}), GuardOrdering, FailOrdering},
		{"challenge twice", func(b *tb) { b.claiming(); b.emit(ClaimChallenged, "c1", map[string]any{"reason": "weak"}) },
			ev(ClaimChallenged, "c1", map[string]any{"reason": "r"}), GuardOrdering, FailOrdering},
		{"verification started twice", func(b *tb) { b.claiming(); b.final("c1"); b.emit(VerificationStarted, "", nil) },
			ev(VerificationStarted, "", nil), GuardOrdering, FailOrdering},
		{"verification completed before started", func(b *tb) { b.claiming(); b.final("c1") },
			func(b *tb) *history.ProtocolEvent {
				id, _ := b.store.Put([]byte("r"))
				return b.event(VerificationCompleted, Auditor, "", map[string]any{"status": "pass", "report_artifact": id, "final_event": b.l.Final.Hash})
			}, GuardOrdering, FailOrdering},
		{"anything after completion but fail/abort", func(b *tb) {
			b.claiming()
			b.final("c1")
			b.verification()
		}, ev(VerificationStarted, "", nil), GuardOrdering, FailOrdering},
	})
}

func TestEvidenceGuard(t *testing.T) {
	started := func(b *tb) {
		b.executing()
		in := shellIntent("i1", "p1", "true", "low")
		b.intent(in)
		b.emit(ToolExecutionStarted, "i1", StartedBody(in))
	}
	runGuardCases(t, []guardCase{
		{"claim without evidence", func(b *tb) { b.claiming() }, ev(ClaimIssued, "c2", claimBody(0.9, "")), GuardEvidence, FailMissingArtifact},
		{"claim below the policy's minimum", func(b *tb) { b.claiming(); b.p.MinEvidence = 2 }, func(b *tb) *history.ProtocolEvent {
			return b.event(ClaimIssued, Executor, "c2", claimBody(0.9, "", b.l.Claims["c1"].Evidence...))
		}, GuardEvidence, FailMissingArtifact},
		{"intent whose artifact is not its input hash", func(b *tb) { b.executing() }, func(b *tb) *history.ProtocolEvent {
			body := b.intentBody(shellIntent("i1", "p1", "true", "low"))
			body["input_hash"] = zeros(64)
			return b.event(ToolIntentSigned, Executor, "i1", body)
		}, GuardEvidence, FailHashMismatch},
		{"intent whose input artifact is not stored", func(b *tb) { b.executing() }, func(b *tb) *history.ProtocolEvent {
			in := shellIntent("i1", "p1", "true", "low")
			h := NormalizedInputHash(in.Tool, in.Input)
			return b.event(ToolIntentSigned, Executor, "i1", map[string]any{"proposal_id": "p1", "tool": "shell",
				"input_hash": h, "input_artifact": "sha256:" + h, "risk_class": "low", "justification": "j"})
		}, GuardEvidence, FailMissingArtifact},
		{"intent whose input artifact was altered", func(b *tb) { b.executing() }, func(b *tb) *history.ProtocolEvent {
			body := b.intentBody(shellIntent("i1", "p1", "true", "low"))
			if err := os.WriteFile(b.store.path(body["input_artifact"].(string)), []byte("{}"), 0o600); err != nil {
				b.t.Fatal(err)
			}
			return b.event(ToolIntentSigned, Executor, "i1", body)
		}, GuardEvidence, FailHashMismatch},
		{"run of another input", func(b *tb) { b.executing(); b.intent(shellIntent("i1", "p1", "true", "low")) },
			func(b *tb) *history.ProtocolEvent {
				return b.event(ToolExecutionStarted, System, "i1", StartedBody(shellIntent("i1", "p1", "rm -rf /", "low")))
			}, GuardEvidence, FailHashMismatch},
		{"completion naming an output that is not stored", started, func(b *tb) *history.ProtocolEvent {
			return b.event(ToolExecutionCompleted, System, "i1", map[string]any{"input_artifact": b.l.Intents["i1"].InputArtifact,
				"output_artifact": "sha256:" + zeros(64), "exit_code": 0, "duration_ms": 1})
		}, GuardEvidence, FailMissingArtifact},
		{"verification report not stored", func(b *tb) { b.claiming(); b.final("c1"); b.emit(VerificationStarted, "", nil) },
			func(b *tb) *history.ProtocolEvent {
				return b.event(VerificationCompleted, Auditor, "", map[string]any{"status": "pass", "report_artifact": "sha256:" + zeros(64), "final_event": b.l.Final.Hash})
			}, GuardEvidence, FailMissingArtifact},
	})
}

// TestMissingArtifactAtClaimTime: seed 003 lets a claim whose evidence is
// missing through, so the session continues to auditing and fails there.
func TestMissingArtifactAtClaimTime(t *testing.T) {
	t.Parallel()
	b := newTB(t)
	res := b.claiming()
	missing := "sha256:" + strings.Repeat("ab", 32)
	b.emit(ClaimIssued, "c2", claimBody(0.9, "", res.OutputArtifact, missing))
	if b.l.State != Claiming || len(b.l.Pending) != 1 || b.l.Pending[0].Class != FailMissingArtifact || b.l.Pending[0].Subject != "c2" {
		t.Fatalf("state %s, pending %+v", b.l.State, b.l.Pending)
	}
	b.final("c1", "c2")
	rep := b.verification()
	if rep.Status != VerdictFail || classes(rep)[FailMissingArtifact] == 0 {
		t.Fatalf("verification %s %v", rep.Status, classes(rep))
	}
	if b.l.State != Auditing {
		t.Errorf("state %s after a failed verification", b.l.State)
	}
	// An evidence artifact produced by a run but gone from the store is
	// pending as well.
	b2 := newTB(t)
	res2 := b2.claiming()
	if err := os.Remove(b2.store.path(res2.OutputArtifact)); err != nil {
		t.Fatal(err)
	}
	b2.emit(ClaimIssued, "c2", claimBody(0.9, "", res2.OutputArtifact))
	if len(b2.l.Pending) != 1 || b2.l.Pending[0].Class != FailMissingArtifact {
		t.Errorf("pending %+v", b2.l.Pending)
	}
}

func TestFinalizationGuard(t *testing.T) {
	t.Parallel()
	challenged := func(b *tb) { b.claiming(); b.emit(ClaimChallenged, "c1", map[string]any{"reason": "weak"}) }
	runGuardCases(t, []guardCase{
		{"no claims", func(b *tb) { b.executing() },
			ev(FinalStatementSigned, "", map[string]any{"summary": "s", "claim_ids": []string{"c1"}}), GuardFinalization, FailFinalization},
		{"challenged claim not revised", challenged,
			ev(FinalStatementSigned, "", map[string]any{"summary": "s", "claim_ids": []string{"c1"}}), GuardFinalization, FailFinalization},
		{"bundle names an unknown claim", func(b *tb) { b.claiming() },
			ev(FinalStatementSigned, "", map[string]any{"summary": "s", "claim_ids": []string{"c9"}}), GuardFinalization, FailFinalization},
		{"bundle names a superseded claim", func(b *tb) {
			challenged(b)
			b.emit(ClaimIssued, "c2", claimBody(0.8, "c1", b.l.Claims["c1"].Evidence...))
		}, ev(FinalStatementSigned, "", map[string]any{"summary": "s", "claim_ids": []string{"c1", "c2"}}), GuardFinalization, FailFinalization},
		{"role event after the final statement", func(b *tb) { b.claiming(); b.final("c1") }, func(b *tb) *history.ProtocolEvent {
			return b.event(ClaimIssued, Executor, "c2", claimBody(0.9, "", b.l.Claims["c1"].Evidence...))
		}, GuardFinalization, FailFinalization},
		{"challenge after the final statement", func(b *tb) { b.claiming(); b.final("c1") },
			ev(ClaimChallenged, "c1", map[string]any{"reason": "late"}), GuardFinalization, FailFinalization},
		{"second final statement", func(b *tb) { b.claiming(); b.final("c1") },
			ev(FinalStatementSigned, "", map[string]any{"summary": "s", "claim_ids": []string{"c1"}}), GuardFinalization, FailFinalization},
		{"verification before the final statement", func(b *tb) { b.claiming() }, ev(VerificationStarted, "", nil), GuardFinalization, FailFinalization},
		{"verification of another final statement", func(b *tb) { b.claiming(); b.final("c1"); b.emit(VerificationStarted, "", nil) },
			func(b *tb) *history.ProtocolEvent {
				id, _ := b.store.Put([]byte("r"))
				return b.event(VerificationCompleted, Auditor, "", map[string]any{"status": "pass", "report_artifact": id, "final_event": zeros(64)})
			}, GuardFinalization, FailFinalization},
	})
	// A challenged claim revised by a new one may be finalized.
	b := newTB(t)
	challenged(b)
	b.emit(ClaimIssued, "c2", claimBody(0.8, "c1", b.l.Claims["c1"].Evidence...))
	b.final("c2")
	if c := b.l.Claims["c1"]; c.Status != StatusSuperseded || c.SupersededBy != "c2" || !c.Challenged {
		t.Errorf("revised claim %+v", c)
	}
}

func TestActionGuard(t *testing.T) {
	t.Parallel()
	high := shellIntent("i1", "p1", "true", "high")
	med := shellIntent("i1", "p1", "true", "medium")
	runGuardCases(t, []guardCase{
		{"high risk without the Critic's approval", func(b *tb) { b.executing(); b.intent(high) },
			ev(ToolExecutionStarted, "i1", StartedBody(high)), GuardAction, FailRolePolicy},
		{"blocked intent", func(b *tb) { b.executing(); b.intent(high); b.reviewIntent("i1", StatusBlocked) },
			ev(ToolExecutionStarted, "i1", StartedBody(high)), GuardAction, FailRolePolicy},
		{"blocked low-risk intent", func(b *tb) {
			b.executing()
			b.intent(shellIntent("i1", "p1", "true", "low"))
			b.reviewIntent("i1", StatusBlocked)
		}, ev(ToolExecutionStarted, "i1", StartedBody(shellIntent("i1", "p1", "true", "low"))), GuardAction, FailRolePolicy},
		{"medium risk when the policy says so", func(b *tb) {
			b.p.ApprovalRisk = []string{"medium", "high"}
			b.executing()
			b.intent(med)
		}, ev(ToolExecutionStarted, "i1", StartedBody(med)), GuardAction, FailRolePolicy},
		{"intent for a rejected proposal", func(b *tb) {
			b.init()
			b.propose("p1")
			b.propose("p2")
			b.review("p2", StatusApproved)
			b.review("p1", StatusRejected)
		}, func(b *tb) *history.ProtocolEvent {
			return b.event(ToolIntentSigned, Executor, "i1", b.intentBody(shellIntent("i1", "p1", "true", "low")))
		}, GuardAction, FailRolePolicy},
	})
	// Approved high risk runs; low risk needs no review; with no approval
	// classes, high risk runs unreviewed.
	b := newTB(t)
	b.executing()
	b.intent(high)
	b.reviewIntent("i1", StatusApproved)
	b.run(high)
	low := shellIntent("i2", "p1", "true", "low")
	b.intent(low)
	b.run(low)
	b2 := newTB(t)
	b2.p.ApprovalRisk = []string{}
	b2.executing()
	b2.intent(high)
	b2.run(high)
	// A blocked intent is revised by a new intent, which may run.
	b3 := newTB(t)
	b3.executing()
	b3.intent(high)
	b3.reviewIntent("i1", StatusBlocked)
	safer := shellIntent("i1b", "p1", "echo safe", "low")
	b3.intent(safer)
	b3.run(safer)
}

// TestFallbackProposal: after a failed run, a fallback proposal is
// accepted only when the policy allows it; a revision of a rejected
// proposal is always accepted.
func TestFallbackProposal(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{false, true} {
		b := newTB(t)
		b.p.AllowFallback = allow
		b.p.ApprovalRisk = []string{} // Logist classifies "exit 3" high
		b.executing()
		in := shellIntent("i1", "p1", "exit 3", "high")
		b.intent(in)
		if res := b.run(in); res.OK || res.ExitCode != 3 {
			t.Fatalf("run %+v", res)
		}
		if b.l.Intents["i1"].Status != StatusFailed {
			t.Fatalf("intent %+v", b.l.Intents["i1"])
		}
		err := b.l.Check(b.event(ProposalCreated, Planner, "p2", proposalBody("")), b.p)
		if (err == nil) != allow {
			t.Errorf("allow_fallback=%v: %v", allow, err)
		}
		if allow {
			b.propose("p2")
			b.review("p2", StatusApproved)
			retry := shellIntent("i2", "p2", "true", "low")
			b.intent(retry)
			b.run(retry)
		}
	}
	b := newTB(t)
	b.init()
	b.propose("p1")
	b.propose("p2")
	b.review("p1", StatusApproved)
	b.review("p2", StatusRejected)
	b.emit(ProposalCreated, "p3", proposalBody("p2"))
	b.review("p3", StatusApproved)
}

// TestReplayMatchesLedger: replaying the records gives the ledger that
// was built event by event, inputs decoded from their artifacts.
func TestReplayMatchesLedger(t *testing.T) {
	b := completeTrace(t)
	l, err := Replay(roundTrip(t, b.recs), &b.store)
	if err != nil {
		t.Fatal(err)
	}
	if l.State != Completed || l.Head != b.l.Head || len(l.Events) != len(b.l.Events) {
		t.Fatalf("replayed %s %s %d", l.State, l.Head, len(l.Events))
	}
	in := l.Intents["i1"]
	if in.Input["command"] != "echo hello" || in.Status != StatusCompleted || in.Result == nil || in.Result.OutputArtifact == "" {
		t.Errorf("intent %+v", in)
	}
	if l.PublicKeys[Planner] != b.keys.Public()[Planner] {
		t.Error("public keys not replayed")
	}
	if err := l.ValidateLast(); err != nil {
		t.Error(err)
	}
	l.Events[len(l.Events)-1].Body["status"] = "fail"
	if err := l.ValidateLast(); err == nil {
		t.Error("damaged last event validated")
	}
	if _, err := Replay([]history.Record{{Type: history.TypeEvent, Seq: 3}}, nil); err == nil {
		t.Error("event record without event replayed")
	}
}

// The finalization guard holds a final statement to the job's required
// checks: each named as passed, its output a stored artifact recording a
// run that exited 0.
func TestFinalizationGuardRequiresTheChecks(t *testing.T) {
	t.Parallel()
	b := newTB(t)
	b.p.Checks = []Check{{Name: "suite", Argv: []string{"true"}}}
	b.claiming()
	body := func(checks ...any) map[string]any {
		return map[string]any{"summary": "s", "claim_ids": []string{"c1"}, "checks": checks}
	}
	passing, _ := CanonicalJSON(map[string]any{"name": "suite", "exit_code": 0})
	pass, _ := b.store.Put(passing)
	failing, _ := CanonicalJSON(map[string]any{"name": "suite", "exit_code": 1, "error": "exit status 1"})
	fail, _ := b.store.Put(failing)
	for name, bd := range map[string]map[string]any{
		"no checks":          {"summary": "s", "claim_ids": []string{"c1"}},
		"another check":      body(map[string]any{"name": "lint", "artifact": pass, "passed": true}),
		"not passed":         body(map[string]any{"name": "suite", "artifact": fail, "passed": false}),
		"a failing output":   body(map[string]any{"name": "suite", "artifact": fail, "passed": true}),
		"a missing artifact": body(map[string]any{"name": "suite", "artifact": "sha256:" + zeros(64), "passed": true}),
	} {
		g := b.refuse(FinalStatementSigned, Planner, "", bd)
		if g.Guard != GuardFinalization && g.Guard != GuardEvidence {
			t.Errorf("%s: refused by the %s guard: %s", name, g.Guard, g.Msg)
		}
	}
	b.emit(FinalStatementSigned, "", body(map[string]any{"name": "suite", "artifact": pass, "passed": true}))
}

// Evidence is the output of a completed run: a failed run's input or
// output, or a completed run's input, is no evidence, and verification
// fails on a claim that cites one.
func TestEvidenceIsACompletedRunsOutput(t *testing.T) {
	t.Parallel()
	for name, pick := range map[string]func(failed, ok *ToolResult) string{
		"failed run's input":     func(f, _ *ToolResult) string { return f.InputArtifact },
		"failed run's output":    func(f, _ *ToolResult) string { return f.OutputArtifact },
		"completed run's input":  func(_, o *ToolResult) string { return o.InputArtifact },
		"completed run's output": func(_, o *ToolResult) string { return o.OutputArtifact },
	} {
		b := newTB(t)
		b.p.ApprovalRisk = []string{}
		b.executing()
		bad := shellIntent("i0", "p1", "echo partial; exit 3", "high")
		b.intent(bad)
		failed := b.run(bad)
		good := shellIntent("i1", "p1", "echo hello", "low")
		b.intent(good)
		ok := b.run(good)
		if failed.OK || failed.OutputArtifact == "" || !ok.OK {
			t.Fatalf("runs %+v %+v", failed, ok)
		}
		b.claim("c1", pick(failed, ok))
		pending := len(b.l.Pending) > 0
		if want := name != "completed run's output"; pending != want {
			t.Errorf("%s: pending %v, want %v (%+v)", name, pending, want, b.l.Pending)
		}
	}
}
