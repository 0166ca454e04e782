package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/workflow"
)

// answerCheck is gitws.AnswerCheck; a test takes it away to leave an
// unsafe repository to the recovery point's commit (gitRefused).
var answerCheck = gitws.AnswerCheck

// finish runs under the job lock after a call: account its cost and time
// (unless it was cut off), judge its answer, and decide what follows
// (workflow.Decide: seed 002's escalation matrix and the workflow). The
// response is recorded exactly once, by apply, with everything the
// decision changes.
func (e *Engine) finish(ctx context.Context, tx *jobtx.Tx, c *call, out *agent.Result, callErr error, elapsed time.Duration, timedOut bool) (outcome, error) {
	m := tx.M
	cost := callCost(out, callErr)
	seen := func(result string) []callSeen { return []callSeen{{c.role, c.provider, result, elapsed, cost}} }
	// Daemon shutdown (or, in cluster mode, a lease lost) cut the call
	// off: no response is written, so the next start asks again with the
	// same request. Nothing of the call is accounted either: its cost and
	// time go into the manifest with its response record only (the one
	// the re-attempt writes), so that the job's cost is the sum of its
	// responses' (nor debited twice in a cluster's database). A call that
	// answered before it was cut off is not interrupted: its answer was
	// paid for, so it is recorded like any other (under the job's fence in
	// a cluster), never thrown away and asked again.
	if m.Status.Active() && m.Phase() == c.phase && ctx.Err() != nil && (callErr != nil || out == nil) {
		return outcome{calls: seen("interrupted"), logs: []logEntry{{code: codes.AgentInterrupted, actor: c.role, attempt: c.attempt, record: true,
			msg: "agent call interrupted by shutdown; it will be re-attempted with the same request"}}}, nil
	}
	account(m, cost, elapsed)
	resp := &history.Response{EvidenceFiles: []string{}, ExecutionTimeSeconds: round3(elapsed.Seconds()), CostUSD: cost}
	if out != nil {
		resp.RawResponse = string(out.Raw)
		resp.SessionID, resp.Tokens, resp.Stderr = out.SessionID, out.Tokens, truncate(out.Stderr, 4096)
		resp.Stdout = truncate(string(out.Stdout), 4096)
	}
	recordMetered(resp, out, callErr)
	ch, compared := callChanges(tx, c)
	recordChanges(resp, ch)

	// Cancelled by a steward: the job changed under us; record what the
	// call produced and leave the status as the steward set it.
	if !m.Status.Active() || m.Phase() != c.phase {
		resp.Status, resp.ErrorCode, resp.Error = history.StatusError, codes.AgentCanceled, fmt.Sprintf("job became %s during the call", m.Status)
		return outcome{calls: seen("canceled"), responses: []*history.Record{c.response(resp)}, parked: true}, nil
	}
	if ae, ok := agent.AsError(callErr); ok && ae.Code == codes.AwaitingReply && !timedOut {
		// A role played by a human: the intent stays open until logist
		// reply files the answer; the job waits where everyone sees it.
		reason := fmt.Sprintf("%s (the %s's answer, validated like an agent's)", ae.Msg, c.role)
		return outcome{code: codes.AwaitingReply, transition: &transition{lifecycle.EvAwait, lifecycle.InterventionRequired, "", "SYSTEM", reason}}, nil
	}
	wf, err := m.ResolveWorkflow()
	if err != nil {
		return outcome{}, err
	}
	k := workflow.Case{Phase: c.phase, Role: c.role, Retries: m.Run.PhaseRetries, MaxRetries: m.MaxRetries(),
		APIFailures: m.Run.APIFailures, MaxAPIRetries: m.MaxAPIRetries()}
	switch {
	case timedOut:
		resp.Status, resp.ErrorCode = history.StatusTimeout, codes.AgentTimeout
		k.Fault, k.Code = workflow.FaultTimeout, codes.AgentTimeout
		if c.budgetBound {
			resp.Error = fmt.Sprintf("time budget ran out after %.1fs; agent killed", elapsed.Seconds())
			k.Fault = workflow.FaultTimeBudget
			k.Detail = fmt.Sprintf("time budget of %s ran out during the %s call; raise it with logist resume %s --time-threshold-minutes M", timeLimit(m, e.defaults(m)), c.role, tx.ID)
		} else {
			resp.Error = fmt.Sprintf("call exceeded its timeout of %s; agent killed", c.deadline)
			k.Detail = resp.Error
		}
		return e.failed(m, c, resp, wf, k, outcome{calls: seen("timeout")}, nil)
	case callErr != nil:
		ae, ok := agent.AsError(callErr)
		if !ok {
			ae = &agent.Error{Code: codes.APIError, Transient: true, Msg: callErr.Error()}
		}
		resp.Status, resp.ErrorCode, resp.Error = history.StatusError, ae.Code, ae.Msg
		resp.RawResponse, resp.Stderr = truncate(string(ae.Partial), 64<<10), truncate(ae.Stderr, 4096)
		if ae.Retake {
			resp.RawResponse = "" // partial generation is never recorded
		}
		if ae.Code == codes.BudgetSpent {
			// The metering proxy cut the call (or refused it) because the
			// job's cost budget is spent: the job halts, whatever the
			// agent made of the cut.
			o := e.costHalted(tx)
			o.calls, o.responses = seen("error"), []*history.Record{c.response(resp)}
			o.logs = append([]logEntry{{code: ae.Code, actor: c.role, attempt: c.attempt, msg: ae.Msg}}, o.logs...)
			return o, nil
		}
		k.Fault, k.Code, k.Detail = workflow.FaultAgent, ae.Code, ae.Msg
		if ae.Transient {
			k.Fault = workflow.FaultTransient
		}
		return e.failed(m, c, resp, wf, k, outcome{calls: seen("error")}, ae)
	}

	ph := wf.Phases[c.phase]
	v := response.Judge(out.Raw, response.Contract{Schema: ph.Schema, Workspace: response.In(tx.Store().Workspace(tx.ID), answerCheck(m.IsGit(), tx.ID))})
	if v.Err != nil {
		resp.Status, resp.ErrorCode, resp.Error = history.StatusError, v.Err.Code, v.Err.Reason
		if v.Err.Code == codes.AgentEmpty && out.NoAnswer != "" {
			// An agent that answers in a file and wrote none: why.
			v.Err.Reason += ": " + out.NoAnswer
			resp.Error = v.Err.Reason
		}
		resp.Violations = v.Record()
		o := outcome{calls: seen("invalid"), violations: []string{v.Err.Code}}
		for _, x := range v.Violations {
			if x != v.Err {
				// Every violation is audited, not only the one the answer
				// is refused for.
				o.logs = append(o.logs, logEntry{code: x.Code, actor: c.role, attempt: c.attempt, msg: "invalid agent answer (also): " + x.Explain()})
			}
		}
		k.Fault, k.Code, k.Detail = workflow.FaultInvalid, v.Err.Code, v.Err.Explain()
		return e.failed(m, c, resp, wf, k, o, nil)
	}
	ans := v.Answer
	resp.Status, resp.Action, resp.EvidenceFiles, resp.Summary = history.StatusSuccess, ans.Action, ans.EvidenceFiles, ans.Summary
	o := outcome{calls: seen("ok")}
	if l, ok := costDisagreement(resp, out, c.role, c.attempt); ok {
		o.logs = append(o.logs, l)
	}
	for _, w := range v.Warnings {
		resp.Warnings = append(resp.Warnings, w.Detail)
		o.logs = append(o.logs, logEntry{code: w.Code, actor: c.role, attempt: c.attempt, msg: w.Detail})
	}
	if w := undeclared(ch, ans.EvidenceFiles); compared && w != "" {
		// Accepted all the same (seed 002: evidence problems are warnings).
		resp.Warnings = append(resp.Warnings, w)
		o.logs = append(o.logs, logEntry{code: codes.UndeclaredChanges, actor: c.role, attempt: c.attempt, msg: w})
	}
	oc := &workflow.Outcome{Name: ans.Action}
	if eff, err := e.effectFor(ph); err != nil {
		return outcome{}, err
	} else if eff != nil {
		if oc, err = eff.Finish(tx, c.phase, ans, v.Object); err != nil {
			return outcome{}, err
		}
	}
	o.records, o.state = oc.Records, oc.State
	if oc.Fail != nil {
		resp.NewStatus = string(lifecycle.InterventionRequired)
		resp.Outcome = workflow.OutcomeFailed
		o.responses = []*history.Record{c.response(resp)}
		return o.then(workflowFailed(c.role, oc.Fail)), nil
	}

	k.Action, k.Summary, k.Feedback, k.SentBack = ans.Action, ans.Summary, oc.Feedback, oc.Retry
	if oc.Name != ans.Action {
		k.Outcome = oc.Name
		resp.Outcome, resp.SentBack = oc.Name, oc.Retry
	}
	d, err := workflow.Decide(wf, k)
	if err != nil {
		return outcome{}, err
	}
	resp.NewStatus = string(d.To)
	o.responses = []*history.Record{c.response(resp)}
	o.code, o.counters = d.Code, &counters{d.Retries, d.APIFailures}
	o.audit = &auditLine{c.role, ans.Action, truncate(ans.Summary, 300), ans.EvidenceFiles}
	o.handoff = handoffFor(ans, oc, d)
	if d.Checkpoint {
		// A phase boundary is a safe place to resume from.
		o.point = phasePoint(c, ans, d.Phase)
	}
	if d.Event == lifecycle.EvRetry {
		o.retry = "agent_retry"
	}
	o.transition = &transition{d.Event, d.To, d.Phase, c.role, d.Reason}
	o.more = d.To.Active()
	return o, nil
}

