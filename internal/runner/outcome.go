package runner

import (
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/workflow"
)

// outcome is what a step decided, as a value: the records it adds, how the
// run state changes, the transition, what is logged and what the
// observers hear, and how the run goes on. prepare, finish and
// finishTurns build outcomes and apply performs them, one transition and
// one commit each, the way River's executor returns JobSetState… values
// that one place applies. No other code in the engine commits.
type outcome struct {
	// logs are lines logged with seed 004 §7.2's fields (an error or a
	// warning, as their code's kind says: internal/joblog), first of all
	// (the log names the status and checkpoint the step found); those
	// marked record are logged as they are appended as error records,
	// before any other record.
	logs []logEntry

	// Run-state changes, made before anything is appended (so that the
	// records join the change's unit).
	// start marks the job's first start (run.started_at).
	start bool
	// contained, if set, is the layer the job (re)starts under (metrics).
	contained string
	// code is the run's error code ("" leaves it).
	code string
	// counters, if set, are run.phase_retries and run.api_failures after
	// the step (workflow.Decision's).
	counters *counters
	// state is the workflow's own state after the step ("" leaves it).
	state string
	// handoff, if set, is what an answer leaves whoever plays next.
	handoff *handoff
	// audit, if set, is a line of the manifest's short audit trail.
	audit *auditLine

	// responses are the calls' response records, appended after the error
	// records and each counted in agent_calls; records follow them (an
	// effect's events); point, if set, is a recovery point record: the
	// workspace is snapshotted, the point appended last, and the job
	// resumes from it.
	responses []*history.Record
	records   []*history.Record
	point     *history.Record
	// marks are the transitions of the workflow's own state machine the
	// records make (a game's rounds, conversations, votes), logged once
	// the point, if any, is the job's checkpoint.
	marks []workflow.Mark

	// transition, if set, moves the job (if the lifecycle table allows).
	transition *transition

	// Observers: the calls made, invalid answers' codes, a retry's cause.
	// A budget halt is heard from the transition's event.
	calls      []callSeen
	violations []string
	retry      string
	// parked refreshes jobHistory.json although the engine moved no
	// status (a steward's command did, during the call).
	parked bool

	// intent, if set, is an intent committed as the unit's last record:
	// durable, with everything above, when apply returns, and the call may
	// start. hold commits nothing instead: the outcome changes nothing
	// that needs a commit (its records, with the manifest unchanged, are
	// written at once), or an intent follows in the same transaction and
	// takes the change into its unit (the start of a plain agent phase and
	// its first intent share one history fsync).
	intent *history.Record
	hold   bool

	// more: the run goes on with another step (after backoff).
	more    bool
	backoff time.Duration
}

type logEntry struct {
	code, actor string
	attempt     int
	msg         string
	record      bool
}

type counters struct{ phaseRetries, apiFailures int }

type auditLine struct {
	role, action, note string
	evidence           []string
}

// handoff is what an answer leaves for whoever plays next: its summary,
// the feedback to address, the previous phase's summary and evidence (nil
// pointers and slices leave them as they are).
type handoff struct {
	last     string
	feedback *string
	previous *string
	evidence []string
	// delivered: the steward's guidance went out in this call's prompt.
	delivered bool
}

type transition struct {
	event         lifecycle.Event
	to            lifecycle.Status
	phase         string // "" keeps the phase
	actor, reason string
}

// callSeen is a finished call as the observers hear of it.
type callSeen struct {
	role, provider, result string
	elapsed                time.Duration
	cost                   float64
}

// then is o followed by p's decision: p's logs and records after o's, and
// p's code, state, transition and continuation.
func (o outcome) then(p outcome) outcome {
	o.logs = append(o.logs, p.logs...)
	o.records = append(o.records, p.records...)
	o.marks = append(o.marks, p.marks...)
	if p.code != "" {
		o.code = p.code
	}
	if p.state != "" {
		o.state = p.state
	}
	o.transition, o.more, o.backoff = p.transition, p.more, p.backoff
	return o
}

