// Package deliberation is what the deliberation workflows (the parliament
// of seeds 000/001, the negotiation of seed 004) share, built once: the
// message ledger and its visibility, turns (one speaker, or every member at
// once), vote rules and tallies, context windowing, the per-answer sentence
// budget, the chair's procedural line library, and a seeded RNG so a run is
// reproducible.
//
// A game (internal/deliberation/parliament, internal/deliberation/negotiation)
// implements Game. Its state is never stored on its own: it is replayed from
// the committed messages (and the steward's inputs), so a restart resumes at
// the last committed turn and the same seed gives the same ledger.
package deliberation

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Steward is the participant id of the human steward (who sees every
// message).
const Steward = "steward"

// Skipped is the message type of a turn that failed or came back empty: the
// chair's procedural line is recorded and the turn cursor advances.
const Skipped = "SKIPPED"

// Message is one ledger entry (seed 000's base structure). The orchestrator
// stamps ID, Round and Timestamp.
type Message struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	Round     int            `json:"round"`
	Timestamp string         `json:"timestamp"`
	From      string         `json:"from"`
	To        string         `json:"to,omitempty"`
	InReplyTo string         `json:"in_reply_to,omitempty"`
	Content   map[string]any `json:"content"`
	// Audience, if set, are the only participants who may see the message
	// (besides the steward); empty means public.
	Audience []string `json:"audience,omitempty"`
}

// VisibleTo reports whether participant p may see m.
func (m *Message) VisibleTo(p string) bool {
	if len(m.Audience) == 0 || p == Steward || p == m.From {
		return true
	}
	for _, a := range m.Audience {
		if a == p {
			return true
		}
	}
	return false
}

// Visible is the part of msgs participant p may see, in order. Every
// context built for an agent goes through it.
func Visible(msgs []Message, p string) []Message {
	out := make([]Message, 0, len(msgs))
	for i := range msgs {
		if msgs[i].VisibleTo(p) {
			out = append(out, msgs[i])
		}
	}
	return out
}

// Turn is one agent call a game asks for.
type Turn struct {
	// Participant is the game's id of who speaks (rep_2, japan, ...);
	// Role is the manifest agent that plays it (often the same).
	Participant string `json:"participant"`
	Role        string `json:"role"`
	// Kind says what is asked (opening, question, answer, vote, ...); the
	// game uses it to read the answer.
	Kind string `json:"kind"`
	// Schema is the answer schema (a file in schemas/) the answer must
	// satisfy; it is checked before the game sees the answer.
	Schema string `json:"schema"`
	// Prompt is everything the participant is told for this turn: the
	// instruction and the context the game built from what it may see.
	Prompt string `json:"prompt"`
	// Data is the game's own bookkeeping for the turn (e.g. whom a
	// question is for), handed back with the result.
	Data map[string]any `json:"data,omitempty"`
	// Background: the game must never wait for this turn (seed 004's
	// stance helper). It plays alongside the step's other turns; one that
	// has not answered when they end is cut and its result is Late.
	Background bool `json:"background,omitempty"`
}

// Result is what became of a turn.
type Result struct {
	Turn Turn `json:"turn"`
	// Answer is the validated answer object; nil when the turn failed.
	Answer map[string]any `json:"answer,omitempty"`
	// Error says why the turn failed or came back empty (it is SKIPPED).
	Error string `json:"error,omitempty"`
	// Late: a background turn that had not answered when the step's other
	// turns ended; it was cut and the game went on without it.
	Late bool `json:"late,omitempty"`
}

// Step is what a game does next.
type Step struct {
	// Emit are messages the orchestrator or the chair adds without a model
	// call (openings picked by the RNG, rulings, tallies).
	Emit []Message
	// Turns are the calls to make now: one (turn-taking) or several (a
	// fan-out, played in parallel up to the job's limit). Each answer is
	// validated on its own.
	Turns []Turn
	// Wait, if set, means the steward must act before the game goes on
	// (the Prime Minister's decision, a human's reply): what is awaited.
	Wait string
	// Done ends the session; Outcome says how ("passed", "vetoed", ...).
	Done    bool
	Outcome string
}

// Input is something the steward (or a human playing a role) supplied:
// logist pm, logist reply.
type Input struct {
	Kind    string         `json:"kind"` // "pm_decision", "reply", ...
	From    string         `json:"from"`
	Content map[string]any `json:"content"`
	Time    string         `json:"time"`
}

// ErrInvalidInput marks an input a game refuses for what it says (an
// unknown kind or decision, a missing guidance), whatever the game's
// state: the steward's command was malformed (exit code 1), not out of
// order (2). Games wrap it; any other input error is out of order.
var ErrInvalidInput = errors.New("invalid input")

// Session is a game's state, replayed from its committed messages.
type Session interface {
	// Next is what happens now.
	Next() (*Step, error)
	// Apply turns the results of the step's turns into the messages to
	// commit (SKIPPED ones included).
	Apply(results []Result) ([]Message, error)
	// Input applies a steward input, returning the messages it makes (an
	// error names why it is not acceptable now: exit code 2 material;
	// one wrapping ErrInvalidInput says the input is malformed: 1).
	Input(in Input) ([]Message, error)
	// Files are the materialised files in the seeds' shapes (name relative
	// to the job folder → content), rewritten after each commit.
	Files() (map[string][]byte, error)
	// State is a short description for logist status.
	State() string
}

// Env is what a game is loaded from.
type Env struct {
	// Config is the manifest's "game" section (the game's own shape).
	Config json.RawMessage
	// Seed is the manifest's seed (0 when absent): every random choice
	// derives from it (RNG).
	Seed int64
	// Task is the job's task description (the problem statement).
	Task string
	// Messages are the committed messages, in order (a steward's input is
	// committed as the messages it made).
	Messages []Message
	// Workspace is the job's workspace folder (read-only for the game:
	// file changes are messages whose content the engine writes, see
	// FileWrite).
	Workspace string
	// Dir is the job folder (for files the game reads, e.g. a scenario
	// file named relative to it).
	Dir string
	// Now stamps new messages.
	Now func() time.Time
	// Issued is how many messages the job's history has recorded in all,
	// those a rollback undid included (0: as many as Messages).
	Issued int
}

// Undone is how many messages issued before a rollback are not in force:
// new messages' ids follow every id issued (MessageID), so no id is
// issued twice, for different messages, across rollbacks.
func (e Env) Undone() int { return max(0, e.Issued-len(e.Messages)) }

// MessageID is the id of the n-th message issued (from 1).
func MessageID(n int) string { return fmt.Sprintf("msg-%03d", n) }

// Protector is a Session whose participants must not write some workspace
// files (a parliament's governed files): the engine has every turn's agent
// run with them read-only, so they change only through the game's own
// file_write messages.
type Protector interface {
	Protected() []string
}

// Game builds a session of its rules from an Env.
type Game interface {
	Name() string
	Load(env Env) (Session, error)
}

// FileWrite is how a message changes a workspace file (an enacted
// amendment): Content["file_write"] = {"path": relative path, "content":
// the whole new content}. The engine writes it when it commits the
// message; a replay never writes again.
const FileWriteKey = "file_write"
