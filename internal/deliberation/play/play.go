// Package play runs a deliberation game (internal/deliberation) as a
// phase effect of Logist's engine: each step it replays the game from the
// job's committed messages, commits what the chair emits, hands the turns
// the game asks for to the engine (one speaker, or every member at once),
// applies their results, makes the job wait for the steward when the game
// says so, and writes the game's files. The history is the source of
// truth; the files in the job folder are its materialised view.
package play

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/pathguard"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/workflow"
)

// Effects are the games' effects, by effect name ("deliberation.<name>").
// The composition root chooses the games (internal/builtins).
func Effects(games ...deliberation.Game) map[string]*Effect {
	out := map[string]*Effect{}
	for _, g := range games {
		out["deliberation."+g.Name()] = &Effect{Game: g}
	}
	return out
}

// Effect plays one game.
type Effect struct {
	Game deliberation.Game
}

// state is a loaded game with what the step needs from the history.
type state struct {
	sess deliberation.Session
	msgs []deliberation.Message
	recs []history.Record
	// lastMessage is the index in recs of the last message record in
	// force, or of the last rollback if one came after it: turns recorded
	// before it belong to an earlier step.
	lastMessage int
	// sinceCheckpoint are the messages in force committed after the job's
	// current checkpoint (a recovery point, or the one a rollback returned
	// to).
	sinceCheckpoint []deliberation.Message
	// issued is how many message records the history holds, those a
	// rollback undid included: new messages' ids follow them.
	issued int
}

// load replays the game from the messages in force: every message record,
// except those a rollback undid (recorded after the recovery point it
// returned to and before the rollback). The history keeps them; the game
// goes on from the boundary as it was there.
func load(tx *jobtx.Tx, g deliberation.Game) (*state, error) {
	recs, err := history.ReadAll(tx.Dir)
	if err != nil {
		return nil, fmt.Errorf("deliberation: read history: %w", err)
	}
	st := &state{recs: recs, lastMessage: -1}
	var at []int               // the record index of each message in force
	points := map[string]int{} // checkpoint id -> index of its recovery point record
	checkpoint := -1           // where the current checkpoint's messages end
	for i := range recs {
		r := &recs[i]
		if id, _, ok := r.Checkpoint(); ok {
			if r.Type == history.TypeRecoveryPoint {
				points[id], checkpoint = i, i
				continue
			}
			// A rollback: the messages after its point are undone.
			p, ok := points[id]
			if !ok {
				return nil, fmt.Errorf("deliberation: record %d rolls back to %s, which has no recovery point before it", r.Seq, id)
			}
			n := 0
			for n < len(at) && at[n] < p {
				n++
			}
			st.msgs, at = st.msgs[:n], at[:n]
			st.lastMessage, checkpoint = i, p
			continue
		}
		if r.Type != history.TypeMessage {
			continue
		}
		var m deliberation.Message
		if err := json.Unmarshal(r.Message, &m); err != nil {
			return nil, fmt.Errorf("deliberation: message record %d: %w", r.Seq, err)
		}
		st.msgs, at = append(st.msgs, m), append(at, i)
		st.lastMessage = i
		st.issued++
	}
	for k := range at {
		if at[k] > checkpoint {
			st.sinceCheckpoint = st.msgs[k:]
			break
		}
	}
	e := env(tx, st.msgs)
	e.Issued = st.issued
	sess, err := g.Load(e)
	if err != nil {
		return nil, err
	}
	st.sess = sess
	return st, nil
}

