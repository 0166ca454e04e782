package workflow

import (
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/lifecycle"
)

// TestDecideEscalationMatrix covers seed 002's escalation matrix row by row
// (plus the rows Logist adds: summary missing, protocol violation, the time
// budget, exhausted API retries), and the workflow's answers with the
// RETRY limit, through the one function the engine and logist verify use.
func TestDecideEscalationMatrix(t *testing.T) {
	sup, err := Builtin("supervised")
	if err != nil {
		t.Fatal(err)
	}
	// A workflow with an effect's outcomes and unusual targets.
	custom := &Workflow{Name: "custom", Start: "a", Phases: map[string]Phase{
		"a": {Role: "r", Status: lifecycle.Running, On: map[string]string{
			ActionCompleted: "b", ActionRetry: "a", ActionStuck: "b",
			"REJECTED": "a", "VETOED": TargetIntervention, "APPROVED": "b"}},
		"b": {Role: "s", Status: lifecycle.Reviewing, On: map[string]string{
			ActionCompleted: TargetSuccess, ActionRetry: "a", ActionStuck: TargetIntervention}},
	}}
	if err := custom.Check(); err != nil {
		t.Fatal(err)
	}
	limits := func(c Case) Case {
		c.Role, c.MaxRetries, c.MaxAPIRetries = "worker", 3, 3
		if c.Phase == "" {
			c.Phase = "work"
		}
		return c
	}
	IR := lifecycle.InterventionRequired
	cases := []struct {
		name string
		w    *Workflow
		in   Case
		want Decision
		// reason, if set, must be in the decision's reason.
		reason string
	}{
		// Seed 002's matrix.
		{"schema invalid: STUCK, human required", sup, Case{Fault: FaultInvalid, Code: "SCHEMA_INVALID", Detail: "SCHEMA_INVALID: /evidence_files: expected array", Retries: 1, APIFailures: 2},
			Decision{Event: lifecycle.EvInvalid, To: IR, Code: "SCHEMA_INVALID", Retries: 1}, "invalid agent answer: SCHEMA_INVALID: /evidence_files"},
		{"files missing: warning, the answer is accepted and goes on", sup, Case{Action: ActionCompleted, Summary: "done"},
			Decision{Event: lifecycle.EvAdvance, To: lifecycle.Reviewing, Phase: "review", Checkpoint: true}, ""},
		{"action malformed: STUCK", sup, Case{Fault: FaultInvalid, Code: "ACTION_INVALID", Detail: `ACTION_INVALID: action "DONE"`},
			Decision{Event: lifecycle.EvInvalid, To: IR, Code: "ACTION_INVALID"}, `action "DONE"`},
		{"timeout exceeded: STUCK", sup, Case{Fault: FaultTimeout, Code: "AGENT_TIMEOUT", Detail: "call exceeded its timeout of 1s; agent killed", APIFailures: 1},
			Decision{Event: lifecycle.EvAgentFailed, To: IR, Code: "AGENT_TIMEOUT"}, "call exceeded its timeout"},
		{"API error, first: retry with backoff", sup, Case{Fault: FaultTransient, Code: "AGENT_API_ERROR", APIFailures: 0, Retries: 2},
			Decision{Backoff: true, APIFailures: 1, Retries: 2}, ""},
		{"API error, third: retry with backoff", sup, Case{Fault: FaultTransient, Code: "AGENT_API_ERROR", APIFailures: 2},
			Decision{Backoff: true, APIFailures: 3}, ""},
		{"API error after 3 retries: STUCK", sup, Case{Fault: FaultTransient, Code: "AGENT_API_ERROR", Detail: "HTTP 503", APIFailures: 3},
			Decision{Event: lifecycle.EvAgentFailed, To: IR, Code: "AGENT_API_ERROR"}, "AGENT_API_ERROR after 3 automatic retries: HTTP 503"},
		// Logist's further rows.
		{"summary missing: STUCK", sup, Case{Fault: FaultInvalid, Code: "SUMMARY_MISSING", Detail: "SUMMARY_MISSING: summary_for_supervisor is missing"},
			Decision{Event: lifecycle.EvInvalid, To: IR, Code: "SUMMARY_MISSING"}, "summary_for_supervisor"},
		{"evidence out of the workspace: STUCK", sup, Case{Fault: FaultInvalid, Code: "PROTOCOL_VIOLATION", Detail: "PROTOCOL_VIOLATION: evidence_files: ..."},
			Decision{Event: lifecycle.EvInvalid, To: IR, Code: "PROTOCOL_VIOLATION"}, ""},
		{"agent failure that a retry will not fix: STUCK", sup, Case{Fault: FaultAgent, Code: "AGENT_EXIT", Detail: "exit status 2", APIFailures: 1},
			Decision{Event: lifecycle.EvAgentFailed, To: IR, Code: "AGENT_EXIT"}, "exit status 2"},
		{"time budget ran out in the call: HALTED_TIME", sup, Case{Fault: FaultTimeBudget, Code: "AGENT_TIMEOUT", Detail: "time budget of 1.0 minutes ran out", APIFailures: 1, Retries: 1},
			Decision{Event: lifecycle.EvTimeExceeded, To: lifecycle.HaltedTime, Code: codes.TimeBudget, APIFailures: 1, Retries: 1, BySystem: true}, "time budget"},

		// The workflow's answers.
		{"COMPLETED of the last phase: SUCCESS", sup, Case{Phase: "review", Action: ActionCompleted, Retries: 2, APIFailures: 2},
			Decision{Event: lifecycle.EvSucceed, To: lifecycle.Success, Retries: 2, Checkpoint: true}, ""},
		{"STUCK: waits for a steward", sup, Case{Action: ActionStuck, Summary: "need a human"},
			Decision{Event: lifecycle.EvStuck, To: IR, Code: codes.AgentStuck}, "worker answered STUCK: need a human"},
		{"RETRY: the phase again, counted", sup, Case{Action: ActionRetry, Retries: 2},
			Decision{Event: lifecycle.EvRetry, To: lifecycle.Running, Phase: "work", Retries: 3}, ""},
		{"RETRY over the limit", sup, Case{Action: ActionRetry, Retries: 3, Summary: "again"},
			Decision{Event: lifecycle.EvRetryLimit, To: IR, Code: codes.RetryLimit, Retries: 4}, "RETRY limit of 3 reached in phase work; last summary: again"},
		{"a supervisor's RETRY sends the work back", sup, Case{Phase: "review", Action: ActionRetry},
			Decision{Event: lifecycle.EvRetry, To: lifecycle.Running, Phase: "work", Retries: 1}, ""},
		{"an effect's outcome that moves on", custom, Case{Phase: "a", Action: ActionCompleted, Outcome: "APPROVED"},
			Decision{Event: lifecycle.EvAdvance, To: lifecycle.Reviewing, Phase: "b", Checkpoint: true}, ""},
		{"an effect's outcome that sends work back counts like RETRY, saying why", custom, Case{Phase: "a", Action: ActionCompleted, Outcome: "REJECTED", SentBack: true, Retries: 1,
			Feedback: `ordering guard: unknown proposal "p9"`},
			Decision{Event: lifecycle.EvRetry, To: lifecycle.Running, Phase: "a", Retries: 2}, `REJECTED: ordering guard: unknown proposal "p9"`},
		{"a sent-back outcome over the limit names its feedback", custom, Case{Phase: "a", Action: ActionCompleted, Outcome: "REJECTED", SentBack: true, Retries: 3,
			Summary: "p1 is low risk", Feedback: `ordering guard: unknown proposal "p9"`},
			Decision{Event: lifecycle.EvRetryLimit, To: IR, Code: codes.RetryLimit, Retries: 4},
			`RETRY limit of 3 reached in phase a; last sent back with REJECTED: ordering guard: unknown proposal "p9"; last summary: p1 is low risk`},
		{"an effect's outcome that needs a steward names itself", custom, Case{Phase: "a", Action: ActionCompleted, Outcome: "VETOED", Feedback: "no"},
			Decision{Event: lifecycle.EvStuck, To: IR, Code: "VETOED"}, "VETOED: no"},
		{"STUCK leading to a phase moves on, no recovery point", custom, Case{Phase: "a", Action: ActionStuck},
			Decision{Event: lifecycle.EvAdvance, To: lifecycle.Reviewing, Phase: "b"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decide(c.w, limits(c.in))
			if err != nil {
				t.Fatal(err)
			}
			reason := got.Reason
			got.Reason = ""
			if got != c.want {
				t.Errorf("Decide = %+v\n           want %+v", got, c.want)
			}
			if c.reason != "" && !strings.Contains(reason, c.reason) {
				t.Errorf("reason %q, want it to contain %q", reason, c.reason)
			}
			if got.Event != "" {
				from := lifecycle.Running
				if c.in.Phase == "review" || c.in.Phase == "b" {
					from = lifecycle.Reviewing
				}
				if err := lifecycle.Check(from, got.Event, got.To); err != nil {
					t.Errorf("not in the lifecycle table: %v", err)
				}
			}
		})
	}
}

func TestDecideRefusesWhatTheWorkflowDoesNotKnow(t *testing.T) {
	sup, _ := Builtin("supervised")
	if _, err := Decide(sup, Case{Phase: "work", Action: ActionCompleted, Outcome: "NOPE"}); err == nil {
		t.Error("an outcome the phase has no target for was decided")
	}
	if _, err := Decide(sup, Case{Phase: "nope", Action: ActionCompleted}); err == nil {
		t.Error("an unknown phase was decided")
	}
	if _, err := Decide(sup, Case{Phase: "work", Fault: "odd"}); err == nil {
		t.Error("an unknown fault was decided")
	}
}
