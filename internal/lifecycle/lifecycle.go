// Package lifecycle defines job statuses and the one table of legal status
// transitions. Every status change in Logist (daemon or steward) goes through
// Next; a change that is not in the table is refused, never applied.
package lifecycle

import "fmt"

// Status is a job's execution state (seed 002's nine statuses).
type Status string

const (
	Draft                Status = "DRAFT"
	Pending              Status = "PENDING"
	Running              Status = "RUNNING"
	Reviewing            Status = "REVIEWING"
	Success              Status = "SUCCESS"
	Canceled             Status = "CANCELED"
	InterventionRequired Status = "INTERVENTION_REQUIRED"
	HaltedCost           Status = "HALTED_COST"
	HaltedTime           Status = "HALTED_TIME"
)

// All lists every status in display order.
var All = []Status{Draft, Pending, Running, Reviewing, Success, Canceled, InterventionRequired, HaltedCost, HaltedTime}

// Valid reports whether s is one of the nine statuses.
func (s Status) Valid() bool {
	for _, x := range All {
		if x == s {
			return true
		}
	}
	return false
}

// Terminal statuses end a job's work: nothing moves it on by itself. Only
// CANCELED is final; a steward's rollback takes a SUCCESS job back to
// PENDING (the table).
func (s Status) Terminal() bool { return s == Success || s == Canceled }

// Active statuses are those the daemon works on.
func (s Status) Active() bool { return s == Pending || s == Running || s == Reviewing }

// Waiting statuses need a steward to continue.
func (s Status) Waiting() bool {
	return s == InterventionRequired || s == HaltedCost || s == HaltedTime
}

// Event names why a status changes; they appear in logs and history.
type Event string

const (
	EvActivate     Event = "activate"      // steward: DRAFT -> PENDING
	EvStart        Event = "start"         // first phase entered
	EvAdvance      Event = "phase_advance" // COMPLETED moved to the next phase
	EvRetry        Event = "phase_retry"   // RETRY re-entered a phase
	EvSucceed      Event = "job_succeeded" // COMPLETED of the last phase
	EvStuck        Event = "agent_stuck"   // agent answered STUCK
	EvInvalid      Event = "response_invalid"
	EvAgentFailed  Event = "agent_failed" // timeouts, exhausted API retries
	EvRetryLimit   Event = "retry_limit"  // RETRY beyond the manifest's limit
	EvCostExceeded Event = "cost_exceeded"
	EvTimeExceeded Event = "time_exceeded"
	// EvCallsExceeded: the job made as many agent calls as its calls
	// budget allows. Seed 002 has no HALTED status for it: the job waits
	// for a steward in INTERVENTION_REQUIRED (code CALL_BUDGET).
	EvCallsExceeded Event = "calls_exceeded"
	EvResume        Event = "steward_resume"
	EvHalt          Event = "steward_halt"
	EvRollback      Event = "steward_rollback"
	// EvWorkflowFailed: the workflow itself cannot go on (the protocol
	// session's integrity is violated, its verification failed).
	EvWorkflowFailed Event = "workflow_failed"
	// EvAwait: the workflow waits for the steward (a decision, a human's
	// reply).
	EvAwait Event = "awaiting_steward"
)

type key struct {
	from Status
	ev   Event
}

// table is the whole state machine: (from, event) -> allowed targets.
// Phase-moving events may land in RUNNING or REVIEWING, because the workflow
// (data) says which status each phase runs under.
var table = map[key][]Status{
	{Draft, EvActivate}: {Pending},
	{Draft, EvHalt}:     {Canceled},

	{Pending, EvStart}:         {Running, Reviewing},
	{Pending, EvSucceed}:       {Success},
	{Pending, EvCostExceeded}:  {HaltedCost},
	{Pending, EvTimeExceeded}:  {HaltedTime},
	{Pending, EvHalt}:          {Canceled},
	{Pending, EvAgentFailed}:   {InterventionRequired},
	{Pending, EvCallsExceeded}: {InterventionRequired},

	{Running, EvAdvance}:   {Running, Reviewing},
	{Reviewing, EvAdvance}: {Running, Reviewing},
	{Running, EvRetry}:     {Running, Reviewing},
	{Reviewing, EvRetry}:   {Running, Reviewing},
}

func init() {
	for _, s := range []Status{Running, Reviewing} {
		table[key{s, EvSucceed}] = []Status{Success}
		for _, ev := range []Event{EvStuck, EvInvalid, EvAgentFailed, EvRetryLimit, EvWorkflowFailed, EvAwait, EvCallsExceeded} {
			table[key{s, ev}] = []Status{InterventionRequired}
		}
		table[key{s, EvCostExceeded}] = []Status{HaltedCost}
		table[key{s, EvTimeExceeded}] = []Status{HaltedTime}
		table[key{s, EvHalt}] = []Status{Canceled}
	}
	for _, s := range []Status{InterventionRequired, HaltedCost, HaltedTime} {
		table[key{s, EvResume}] = []Status{Pending}
		table[key{s, EvHalt}] = []Status{Canceled}
		table[key{s, EvRollback}] = []Status{Pending}
	}
	table[key{Success, EvRollback}] = []Status{Pending}
}

// IllegalTransition is returned for a change the table does not allow.
type IllegalTransition struct {
	From, To Status
	Event    Event
}

func (e *IllegalTransition) Error() string {
	return fmt.Sprintf("illegal transition %s -(%s)-> %s", e.From, e.Event, e.To)
}

// Check returns nil when from -(ev)-> to is in the table.
func Check(from Status, ev Event, to Status) error {
	for _, t := range table[key{from, ev}] {
		if t == to {
			return nil
		}
	}
	return &IllegalTransition{From: from, To: to, Event: ev}
}

// Allows reports whether any transition leaves from on ev.
func Allows(from Status, ev Event) bool { return len(table[key{from, ev}]) > 0 }

// Transition is one row of the table, for documentation and tests.
type Transition struct {
	From  Status
	Event Event
	To    Status
}

// Table returns every legal transition.
func Table() []Transition {
	var out []Transition
	for _, from := range All {
		for _, ev := range Events {
			for _, to := range table[key{from, ev}] {
				out = append(out, Transition{from, ev, to})
			}
		}
	}
	return out
}

// Events lists every event the table uses (a test walks the table).
var Events = []Event{EvActivate, EvStart, EvAdvance, EvRetry, EvSucceed, EvStuck, EvInvalid, EvAgentFailed,
	EvRetryLimit, EvWorkflowFailed, EvAwait, EvCostExceeded, EvTimeExceeded, EvCallsExceeded, EvResume, EvHalt, EvRollback}