// apply performs o on the job and commits it.
func (e *Engine) apply(tx *jobtx.Tx, o outcome) (stepResult, error) {
	m := tx.M
	done := stepResult{done: true}
	obs := e.Env.Obs
	for _, l := range o.logs {
		if !l.record {
			tx.LogCode(l.code, l.actor, l.attempt, l.msg)
		}
	}

	if o.contained != "" {
		obs.Contained(o.contained)
	}
	if o.start {
		m.Run.StartedAt = tx.Now().UTC().Format(time.RFC3339Nano)
		obs.FirstStart()
	}
	if o.code != "" {
		m.Run.ErrorCode = o.code
	}
	if c := o.counters; c != nil {
		m.Run.PhaseRetries, m.Run.APIFailures = c.phaseRetries, c.apiFailures
	}
	if o.state != "" {
		m.Run.WorkflowState = o.state
	}
	if h := o.handoff; h != nil {
		m.Run.LastSummary = h.last
		if h.feedback != nil {
			m.Run.Feedback = *h.feedback
		}
		if h.previous != nil {
			m.Run.PreviousSummary = *h.previous
		}
		if h.evidence != nil {
			m.Run.Evidence = h.evidence
		}
		if h.delivered {
			m.Run.Guidance = ""
		}
	}
	if a := o.audit; a != nil {
		m.Audit(tx.Now(), a.role, a.action, a.note, a.evidence)
	}

	for _, l := range o.logs {
		if l.record {
			if err := tx.RecordError(l.code, l.actor, l.attempt, l.msg); err != nil {
				return done, err
			}
		}
	}
	for _, r := range o.responses {
		// agent_calls counts calls with a recorded outcome, one per
		// response record; an interrupted call is asked again and counted
		// then. The count changed the manifest: the response is part of
		// that change.
		m.Metrics.AgentCalls++
		if err := tx.AppendChange(r); err != nil {
			return done, err
		}
	}
	if err := appendAll(tx, o.records); err != nil {
		return done, err
	}
	if o.point != nil {
		e.snapshot(tx, o.point.RecoveryPoint)
		if err := tx.Append(o.point); err != nil {
			return done, err
		}
		// jobHistory.json is refreshed when the job stops running (the
		// transition marks that), not at every phase boundary: rebuilding
		// it costs the whole history, and logist history --format json
		// always builds a current one. The point is now the job's
		// current checkpoint (jobtx.Tx.Checkpoint; the manifest's
		// run.checkpoint_id follows it at commit).
	}
	for _, mk := range o.marks {
		tx.LogGameTransition(mk.Game, mk.From, mk.To, mk.Event, mk.Actor)
	}

	if t := o.transition; t != nil {
		if err := tx.Transition(t.event, t.to, t.phase, t.actor, t.reason); err != nil {
			return done, err
		}
		switch t.event {
		case lifecycle.EvCostExceeded:
			obs.Halt("cost")
		case lifecycle.EvTimeExceeded:
			obs.Halt("time")
		}
	}
	if o.parked {
		// The steward's command already wrote jobHistory.json; refresh it
		// so the parked job's record includes what this step recorded.
		tx.MarkParked()
	}

	var err error
	switch {
	case o.intent != nil:
		// With a change still uncommitted, the intent joins its unit.
		err = tx.CommitWithIntent(o.intent)
	case !o.hold:
		err = tx.Commit()
	}
	if err != nil {
		return done, err
	}
	// The calls, invalid answers and retries are counted once recorded:
	// a unit the storage refused (a full disk) is not, and its step is
	// taken again, the call re-asked or adopted, and counted then, once,
	// not as an agent's error per try. A held outcome is counted with the
	// unit that takes it (the next intent's).
	if len(o.calls) > 0 || len(o.violations) > 0 || o.retry != "" {
		tx.AfterCommit(func() {
			for _, c := range o.calls {
				obs.AgentCall(c.role, c.provider, c.result, c.elapsed, c.cost)
			}
			for _, code := range o.violations {
				obs.Violation(code)
			}
			if o.retry != "" {
				obs.Retry(o.retry)
			}
		})
	}
	return stepResult{done: !o.more, backoff: o.backoff}, nil
}

func appendAll(tx *jobtx.Tx, recs []*history.Record) error {
	for _, r := range recs {
		if err := tx.Append(r); err != nil {
			return err
		}
	}
	return nil
}