// marks are the game's transitions that msgs make after the committed
// messages, and the safe boundary the step ends on, if any: the last one
// among msgs, or among the messages committed since the job's checkpoint
// without one (a steward's input ended a conversation: its transitions
// are logged now too, by the engine that records the point).
func (e *Effect) marks(tx *jobtx.Tx, st *state, msgs []deliberation.Message) ([]workflow.Mark, *workflow.Point, error) {
	mk, ok := st.sess.(deliberation.Marker)
	if !ok {
		return nil, nil, nil
	}
	var all []deliberation.Mark
	since := st.sinceCheckpoint
	if slices.ContainsFunc(since, func(m deliberation.Message) bool { return mk.Boundary(m) != "" }) {
		prev, err := e.Game.Load(env(tx, st.msgs[:len(st.msgs)-len(since)]))
		if err != nil {
			return nil, nil, err
		}
		if pm, ok := prev.(deliberation.Marker); ok {
			ms, err := pm.Marks(since)
			if err != nil {
				return nil, nil, err
			}
			all = append(all, ms...)
		}
	}
	ms, err := mk.Marks(msgs)
	if err != nil {
		return nil, nil, err
	}
	all = append(all, ms...)
	var out []workflow.Mark
	var names []string
	for _, m := range all {
		out = append(out, workflow.Mark{Game: e.Game.Name(), From: m.From, To: m.To, Event: m.Event, Actor: m.Actor})
		if m.Boundary != "" {
			names = append(names, m.Boundary)
		}
	}
	if len(names) == 0 {
		return out, nil, nil
	}
	last := names[len(names)-1]
	return out, &workflow.Point{Name: last, Description: fmt.Sprintf("the %s resumes after %s", e.Game.Name(), strings.Join(names, ", "))}, nil
}

// env is what a game loads from: the job's configuration and msgs.
func env(tx *jobtx.Tx, msgs []deliberation.Message) deliberation.Env {
	seed := int64(0)
	if tx.M.Seed != nil {
		seed = *tx.M.Seed
	}
	return deliberation.Env{Config: tx.M.Game, Seed: seed, Task: tx.M.TaskDescription, Messages: msgs,
		Workspace: tx.Store().Workspace(tx.ID), Dir: tx.Dir, Now: func() time.Time { return tx.Now().UTC() }}
}

// records turns messages into history records; file changes they carry
// are written to the workspace (idempotent: the whole new content).
func records(tx *jobtx.Tx, phase string, issued int, msgs []deliberation.Message) ([]*history.Record, error) {
	var out []*history.Record
	for i := range msgs {
		m := &msgs[i]
		// The orchestrator stamps what the game left to it.
		if m.ID == "" {
			m.ID = deliberation.MessageID(issued + i + 1)
		}
		if m.Timestamp == "" {
			m.Timestamp = tx.Now().UTC().Format(time.RFC3339)
		}
		if err := writeFile(tx, *m); err != nil {
			return nil, err
		}
		logSkipped(tx, m)
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		b = []byte(tx.Redact(string(b)))
		if !json.Valid(b) {
			return nil, fmt.Errorf("deliberation: message %s is not valid JSON after redaction", m.ID)
		}
		role := m.From
		if role == "" {
			role = "SYSTEM"
		}
		out = append(out, &history.Record{Type: history.TypeMessage, Phase: phase, Role: role, Message: b})
	}
	return out, nil
}

// logSkipped logs a skipped turn (seed 004 §7.2): who was to speak and
// why the turn failed or came back empty. The message itself records it.
func logSkipped(tx *jobtx.Tx, m *deliberation.Message) {
	if m.Type != deliberation.Skipped {
		return
	}
	who := m.From
	for _, k := range []string{"party", "participant", "member"} {
		if p, ok := m.Content[k].(string); ok && p != "" {
			who = p
			break
		}
	}
	reason, _ := m.Content["reason"].(string)
	tx.LogCode(codes.TurnSkipped, who, 0, fmt.Sprintf("turn of %s skipped (message %s): %s", who, m.ID, reason))
}