// failed is the outcome of a call without a valid answer (o holds what the
// observers hear of it): the failure rows of the escalation matrix. ae is
// the agent's error, if it failed.
func (e *Engine) failed(m *manifest.Manifest, c *call, resp *history.Response, wf *workflow.Workflow, k workflow.Case, o outcome, ae *agent.Error) (outcome, error) {
	d, err := workflow.Decide(wf, k)
	if err != nil {
		return outcome{}, err
	}
	o.counters = &counters{d.Retries, d.APIFailures}
	if d.Backoff {
		o.retry = "api_error"
		// A server that said when to come back (HTTP Retry-After) is not
		// asked sooner. The wait is said: a Retry-After holds the job,
		// RUNNING, up to five minutes with nothing else to show for it.
		o.more, o.backoff = true, max(e.backoff(m.BackoffInitial(), d.APIFailures), min(ae.RetryAfter, 5*time.Minute))
		wait := "; asked again in " + o.backoff.Round(time.Millisecond).String()
		if ae.RetryAfter > 0 && ae.RetryAfter >= o.backoff {
			wait += " (the server's Retry-After, waited up to 5m0s)"
		}
		if ae.Retake {
			// A cut stream: no partial text is written as a response; the
			// intent stays open, so the next step asks the same turn again
			// with the same stored request.
			o.logs = append(o.logs, logEntry{code: codes.AgentStreamFail, actor: c.role, attempt: c.attempt, msg: ae.Code + ": " + ae.Msg + wait, record: true})
		} else {
			o.responses = []*history.Record{c.response(resp)}
			o.logs = append(o.logs, logEntry{code: ae.Code, actor: c.role, attempt: c.attempt, msg: ae.Msg + wait})
		}
		return o, nil
	}
	o.responses = []*history.Record{c.response(resp)}
	o.code = d.Code
	actor := c.role
	if d.BySystem {
		// The job's time budget, not the call, stopped it.
		actor = "SYSTEM"
		o.logs = append(o.logs, logEntry{code: k.Code, actor: c.role, attempt: c.attempt, msg: resp.Error})
	} else {
		resp.NewStatus = string(d.To)
		o.logs = append(o.logs, logEntry{code: d.Code, actor: c.role, attempt: c.attempt, msg: d.Reason})
		o.audit = &auditLine{c.role, "STUCK", d.Code + ": " + truncate(d.Reason, 300), nil}
	}
	o.transition = &transition{d.Event, d.To, d.Phase, actor, d.Reason}
	o.more = d.To.Active()
	return o, nil
}

