package workflow

import (
	"context"

	"github.com/logist/logist/internal/history"
)

// Prep is what a phase's effect decides before the phase is played.
type Prep struct {
	// Context is added to the agent's prompt: what it must see (the
	// proposals to review, the results of the tools it asked for).
	Context string
	// Work is done by Logist itself, in place of an agent call, for phases
	// whose role is RoleLogist. Like a call it runs without the job's lock
	// (a steward can halt it) and returns the phase's answer.
	Work func(ctx context.Context) ([]byte, error)
	// Skip, if set, ends the phase at once with this outcome: there is
	// nothing to do (no intent needs the Critic's review), or its work is
	// over (a game ended). Reason, if set, says why (the transition's
	// reason; default: the phase had nothing to do).
	Skip   string
	Reason string
	// Fail stops the workflow: the job needs a steward (an integrity
	// violation of the protocol session).
	Fail *Failure
	// Records are appended before the phase is played (events such as
	// tool_execution_started).
	Records []*history.Record
	// State is the workflow's own state now ("" = unchanged).
	State string

	// Turns, if set, are the calls of this step instead of one call of the
	// phase's role: one (a chair decided who speaks) or several (every
	// member at once, in parallel up to the job's limit). Each answer is
	// validated on its own against the turn's schema; the engine hands the
	// results to the effect (TurnEffect.FinishTurns).
	Turns []Turn
	// Wait, if set, stops the job for the steward (a decision only a human
	// makes): the job waits, showing this text.
	Wait string
	// Abandon are interactions whose calls were cut off (a restart) and
	// will not be answered: the engine records them as interrupted before
	// the turns are asked again.
	Abandon []int
	// Marks and Point: see Outcome.
	Marks []Mark
	Point *Point
}

// Mark is a transition of the workflow's own state machine inside a
// phase (a game's round, conversation, vote or result: seed 004 §7.1).
// The engine logs it once the step's records are written, naming the
// checkpoint in force (the step's Point, if it has one).
type Mark struct {
	// Game names the state machine (the game: "negotiation").
	Game                   string
	From, To, Event, Actor string
}

// Point is a safe boundary inside a phase that the step's records end on
// (a game's private conversation, round or vote ended: seed 004 §2.2).
// The engine records a recovery point after them, with a snapshot of the
// workspace; the job resumes from it in the same phase, the effect
// replaying the history up to it.
type Point struct {
	// Name ends the checkpoint's id (cp-NNNN-NAME): a file-name-safe word.
	Name        string
	Description string
}

// Turn is one call of a turn-taking or fan-out step.
type Turn struct {
	// Key identifies the turn across restarts (the same turn asked again
	// has the same key); a human's reply is filed under it.
	Key  string
	Role string
	// Schema is the answer schema (a file in schemas/); answers of turns
	// are held to it alone, not to the base answer contract.
	Schema string
	Prompt string
	// Background marks a turn the step never waits for (seed 004's stance
	// helper): it plays alongside the step's other turns and, if it has
	// not answered when they end, it is cut and comes back Late.
	Background bool
	// ReadOnly are workspace files (relative paths) the turn's agent may
	// read but not write: a parliament's governed files, which change only
	// through an enacted vote. A contained agent gets them read-only.
	ReadOnly []string
}

// TurnResult is what became of one turn: its answer (valid against the
// turn's schema) or why it failed.
type TurnResult struct {
	Key    string
	Answer map[string]any
	Error  string
	// Late: a background turn cut because the step's other turns ended
	// first (Error says so too).
	Late bool
}

// Outcome is what a phase's effect makes of a valid answer.
type Outcome struct {
	// Name is the answer's action or one of the phase's outcomes; the
	// phase's On map says where it leads.
	Name string
	// Retry marks an outcome that sends work back (a rejection, a guard
	// that refused what the agent said): it counts against the job's
	// RETRY limit and Feedback is shown to whoever plays next.
	Retry    bool
	Feedback string
	// Fail stops the workflow, as in Prep.
	Fail *Failure
	// Records are appended right after the answer's response record (the
	// events the answer amounts to, already checked by the guards).
	Records []*history.Record
	// State is the workflow's own state after them ("" = unchanged).
	State string
	// Marks are the transitions of the workflow's own state machine the
	// records make; Point, if set, is the safe boundary they end on.
	Marks []Mark
	Point *Point
}

// OutcomeContinue keeps the job in its phase without a transition (one
// turn of a deliberation done, more to come).
const OutcomeContinue = "CONTINUE"

// OutcomeFailed is the recorded outcome of an answer after which the
// workflow stopped (Outcome.Fail).
const OutcomeFailed = "WORKFLOW_FAILED"

// Failure is why a workflow stopped.
type Failure struct {
	Code   string
	Reason string
}
