package runner

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/effect"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/workflow"
)

// turnCall is one turn of a call (the step's intent for it).
type turnCall struct {
	turn        workflow.Turn
	interaction int
	req         *agent.Request
	provider    string
	prov        agent.Provider
	perr        error
	// fault: the turn's call panicked (guardedTurn); the run ends on it.
	fault *runPanic
	// outcome of the call
	out     *agent.Result
	err     error
	elapsed time.Duration
	// failed are the attempts that failed and were retried (the last
	// attempt's outcome is out/err); attempts is how many were made.
	failed   []failedAttempt
	attempts int
	// late: a background turn cut because the step's other turns ended.
	late bool
	// refused is what the egress proxy refused the turn's attempts (nil:
	// the job has no allowlist).
	refused *agent.EgressLog
}

// failedAttempt is an attempt of a turn that failed and was retried: it is
// logged (seed 004 §7.2) and recorded as an error event.
type failedAttempt struct {
	attempt   int
	code, msg string
}

// prepareTurns records an intent per turn (after abandoning cut-off ones)
// and returns the call that plays them. The turns' request files are
// written first (writeRequest): one the job's storage refuses ends the
// step before any intent is recorded or agent started, stalled as a plain
// call's is, and the run after makes the same turns again. Recorded,
// the intents would be abandoned and made anew at every stalled run.
func (e *Engine) prepareTurns(tx *jobtx.Tx, c *call, prep *workflow.Prep) error {
	m := tx.M
	for _, n := range prep.Abandon {
		k := n
		if err := tx.Append(&history.Record{Type: history.TypeResponse, Interaction: &k, Phase: c.phase, Role: c.role,
			Response: &history.Response{Status: history.StatusError, EvidenceFiles: []string{}, ErrorCode: codes.AgentInterrupted,
				Error: "the call was cut off (the daemon stopped); the turn is asked again"}}); err != nil {
			return err
		}
	}
	if err := tx.Store().EnsureWorkspace(tx.ID); err != nil {
		return err
	}
	next := tx.State().NextInteraction
	intents := make([]*history.Record, 0, len(prep.Turns))
	waits := make([]func() error, 0, len(prep.Turns))
	for i, t := range prep.Turns {
		n := next + i
		cfg, ok := m.Agents[t.Role]
		if !ok {
			return fmt.Errorf("job %s: turn %s: no agent for role %q", tx.ID, t.Key, t.Role)
		}
		meta := map[string]any{"role": t.Role, "phase": c.phase, "provider": cfg.Provider, "interaction": n,
			"attempt": 1, history.MetaTurnKey: t.Key, history.MetaAnswerSchema: t.Schema}
		prov, perr := e.providerFor(m, t.Role)
		if perr == nil {
			agent.SentParams(prov).Record(meta)
		}
		hreq := &history.Request{Prompt: t.Prompt, FilesContext: []string{}, Metadata: meta,
			TaskDescription: m.TaskDescription, WorkspacePath: tx.Store().Workspace(tx.ID)}
		intents = append(intents, &history.Record{Type: history.TypeIntent, Interaction: &n, Phase: c.phase, Role: t.Role,
			Attempt: 1, StateBefore: string(m.Status), Request: hreq})
		req := &agent.Request{JobID: tx.ID, Phase: c.phase, Role: t.Role, ContextFiles: []string{}, Prompt: t.Prompt,
			TaskDescription: m.TaskDescription, Metadata: meta, Workspace: tx.Store().Workspace(tx.ID), JobDir: tx.Dir,
			Interaction: n, CallIndex: tx.State().Responses[t.Role], ReadOnly: t.ReadOnly}
		if perr == nil {
			waits = append(waits, e.writeRequest(tx, t.Role, req))
		}
		c.turns = append(c.turns, &turnCall{turn: t, interaction: n, req: req, provider: cfg.Provider, prov: prov, perr: perr})
	}
	var refused error
	for _, wait := range waits {
		if err := wait(); refused == nil {
			refused = err
		}
	}
	if refused != nil {
		c.turns = nil
		return refused
	}
	for _, rec := range intents {
		if err := tx.Append(rec); err != nil {
			return err
		}
	}
	return nil
}

// playTurns makes the turns' calls, in parallel up to the job's limit.
// Transient failures are retried like any call's; a turn that still fails
// comes back with its error (the workflow records it as skipped). The step
// never waits for a background turn: when the other turns have ended, a
// background one still running (or still waiting for a slot) is cut and
// comes back late.
func (e *Engine) playTurns(ctx context.Context, tx *jobtx.Tx, c *call) {
	m := tx.M
	sem := make(chan struct{}, m.MaxParallelCalls())
	bgctx, cut := context.WithCancel(ctx)
	defer cut()
	var fg, bg sync.WaitGroup
	for _, tc := range c.turns {
		if tc.turn.Background {
			continue
		}
		fg.Add(1)
		sem <- struct{}{}
		go func(tc *turnCall) {
			defer fg.Done()
			defer func() { <-sem }()
			e.guardedTurn(ctx, m, tc)
		}(tc)
	}
	for _, tc := range c.turns {
		if !tc.turn.Background {
			continue
		}
		bg.Add(1)
		go func(tc *turnCall) {
			defer bg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
				e.guardedTurn(bgctx, m, tc)
			case <-bgctx.Done():
			}
			if tc.err == nil && tc.out != nil || ctx.Err() != nil {
				return
			}
			if bgctx.Err() != nil {
				tc.out, tc.late = nil, true
				tc.err = &agent.Error{Code: codes.TurnLate, Msg: "the step's other turns ended first; a background turn is never waited for"}
			}
		}(tc)
	}
	fg.Wait()
	cut()
	bg.Wait()
	for _, tc := range c.turns {
		if tc.fault != nil {
			panic(tc.fault) // on the run's goroutine: keepFault ends the run on it
		}
	}
}