// handoffFor is what answer ans (and the phase's effect's outcome oc of
// it) leaves whoever plays next, given decision d.
func handoffFor(ans *response.Answer, oc *workflow.Outcome, d workflow.Decision) *handoff {
	h := &handoff{last: ans.Summary, delivered: d.To.Active() || d.To == lifecycle.Success}
	switch {
	case oc.Retry:
		fb := oc.Feedback
		if fb == "" {
			fb = ans.Summary
		}
		h.feedback = &fb
	case d.Checkpoint:
		// PhaseRetries is not reset here: a supervisor RETRY sends the work
		// back after the worker's COMPLETED, and resetting on COMPLETED
		// would let that loop run forever. Only a steward's command resets it
		// (workflow.ResetsRetries).
		h.previous, h.feedback = &ans.Summary, &oc.Feedback
		h.evidence = ans.EvidenceFiles
	case ans.Action == workflow.ActionRetry:
		h.feedback = &ans.Summary
		if len(ans.EvidenceFiles) > 0 {
			h.evidence = ans.EvidenceFiles
		}
	}
	return h
}

// response is c's response record.
func (c *call) response(resp *history.Response) *history.Record {
	n := c.interaction
	return &history.Record{Type: history.TypeResponse, Interaction: &n, Phase: c.phase, Role: c.role,
		Attempt: c.attempt, StateBefore: string(c.stateBefore), Response: resp}
}
