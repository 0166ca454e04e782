// Package phases plays the protocol workflow (seed 003) on Logist's
// engine: for each phase of workflow "protocol" it turns the role's answer
// into signed, guarded events (internal/protocol), runs the tools the
// Executor asked for, and verifies the trace. The engine calls Prepare
// before a phase is played and Finish on its valid answer; the protocol's
// state is always replayed from the job's history, the source of truth, so
// a restart resumes at the next valid transition only.
package phases

import (
	"errors"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/protocol"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/workflow"
)

// Outcomes the protocol phases report beyond the three actions (the
// workflow's "on" maps say where each leads).
const (
	OutViolation  = "VIOLATION"  // a guard refused what the agent said: the same phase again, with the reason
	OutRejected   = "REJECTED"   // the Critic rejected every proposal: back to the Planner
	OutReview     = "REVIEW"     // some intents need the Critic's approval
	OutRun        = "RUN"        // the intents may run
	OutClaim      = "CLAIM"      // no more tools: claims are due
	OutBlocked    = "BLOCKED"    // the Critic blocked the intents / finalization is blocked: revise
	OutFallback   = "FALLBACK"   // a tool failed and the policy lets the Planner propose a fallback
	OutChallenged = "CHALLENGED" // the Critic challenged claims: the Executor revises
)

// Effect names, as the workflow data gives them.
const (
	EffPlan           = "protocol.plan"
	EffReviewProposal = "protocol.review_proposals"
	EffIntend         = "protocol.intend"
	EffReviewIntents  = "protocol.review_intents"
	EffRunTools       = "protocol.run_tools"
	EffClaim          = "protocol.claim"
	EffChallenge      = "protocol.challenge"
	EffFinalize       = "protocol.finalize"
	EffVerify         = "protocol.verify"
	EffAudit          = "protocol.audit"
)

// Phase is one protocol effect; it has the engine's Effect methods and
// the steward's halt hook (effect.Halter).
type Phase struct {
	name    string
	prepare func(s *session) (*workflow.Prep, error)
	finish  func(s *session, ans *response.Answer, obj map[string]any) (*workflow.Outcome, error)
}

// Effects are the protocol's phase effects by name.
func Effects() map[string]*Phase {
	ps := []*Phase{
		{EffPlan, preparePlan, finishPlan},
		{EffReviewProposal, prepareReviewProposals, finishReviewProposals},
		{EffIntend, prepareIntend, finishIntend},
		{EffReviewIntents, prepareReviewIntents, finishReviewIntents},
		{EffRunTools, prepareRunTools, finishRunTools},
		{EffClaim, prepareClaim, finishClaim},
		{EffChallenge, prepareChallenge, finishChallenge},
		{EffFinalize, prepareFinalize, finishFinalize},
		{EffVerify, prepareVerify, finishVerify},
		{EffAudit, prepareAudit, finishAudit},
	}
	out := map[string]*Phase{}
	for _, p := range ps {
		out[p.name] = p
	}
	return out
}

// Prepare opens the session (creating it on the first phase), stops a
// session whose trace fails its integrity check, and prepares the phase.
func (p *Phase) Prepare(tx *jobtx.Tx, phase string) (*workflow.Prep, error) {
	s, fail, err := open(tx, phase)
	if err != nil {
		return nil, err
	}
	if fail != nil {
		return &workflow.Prep{Fail: fail, Records: s.out, State: string(s.led.State)}, nil
	}
	prep := &workflow.Prep{}
	if p.prepare != nil {
		if prep, err = p.prepare(s); err != nil {
			return nil, err
		}
	}
	prep.Records = append(s.out, prep.Records...)
	prep.State = string(s.led.State)
	return prep, nil
}

// Finish turns a valid answer into events, all or none: if a guard refuses
// one, none is recorded and the phase is asked again with the reason.
func (p *Phase) Finish(tx *jobtx.Tx, phase string, ans *response.Answer, obj map[string]any) (*workflow.Outcome, error) {
	s, fail, err := open(tx, phase)
	if err != nil {
		return nil, err
	}
	if fail != nil {
		return &workflow.Outcome{Fail: fail, Records: s.out, State: string(s.led.State)}, nil
	}
	if ans.Action != workflow.ActionCompleted {
		// RETRY and STUCK say nothing the protocol records.
		return &workflow.Outcome{Name: ans.Action}, nil
	}
	oc, err := p.finish(s, ans, obj)
	if err != nil {
		var ge *protocol.GuardError
		if errors.As(err, &ge) && integrity(ge.Class) {
			// A signature that is not the role's (or a broken chain) is an
			// integrity violation: the session fails and stops (seed 003).
			s, _, oerr := open(tx, phase)
			if oerr != nil {
				return nil, oerr
			}
			reason := "integrity violation: " + ge.Error()
			if r, err := s.event(protocol.SessionFailed, protocol.System, "", map[string]any{"reason": reason, "class": ge.Class}); err == nil {
				s.out = append(s.out, r)
			}
			return &workflow.Outcome{Records: s.out, State: string(s.led.State), Fail: &workflow.Failure{Code: codes.ProtocolFailed, Reason: reason}}, nil
		}
		if errors.As(err, &ge) {
			return &workflow.Outcome{Name: OutViolation, Retry: true, Feedback: "Nothing you answered was recorded: " + ge.Error(), State: string(s.initial)}, nil
		}
		return nil, err
	}
	oc.Records = append(s.out, oc.Records...)
	if oc.State == "" {
		oc.State = string(s.led.State)
	}
	return oc, nil
}

// integrity says whether a guard's failure class means the trace itself
// cannot be trusted (rather than an agent saying something out of order).
func integrity(class string) bool {
	return class == protocol.FailSignatureInvalid || class == protocol.FailChainBreak || class == protocol.FailHashMismatch
}

// Halt records the operator's abort when a steward halts a job in a
// protocol phase (effect.Halter): the session's SESSION_ABORTED event, and
// the session's state after it.
func (p *Phase) Halt(tx *jobtx.Tx, by, reason string) ([]*history.Record, string, error) {
	recs, err := abort(tx, by, reason)
	if err != nil || len(recs) == 0 {
		return nil, "", err
	}
	return recs, string(protocol.Aborted), nil
}

// abort records the operator's abort of a protocol session (logist halt).
// It returns nil records for a job that is not a protocol session or whose
// session already ended.
func abort(tx *jobtx.Tx, by, reason string) ([]*history.Record, error) {
	recs, err := history.ReadAll(tx.Dir)
	if err != nil {
		return nil, err
	}
	hasEvents := false
	for i := range recs {
		if recs[i].Type == history.TypeEvent {
			hasEvents = true
			break
		}
	}
	if !hasEvents {
		return nil, nil
	}
	s, fail, err := open(tx, tx.M.Phase())
	if err != nil {
		return nil, err
	}
	if fail != nil || s.led.State == protocol.Completed {
		return nil, nil
	}
	var out []*history.Record
	if err := s.emit(&out, protocol.SessionAborted, protocol.System, "", map[string]any{"reason": reason, "by": by}); err != nil {
		return nil, err
	}
	return out, nil
}
