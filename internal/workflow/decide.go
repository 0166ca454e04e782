package workflow

import (
	"fmt"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
)

// The escalation decision: seed 002's escalation matrix and the workflow's
// answer table, in one pure function. The engine applies what it decides
// (internal/runner) and logist verify replays it (internal/verify), so the
// two cannot drift apart.

// Fault is how a call failed to give a valid answer: the failure rows of
// seed 002's escalation matrix.
type Fault string

const (
	// FaultNone: a valid answer; the workflow says where it leads.
	FaultNone Fault = ""
	// FaultInvalid: the answer broke its contract (schema invalid, action
	// malformed, summary missing, evidence out of the workspace): STUCK.
	FaultInvalid Fault = "invalid"
	// FaultTimeout: the call outlived its own timeout and was killed:
	// STUCK, a steward assesses whether the job should go on.
	FaultTimeout Fault = "timeout"
	// FaultAgent: the agent failed in a way a retry will not fix: STUCK.
	FaultAgent Fault = "agent"
	// FaultTransient: an API error worth retrying (rate limit, overload,
	// connection): the same call again after a backoff, up to the job's
	// limit, then STUCK.
	FaultTransient Fault = "transient"
	// FaultTimeBudget: the job's time budget ran out during the call: the
	// job halts (HALTED_TIME) until a steward gives it more time.
	FaultTimeBudget Fault = "time_budget"
)

// Case is what happened in a phase, as the decision needs it.
type Case struct {
	Phase string
	// Role played the phase (reasons name it).
	Role string

	// A valid answer (Fault is FaultNone):
	// Action is the answer's action.
	Action string
	// Outcome is what the phase's effect made of the answer, when that is
	// not Action (a workflow outcome such as REJECTED); "" = Action.
	Outcome string
	// SentBack marks an effect's outcome that sends work back, like RETRY.
	SentBack bool
	// Summary and Feedback (the effect's) go into reasons.
	Summary, Feedback string

	// A call that failed:
	Fault Fault
	// Code is the failure's code (a validation code, an agent error code).
	Code string
	// Detail says what went wrong, for the steward.
	Detail string

	// Retries counts RETRY answers and sent-back outcomes since the start
	// or the last steward command that reset it (ResetsRetries);
	// MaxRetries is the job's limit (limits.max_retries).
	Retries, MaxRetries int
	// APIFailures counts transient failures in a row before this call;
	// MaxAPIRetries is the job's limit (limits.max_api_retries).
	APIFailures, MaxAPIRetries int
}

// Decision is what follows.
type Decision struct {
	// Event, To and Phase are the transition: the lifecycle event, the
	// status and the phase the job moves to ("" = it stays in its phase).
	// No Event: no transition (Backoff).
	Event lifecycle.Event
	To    lifecycle.Status
	Phase string
	// Code is the error code the job stops with ("" = none).
	Code string
	// Reason is what the steward is told: why the job stops, or why an
	// effect's outcome sent the work back ("" when the job goes on
	// otherwise).
	Reason string
	// Retries and APIFailures are the counters after this call: Retries
	// grows by one when the answer sends the work back.
	Retries, APIFailures int
	// Backoff: ask the same call again after a backoff, no transition.
	Backoff bool
	// Checkpoint: the answer completed its phase (a move forward, or the
	// end of the workflow), a safe place to resume from: a recovery point
	// is due.
	Checkpoint bool
	// BySystem: the job's budget decided, not the role's call: the
	// transition's actor is SYSTEM, and neither the response nor the audit
	// trail is the role's.
	BySystem bool
}