// guardedTurn is playTurn on a goroutine of its own, whose panic would
// stop the daemon past RunFrom's keepFault: it is kept in tc.fault, with
// its stack, for playTurns to raise on the run's goroutine.
func (e *Engine) guardedTurn(ctx context.Context, m *manifest.Manifest, tc *turnCall) {
	defer func() {
		if p := recover(); p != nil {
			tc.fault = &runPanic{value: p, stack: debug.Stack()}
		}
	}()
	e.playTurn(ctx, m, tc)
}

// playTurn makes one turn's call, retrying transient failures.
func (e *Engine) playTurn(ctx context.Context, m *manifest.Manifest, tc *turnCall) {
	prov := tc.prov
	if tc.perr != nil {
		tc.err = tc.perr
		return
	}
	deadline, _ := callDeadline(m, e.defaults(m), tc.turn.Role)
	ctx, tc.refused = agent.WithEgressLog(ctx)
	start := time.Now()
	defer func() { tc.elapsed = time.Since(start) }()
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, deadline)
		tc.out, tc.err = prov.Call(cctx, tc.req)
		if tc.err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			tc.err = &agent.Error{Code: codes.AgentTimeout, Msg: fmt.Sprintf("call exceeded its timeout of %s; agent killed", deadline)}
		}
		cancel()
		tc.attempts = attempt
		ae, ok := agent.AsError(tc.err)
		if tc.err == nil || ctx.Err() != nil || !ok || !ae.Transient || attempt > m.MaxAPIRetries() {
			return
		}
		tc.failed = append(tc.failed, failedAttempt{attempt, ae.Code, ae.Msg})
		// The failed attempt's kept result is not an answer to adopt:
		// the next attempt of the turn starts afresh.
		_ = agent.ForgetCall(tc.req.JobDir, tc.interaction) // a folder that stays is adopted: the same failure, retried
		e.Env.Obs.Retry("api_error")
		if e.Sleep(ctx, max(e.backoff(m.BackoffInitial(), attempt), min(ae.RetryAfter, 5*time.Minute))) != nil {
			return
		}
	}
}