func writeFile(tx *jobtx.Tx, m deliberation.Message) error {
	fw, ok := m.Content[deliberation.FileWriteKey].(map[string]any)
	if !ok {
		return nil
	}
	rel, _ := fw["path"].(string)
	content, _ := fw["content"].(string)
	p, _, err := pathguard.Resolve(tx.Store().Workspace(tx.ID), rel)
	if err != nil {
		return fmt.Errorf("deliberation: message %s writes %q: %w", m.ID, rel, err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(p, []byte(content), 0o600)
}

// files writes the session's materialised files into the job folder.
func files(tx *jobtx.Tx, sess deliberation.Session) error {
	fs, err := sess.Files()
	if err != nil {
		return err
	}
	names := make([]string, 0, len(fs))
	for n := range fs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p, _, err := pathguard.Resolve(tx.Dir, n)
		if err != nil {
			return fmt.Errorf("deliberation: file %q: %w", n, err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := atomicfile.WriteFile(p, fs[n], 0o600); err != nil {
			return err
		}
	}
	return nil
}

// TurnKey names a turn stably: the same turn of the same step (asked
// again after a restart or a human's reply) has the same key.
func TurnKey(step int, t deliberation.Turn) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%d\x00%s\x00%s\x00%s\x00%s", step, t.Participant, t.Role, t.Kind, t.Prompt)))
	return "turn-" + hex.EncodeToString(h[:10])
}

// answered are the turn results recorded since the last message: turns of
// the current step that already have an answer (the step waited for a
// human, or stopped) and must not be asked again.
func (st *state) answered() (map[string]*history.Record, []int) {
	intents := map[int]*history.Record{}
	done := map[string]*history.Record{}
	for i := st.lastMessage + 1; i < len(st.recs); i++ {
		r := &st.recs[i]
		switch r.Type {
		case history.TypeIntent:
			if r.Interaction != nil {
				intents[*r.Interaction] = r
			}
		case history.TypeResponse:
			if r.Interaction == nil {
				continue
			}
			in := intents[*r.Interaction]
			delete(intents, *r.Interaction)
			if in == nil || in.Request == nil || r.Response == nil || r.Response.ErrorCode == codes.AgentInterrupted || r.Response.ErrorCode == codes.AgentCanceled {
				continue
			}
			if k, _ := in.Request.Metadata[history.MetaTurnKey].(string); k != "" {
				done[k] = r
			}
		}
	}
	var dangling []int
	for n, in := range intents {
		if in.Request != nil {
			if k, _ := in.Request.Metadata[history.MetaTurnKey].(string); k != "" {
				dangling = append(dangling, n)
			}
		}
	}
	sort.Ints(dangling)
	return done, dangling
}

// resultOf reads a recorded turn response back as a result.
func resultOf(t deliberation.Turn, r *history.Record) deliberation.Result {
	res := deliberation.Result{Turn: t}
	if r.Response.Status != history.StatusSuccess {
		res.Error = r.Response.ErrorCode + ": " + r.Response.Error
		res.Late = r.Response.ErrorCode == codes.TurnLate
		return res
	}
	obj, err := response.Extract([]byte(r.Response.RawResponse))
	if err != nil {
		res.Error = err.Error()
		return res
	}
	response.DropNulls(obj)
	res.Answer = obj
	return res
}

// Prepare decides the step.
func (e *Effect) Prepare(tx *jobtx.Tx, phase string) (*workflow.Prep, error) {
	st, err := load(tx, e.Game)
	if err != nil {
		return &workflow.Prep{Fail: &workflow.Failure{Code: codes.GameFailed, Reason: err.Error()}}, nil
	}
	// Every role the configuration names must have an agent, before any
	// turn (CheckConfig, logist validate's, says the same).
	if err := deliberation.CheckRoles(st.sess, agentNames(tx)); err != nil {
		return &workflow.Prep{Fail: &workflow.Failure{Code: codes.GameRole, Reason: err.Error()}}, nil
	}
	if err := files(tx, st.sess); err != nil {
		return nil, err
	}
	step, err := st.sess.Next()
	if err != nil {
		return &workflow.Prep{Fail: &workflow.Failure{Code: codes.GameFailed, Reason: err.Error()}}, nil
	}
	prep := &workflow.Prep{State: st.sess.State()}
	if len(step.Emit) > 0 {
		if prep.Marks, prep.Point, err = e.marks(tx, st, step.Emit); err != nil {
			return &workflow.Prep{Fail: &workflow.Failure{Code: codes.GameFailed, Reason: err.Error()}}, nil
		}
		recs, err := records(tx, phase, st.issued, step.Emit)
		if err != nil {
			return nil, err
		}
		prep.Records, prep.Skip, prep.State = recs, workflow.OutcomeContinue, e.stateAfter(tx, st, step.Emit)
		return prep, nil
	}
	if prep.Marks, prep.Point, err = e.marks(tx, st, nil); err != nil {
		return &workflow.Prep{Fail: &workflow.Failure{Code: codes.GameFailed, Reason: err.Error()}}, nil
	}
	if step.Wait != "" {
		prep.Wait = step.Wait
		return prep, nil
	}
	if step.Done {
		prep.Skip = workflow.ActionCompleted
		prep.Reason = "the " + e.Game.Name() + " is over"
		if step.Outcome != "" {
			prep.Reason += ": " + step.Outcome
		}
		return prep, nil
	}
	if len(step.Turns) == 0 {
		return &workflow.Prep{Fail: &workflow.Failure{Code: codes.GameFailed, Reason: "the game has nothing to do and is not done"}}, nil
	}
	done, dangling := st.answered()
	prep.Abandon = dangling
	var results []deliberation.Result
	var readOnly []string
	if p, ok := st.sess.(deliberation.Protector); ok {
		readOnly = p.Protected()
	}
	for _, t := range step.Turns {
		if _, ok := tx.M.Agents[t.Role]; !ok {
			return &workflow.Prep{Fail: &workflow.Failure{Code: codes.GameRole, Reason: fmt.Sprintf("participant %s is played by role %q, which has no agent in the manifest", t.Participant, t.Role)}}, nil
		}
		key := TurnKey(len(st.msgs), t)
		if r, ok := done[key]; ok {
			results = append(results, resultOf(t, r))
			continue
		}
		prep.Turns = append(prep.Turns, workflow.Turn{Key: key, Role: t.Role, Schema: t.Schema, Prompt: t.Prompt, Background: t.Background, ReadOnly: readOnly})
	}
	if len(prep.Turns) == 0 && len(prep.Abandon) == 0 {
		// Every turn was answered before a stop: apply them now.
		msgs, err := st.sess.Apply(results)
		if err != nil {
			return &workflow.Prep{Fail: &workflow.Failure{Code: codes.GameFailed, Reason: err.Error()}}, nil
		}
		if prep.Marks, prep.Point, err = e.marks(tx, st, msgs); err != nil {
			return &workflow.Prep{Fail: &workflow.Failure{Code: codes.GameFailed, Reason: err.Error()}}, nil
		}
		recs, err := records(tx, phase, st.issued, msgs)
		if err != nil {
			return nil, err
		}
		prep.Records, prep.Skip, prep.State = recs, workflow.OutcomeContinue, e.stateAfter(tx, st, msgs)
	}
	return prep, nil
}

// CheckConfig implements effect.Checker: the game loads from the
// configuration (and the files it names in dir) as a run's first step
// would, with no message yet.
func (e *Effect) CheckConfig(game json.RawMessage, seed int64, dir string, agents []string) error {
	sess, err := e.Game.Load(deliberation.Env{Config: game, Seed: seed, Dir: dir, Now: time.Now})
	if err != nil {
		return err
	}
	return deliberation.CheckRoles(sess, agents)
}

// agentNames are the names of the manifest's agents.
func agentNames(tx *jobtx.Tx) []string {
	return slices.Sorted(maps.Keys(tx.M.Agents))
}

// Finish is not used: a deliberation's phase is played in turns.
func (e *Effect) Finish(tx *jobtx.Tx, phase string, ans *response.Answer, obj map[string]any) (*workflow.Outcome, error) {
	return nil, errors.New("deliberation phases are played in turns")
}

// FinishTurns applies the step's results (the ones just played and the
// ones recorded before) and commits the messages the game makes of them.
func (e *Effect) FinishTurns(tx *jobtx.Tx, phase string, played []workflow.TurnResult) (*workflow.Outcome, error) {
	st, err := load(tx, e.Game)
	if err != nil {
		return &workflow.Outcome{Fail: &workflow.Failure{Code: codes.GameFailed, Reason: err.Error()}}, nil
	}
	step, err := st.sess.Next()
	if err != nil {
		return &workflow.Outcome{Fail: &workflow.Failure{Code: codes.GameFailed, Reason: err.Error()}}, nil
	}
	byKey := map[string]workflow.TurnResult{}
	for _, r := range played {
		byKey[r.Key] = r
	}
	done, _ := st.answered()
	var results []deliberation.Result
	for _, t := range step.Turns {
		key := TurnKey(len(st.msgs), t)
		if r, ok := byKey[key]; ok {
			results = append(results, deliberation.Result{Turn: t, Answer: r.Answer, Error: r.Error, Late: r.Late})
		} else if r, ok := done[key]; ok {
			results = append(results, resultOf(t, r))
		} else {
			results = append(results, deliberation.Result{Turn: t, Error: "the turn was not played"})
		}
	}
	msgs, err := st.sess.Apply(results)
	if err != nil {
		return &workflow.Outcome{Fail: &workflow.Failure{Code: codes.GameFailed, Reason: err.Error()}}, nil
	}
	marks, point, err := e.marks(tx, st, msgs)
	if err != nil {
		return &workflow.Outcome{Fail: &workflow.Failure{Code: codes.GameFailed, Reason: err.Error()}}, nil
	}
	recs, err := records(tx, phase, st.issued, msgs)
	if err != nil {
		return nil, err
	}
	return &workflow.Outcome{Name: workflow.OutcomeContinue, Records: recs, State: e.stateAfter(tx, st, msgs), Marks: marks, Point: point}, nil
}

// stateAfter is the game's state once msgs follow st's committed
// messages: what the job shows after a step that made them ("" if the
// game cannot load them, which the next step reports). The game's files
// are written for that state too.
func (e *Effect) stateAfter(tx *jobtx.Tx, st *state, msgs []deliberation.Message) string {
	all := append(append([]deliberation.Message{}, st.msgs...), msgs...)
	next, err := e.Game.Load(env(tx, all))
	if err != nil {
		return ""
	}
	_ = files(tx, next)
	return next.State()
}

// Decide applies a steward's input (logist pm, a human's decision) to the
// job's game: it returns the records of the messages it makes and the
// game's state after them (effect.Decider). The steward calls it while the
// job is in this effect's phase.
func (e *Effect) Decide(tx *jobtx.Tx, in deliberation.Input) ([]*history.Record, string, error) {
	st, err := load(tx, e.Game)
	if err != nil {
		return nil, "", err
	}
	if in.Time == "" {
		in.Time = tx.Now().UTC().Format(time.RFC3339Nano)
	}
	msgs, err := st.sess.Input(in)
	if err != nil {
		return nil, "", err
	}
	// A safe boundary among them gets its recovery point, and their
	// transitions their log lines, with the next step (a steward's command
	// takes no snapshot, and its process may not log where logistd does).
	recs, err := records(tx, tx.M.Phase(), st.issued, msgs)
	if err != nil {
		return nil, "", err
	}
	return recs, st.sess.State(), nil
}

// View is what participant may see of the job's game (effect.Viewer), for
// a person who plays it.
func (e *Effect) View(tx *jobtx.Tx, participant string) (*deliberation.View, error) {
	st, err := load(tx, e.Game)
	if err != nil {
		return nil, err
	}
	v, ok := st.sess.(deliberation.Viewer)
	if !ok {
		return nil, fmt.Errorf("the %s has no participant a person may play", e.Game.Name())
	}
	return v.View(participant)
}