// Decide is the escalation decision for one call of phase c.Phase of w:
// a valid answer goes where the workflow's On map says (with the RETRY
// limit), a failed call goes by seed 002's escalation matrix. It fails
// only when the workflow has no target for the answer.
func Decide(w *Workflow, c Case) (Decision, error) {
	if c.Fault != FaultNone {
		return decideFault(c)
	}
	name := c.Outcome
	if name == "" {
		name = c.Action
	}
	target, err := w.Next(c.Phase, name)
	if err != nil {
		return Decision{}, err
	}
	retry := c.Action == ActionRetry || c.SentBack
	d := Decision{Retries: c.Retries}
	switch {
	case target == TargetIntervention:
		d.Event, d.To = lifecycle.EvStuck, lifecycle.InterventionRequired
		d.Code, d.Reason = codes.AgentStuck, fmt.Sprintf("%s answered %s: %s", c.Role, c.Action, c.Summary)
		if name != c.Action {
			d.Code, d.Reason = name, fmt.Sprintf("%s: %s", name, c.Feedback)
		}
	case target == TargetSuccess:
		d.Event, d.To = lifecycle.EvSucceed, lifecycle.Success
	case retry:
		d.Retries++
		// An effect's outcome that sent the work back (a guard that refused
		// what the agent said, a rejection) says why in its feedback: the
		// transition carries it, so that a steward reading the log sees
		// why the phase was asked again, and so does the RETRY limit's
		// reason when it was the last straw.
		why := ""
		if c.SentBack && c.Feedback != "" {
			why = fmt.Sprintf("%s: %s", name, c.Feedback)
		}
		if d.Retries > c.MaxRetries {
			d.Event, d.To = lifecycle.EvRetryLimit, lifecycle.InterventionRequired
			d.Code = codes.RetryLimit
			d.Reason = fmt.Sprintf("RETRY limit of %d reached in phase %s; last summary: %s", c.MaxRetries, c.Phase, c.Summary)
			if why != "" {
				d.Reason = fmt.Sprintf("RETRY limit of %d reached in phase %s; last sent back with %s; last summary: %s", c.MaxRetries, c.Phase, why, c.Summary)
			}
		} else {
			d.Event, d.To, d.Phase, d.Reason = lifecycle.EvRetry, w.Phases[target].Status, target, why
		}
	default:
		d.Event, d.To, d.Phase = lifecycle.EvAdvance, w.Phases[target].Status, target
	}
	d.Checkpoint = !retry && name != ActionStuck && target != TargetIntervention
	return d, nil
}

// decideFault is the escalation matrix's failure rows.
func decideFault(c Case) (Decision, error) {
	stuck := Decision{To: lifecycle.InterventionRequired, Code: c.Code, Reason: c.Detail, Retries: c.Retries}
	switch c.Fault {
	case FaultInvalid:
		stuck.Event, stuck.Reason = lifecycle.EvInvalid, "invalid agent answer: "+c.Detail
	case FaultTimeout, FaultAgent:
		stuck.Event = lifecycle.EvAgentFailed
	case FaultTransient:
		if c.APIFailures+1 <= c.MaxAPIRetries {
			return Decision{Backoff: true, Retries: c.Retries, APIFailures: c.APIFailures + 1}, nil
		}
		stuck.Event = lifecycle.EvAgentFailed
		stuck.Reason = fmt.Sprintf("%s after %d automatic retries: %s", c.Code, c.MaxAPIRetries, c.Detail)
	case FaultTimeBudget:
		return Decision{Event: lifecycle.EvTimeExceeded, To: lifecycle.HaltedTime, Code: codes.TimeBudget, Reason: c.Detail,
			Retries: c.Retries, APIFailures: c.APIFailures, BySystem: true}, nil
	default:
		return Decision{}, fmt.Errorf("unknown fault %q", c.Fault)
	}
	return stuck, nil
}

// ResetsRetries says whether a steward command (as its history record
// names it, history.Cmd*) gives the job a fresh allowance: the RETRY count
// (Case.Retries) and the transient failures in a row (Case.APIFailures)
// start again from 0. A steward who resumes a job, rolls it back, answers
// for a role or decides for a deliberation has looked at it and let it go
// on; a halt ends it and an activation starts it. The steward applies this
// rule and logist verify's replay follows it: one list for both.
func ResetsRetries(command string) bool {
	switch command {
	case history.CommandResume, history.CommandRollback, history.CommandReply, history.CommandDecide:
		return true
	}
	return false
}