// finishTurns records each turn's response, hands the results to the
// effect, and returns what it made of them.
func (e *Engine) finishTurns(ctx context.Context, tx *jobtx.Tx, c *call, eff effect.TurnEffect) (outcome, error) {
	m := tx.M
	if !m.Status.Active() || m.Phase() != c.phase {
		// A steward changed the job during the calls: record what they
		// produced; the turns are not applied.
		o := outcome{parked: true}
		for _, tc := range c.turns {
			rec := e.turnResponse(c, tc, history.StatusError, codes.AgentCanceled, fmt.Sprintf("job became %s during the call", m.Status), nil)
			// Accounted with its response, as every recorded call is.
			account(m, rec.Response.CostUSD, tc.elapsed)
			o.responses = append(o.responses, rec)
		}
		return o, nil
	}
	if ctx.Err() != nil {
		// Shutdown: nothing is recorded; the turns are asked again.
		return outcome{hold: true, logs: []logEntry{{code: codes.AgentInterrupted, actor: c.role, attempt: 1, record: true,
			msg: "turns interrupted by shutdown; they will be asked again"}}}, nil
	}
	var o outcome
	var results []workflow.TurnResult
	var awaiting []string
	for _, tc := range c.turns {
		cost := callCost(tc.out, tc.err)
		account(m, cost, tc.elapsed)
		if ae, ok := agent.AsError(tc.err); ok && ae.Code == codes.AwaitingReply {
			awaiting = append(awaiting, tc.turn.Role)
			continue // no response: the intent stays open for logist reply
		}
		r := workflow.TurnResult{Key: tc.turn.Key, Late: tc.late}
		o.logs = append(o.logs, tc.failedLogs()...)
		seen := callSeen{tc.turn.Role, tc.provider, "ok", tc.elapsed, cost}
		var rec *history.Record
		switch {
		case tc.err != nil:
			code, msg := codes.APIError, tc.err.Error()
			if ae, ok := agent.AsError(tc.err); ok {
				code, msg = ae.Code, ae.Msg
			}
			r.Error = code + ": " + msg
			seen.result = "error"
			o.logs = append(o.logs, logEntry{code: code, actor: tc.turn.Role, attempt: tc.attempt(),
				msg: fmt.Sprintf("turn %s failed (attempt %d, giving up): %s", tc.turn.Key, tc.attempt(), msg)})
			rec = e.turnResponse(c, tc, history.StatusError, code, msg, nil)
		default:
			// A turn's answer is held to its turn's schema alone.
			v := response.Judge(tc.out.Raw, response.Contract{Turn: true, Schema: tc.turn.Schema})
			if v.Err != nil {
				r.Error = v.Err.Error()
				seen.result = "invalid"
				// Recorded as the turn's schema refusing it, whatever the
				// validation code.
				o.violations = append(o.violations, codes.SchemaInvalid)
				o.logs = append(o.logs, logEntry{code: codes.SchemaInvalid, actor: tc.turn.Role, attempt: tc.attempt(),
					msg: fmt.Sprintf("turn %s answered outside its schema: %s", tc.turn.Key, v.Err.Error())})
				rec = e.turnResponse(c, tc, history.StatusError, codes.SchemaInvalid, v.Err.Error(), tc.out)
			} else {
				r.Answer = v.Object
				rec = e.turnResponse(c, tc, history.StatusSuccess, "", "", tc.out)
				if l, ok := costDisagreement(rec.Response, tc.out, tc.turn.Role, tc.attempt()); ok {
					o.logs = append(o.logs, l)
				}
			}
		}
		o.calls = append(o.calls, seen)
		o.responses = append(o.responses, rec)
		results = append(results, r)
	}
	if h := e.overBudget(tx); h != nil {
		return o.then(*h), nil
	}
	if len(awaiting) > 0 {
		// The answered turns wait, recorded, for the human's reply; the
		// effect finds them again when the step is replayed.
		reason := fmt.Sprintf("waiting for a reply from %v: logist reply %s --as ROLE --file ANSWER.json", awaiting, tx.ID)
		return o.then(outcome{code: codes.AwaitingReply, transition: &transition{lifecycle.EvAwait, lifecycle.InterventionRequired, "", "SYSTEM", reason}}), nil
	}
	oc, err := eff.FinishTurns(tx, c.phase, results)
	if err != nil {
		return outcome{}, err
	}
	// The effect's outcome: more turns in the same phase (CONTINUE), the
	// end of the workflow, or a stop.
	o.records, o.state, o.marks = oc.Records, oc.State, oc.Marks
	if oc.Point != nil {
		o.point = gamePoint(tx, c.phase, oc.Point)
	}
	switch {
	case oc.Fail != nil:
		return o.then(workflowFailed(c.role, oc.Fail)), nil
	case oc.Name == workflow.OutcomeContinue:
		o.more = true
		return o, nil
	}
	wf, err := m.ResolveWorkflow()
	if err != nil {
		return outcome{}, err
	}
	next, err := skipped(wf, c.phase, oc.Name, oc.State, "")
	if err != nil {
		return outcome{}, err
	}
	return o.then(next), nil
}

// attempt is the number of the turn's last attempt (1 when it was never
// made: its provider could not be built).
func (tc *turnCall) attempt() int { return max(tc.attempts, 1) }

// failedLogs are the turn's retried attempts as error lines, each recorded
// in history too: a failed attempt is never silent.
func (tc *turnCall) failedLogs() []logEntry {
	out := make([]logEntry, 0, len(tc.failed))
	for _, f := range tc.failed {
		out = append(out, logEntry{code: f.code, actor: tc.turn.Role, attempt: f.attempt, record: true,
			msg: fmt.Sprintf("turn %s attempt %d failed, retrying: %s", tc.turn.Key, f.attempt, f.msg)})
	}
	return out
}

// turnResponse is a turn's response record.
func (e *Engine) turnResponse(c *call, tc *turnCall, status, code, msg string, out *agent.Result) *history.Record {
	n := tc.interaction
	cost := 0.0
	resp := &history.Response{Status: status, EvidenceFiles: []string{}, ExecutionTimeSeconds: round3(tc.elapsed.Seconds()), ErrorCode: code, Error: msg}
	if out != nil {
		resp.RawResponse, resp.SessionID, resp.Tokens, resp.Stderr = string(out.Raw), out.SessionID, out.Tokens, truncate(out.Stderr, 4096)
		resp.Stdout = truncate(string(out.Stdout), 4096)
		cost = out.CostUSD
		if out.Tokens != nil && e.Timings != nil {
			e.Timings.Tokens(tc.provider, out.Tokens.Input, out.Tokens.Output, out.Tokens.Cache)
		}
	} else if ae, ok := agent.AsError(tc.err); ok {
		cost = ae.CostUSD
		resp.Stderr = truncate(ae.Stderr, 4096)
		if !ae.Retake {
			resp.RawResponse = truncate(string(ae.Partial), 64<<10)
		}
	}
	resp.CostUSD = cost
	recordMetered(resp, out, tc.err)
	return &history.Record{Type: history.TypeResponse, Interaction: &n, Phase: c.phase, Role: tc.turn.Role,
		Attempt: tc.attempt(), StateBefore: string(c.stateBefore), Response: resp}
}
