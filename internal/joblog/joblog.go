// Package joblog writes the structured log lines seed 004 §7 asks for, one
// function per kind of line, so that every caller (a job's transaction,
// the scheduler, the daemon, the schedules, the metering proxy) gives the
// same fields: a transition (§7.1: the job as game_id, from, to, event,
// actor, checkpoint_id) and a problem (§7.2: type, the job, status, actor,
// error_code, attempt, checkpoint_id; and the phase).
//
// A problem's level and type come from its code's kind in the catalogue
// (internal/codes): an error is logged at ERROR with type "error", a
// warning (an answer accepted with a missing evidence file, a repaired
// torn tail) at WARN with type "warning", so what counts errors in the log
// does not count warnings.
package joblog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"

	"github.com/logist/logist/internal/codes"
)

// System is the actor of what neither a role nor a steward did.
const System = "SYSTEM"

// TypeTransition is the type field of a transition line; a problem's is
// its code's kind (codes.Error, codes.Warning, codes.Info).
const TypeTransition = "transition"

// Problem is what an error, warning or info line says.
type Problem struct {
	// Job is the job's id ("" for the daemon's own problems).
	Job string
	// Status is the job's status when it happened ("" when the caller
	// does not know it).
	Status string
	// Actor is the role, the steward, or "" for System.
	Actor string
	Code  string
	// Attempt is the call's attempt (0 when no call is concerned).
	Attempt int
	// Checkpoint is the job's last safe checkpoint.
	Checkpoint string
	// Phase is the job's phase ("" for none).
	Phase string
}

// Log writes p as one line with message msg; attrs follow its fields.
func Log(l *slog.Logger, msg string, p Problem, attrs ...any) {
	kind := codes.KindOf(p.Code)
	actor := p.Actor
	if actor == "" {
		actor = System
	}
	args := make([]any, 0, 16+len(attrs))
	args = append(args, "type", string(kind), "job_id", p.Job, "status", p.Status, "actor", actor,
		"error_code", p.Code, "attempt", p.Attempt, "checkpoint_id", p.Checkpoint, "phase", p.Phase)
	l.Log(context.Background(), levels[kind], msg, append(args, attrs...)...)
}

// levels is each kind's log level.
var levels = map[codes.Kind]slog.Level{codes.Error: slog.LevelError, codes.Warning: slog.LevelWarn, codes.Info: slog.LevelInfo}

// Transition is what a transition line says.
type Transition struct {
	Job, From, To, Event string
	// Actor is the role, the steward, or "" for System.
	Actor string
	// Checkpoint is the job's last safe checkpoint (one the transition's
	// change created included).
	Checkpoint         string
	FromPhase, ToPhase string
	Reason             string
}

// LogTransition writes t as one line, at INFO; attrs follow its fields.
func LogTransition(l *slog.Logger, t Transition, attrs ...any) {
	actor := t.Actor
	if actor == "" {
		actor = System
	}
	l.Info("transition", append([]any{"type", TypeTransition, "job_id", t.Job, "from", t.From, "to", t.To, "event", t.Event,
		"actor", actor, "checkpoint_id", t.Checkpoint, "phase", t.ToPhase, "from_phase", t.FromPhase, "to_phase", t.ToPhase,
		"reason", t.Reason}, attrs...)...)
}

// GameTransition is a transition of a game inside a job's phase (seed 004
// §7.1: a round, a conversation, a vote, a result). Its line is a
// transition line with the job as game_id, the game's own statuses as
// from and to, and scope "game" (a job's own transition lines have no
// scope).
type GameTransition struct {
	Job, Game, From, To, Event string
	// Actor is the participant whose act it is ("" for System).
	Actor string
	// Checkpoint is the job's last safe checkpoint (the one this step
	// created included).
	Checkpoint string
	Phase      string
}

// LogGameTransition writes t as one transition line, at INFO.
func LogGameTransition(l *slog.Logger, t GameTransition) {
	actor := t.Actor
	if actor == "" {
		actor = System
	}
	l.Info("game transition", "type", TypeTransition, "scope", "game", "job_id", t.Job, "game_id", t.Job, "game", t.Game,
		"from", t.From, "to", t.To, "event", t.Event, "actor", actor, "checkpoint_id", t.Checkpoint, "phase", t.Phase)
}

// Fields every line of a kind carries.
var (
	ProblemFields    = []string{"type", "job_id", "status", "actor", "error_code", "attempt", "checkpoint_id"}
	TransitionFields = []string{"type", "job_id", "from", "to", "event", "actor", "checkpoint_id"}
)

// Check says what is wrong with line, one JSON log line decoded, as a line
// of seed 004 §7: a field its type requires missing, an actor missing, a
// level that does not match its code's kind, or a type that is neither
// (nil: nothing). For tests and for tools that read the log.
func Check(line map[string]any) error {
	typ, _ := line["type"].(string)
	want := ProblemFields
	switch {
	case typ == TypeTransition:
		want = TransitionFields
	case !slices.Contains([]codes.Kind{codes.Error, codes.Warning, codes.Info}, codes.Kind(typ)):
		return fmt.Errorf("type %q is neither a transition nor a code's kind", typ)
	}
	for _, f := range want {
		if _, ok := line[f]; !ok {
			return fmt.Errorf("%s line lacks %s", typ, f)
		}
	}
	if a, _ := line["actor"].(string); a == "" {
		return fmt.Errorf("%s line has no actor", typ)
	}
	if typ == TypeTransition {
		return nil
	}
	code, _ := line["error_code"].(string)
	if _, ok := codes.Lookup(code); !ok {
		return fmt.Errorf("error_code %q is not in the catalogue (internal/codes)", code)
	}
	if kind := codes.KindOf(code); typ != string(kind) {
		return fmt.Errorf("%s is a %s, logged as type %s", code, kind, typ)
	}
	if lv, ok := line["level"].(string); ok && lv != levels[codes.Kind(typ)].String() {
		return fmt.Errorf("%s line at level %s, want %s", typ, lv, levels[codes.Kind(typ)])
	}
	return nil
}

// Lines decodes a JSON log's lines (a line that is not a JSON object is
// left out), for tests and tools that read the log.
func Lines(log []byte) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}
