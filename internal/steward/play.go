package steward

import (
	"errors"
	"fmt"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/internal/effect"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// A person playing a game's party (provider "human", logist play): what
// that party may see, and the controls seed 004 gives a human player —
// answer the turn (Reply), skip it, end its private conversation early.
// Each control is a signed steward record, like logist reply.

// PlayView is what a person playing a participant is shown.
type PlayView struct {
	*deliberation.View
	Status lifecycle.Status `json:"status"`
	// Turn is the participant's turn that waits for its answer (nil when
	// it is not its turn).
	Turn *PlayTurn `json:"turn,omitempty"`
}

// PlayTurn is a turn waiting for a human's answer.
type PlayTurn struct {
	Interaction int `json:"interaction"`
	// Schema is the answer's schema (a file in schemas/).
	Schema string `json:"schema"`
	// Prompt is what the participant is asked, built from its view only.
	Prompt string `json:"prompt"`
}

// PlayView is participant's view of job id's game and its waiting turn.
func (s *Steward) PlayView(id, participant string) (*PlayView, error) {
	tx, err := jobtx.Begin(s.Env, id, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Close()
	v, in, err := s.playerTurn(tx, id, participant)
	if err != nil {
		return nil, err
	}
	pv := &PlayView{View: v, Status: tx.M.Status}
	if in != nil {
		req, err := tx.Reveal(in)
		if err != nil {
			return nil, err
		}
		schema, _ := req.Request.Metadata[history.MetaAnswerSchema].(string)
		pv.Turn = &PlayTurn{Interaction: *in.Interaction, Schema: schema, Prompt: req.Request.Prompt}
	}
	return pv, nil
}

// playerTurn is participant's view and its turn waiting for a reply (nil
// if none), for a job whose phase plays a game.
func (s *Steward) playerTurn(tx *jobtx.Tx, id, participant string) (*deliberation.View, *history.Record, error) {
	m := tx.M
	eff, wf, err := s.phaseEffect(id, m)
	if err != nil {
		return nil, nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: err.Error()}
	}
	vw, ok := eff.(effect.Viewer)
	if !ok {
		return nil, nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: fmt.Sprintf("job %s plays no game with parties (workflow %s, phase %s)", id, wf.Name, m.Phase())}
	}
	v, err := vw.View(tx, participant)
	if err != nil {
		return nil, nil, fmt.Errorf("job %s: %w", id, err)
	}
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.AwaitingReply {
		return v, nil, nil
	}
	recs, err := history.ReadAll(tx.Dir)
	if err != nil {
		return nil, nil, err
	}
	return v, awaitedIntent(recs, v.Role), nil
}

// waitingTurn is participant's view and its waiting turn, which the
// controls act on: a job that does not wait for that participant's reply
// is out of order.
func (s *Steward) waitingTurn(tx *jobtx.Tx, id, participant string) (*deliberation.View, *history.Record, error) {
	m := tx.M
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.AwaitingReply {
		return nil, nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "it is not waiting for a reply", Hint: hintFor(m.Status, id)}
	}
	v, in, err := s.playerTurn(tx, id, participant)
	if err != nil {
		return nil, nil, err
	}
	if in == nil {
		return nil, nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: fmt.Sprintf("it is not %s's turn (played by role %s)", participant, v.Role)}
	}
	return v, in, nil
}

// closeTurn records the outcome of a waiting turn a human control ended
// without an answer: code says how (TURN_PASSED, the game records a
// skip; AGENT_CANCELED, the game never reads it).
func closeTurn(tx *jobtx.Tx, in *history.Record, code, msg string) error {
	n := *in.Interaction
	return tx.Append(&history.Record{Type: history.TypeResponse, Interaction: &n, Phase: in.Phase, Role: in.Role,
		Attempt: in.Attempt, StateBefore: string(tx.M.Status),
		Response: &history.Response{Status: history.StatusError, EvidenceFiles: []string{}, ErrorCode: code, Error: msg}})
}

// Skip skips participant's waiting turn (seed 004: "UI may allow turn
// skipping"): the game records it as SKIPPED, which counts as the
// participant's slot, and goes on.
func (s *Steward) Skip(id, participant string) (*manifest.Manifest, error) {
	tx, err := jobtx.Begin(s.Env, id, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Close()
	m := tx.M
	v, in, err := s.waitingTurn(tx, id, participant)
	if err != nil {
		return nil, err
	}
	if err := closeTurn(tx, in, codes.TurnPassed, fmt.Sprintf("%s skipped the turn (logist play --skip by %s)", participant, s.User)); err != nil {
		return nil, err
	}
	m.Run.ErrorCode = ""
	m.Audit(tx.Now(), "Steward", "REPLY", "as "+v.Role+": turn skipped", nil)
	if err := s.record(tx, history.CommandReply, "", "", map[string]any{"role": v.Role, "participant": participant, "interaction": *in.Interaction, "skipped": true}); err != nil {
		return nil, err
	}
	if err := s.transition(tx, history.CommandReply, lifecycle.EvResume, lifecycle.Pending, "", "turn of "+participant+" skipped by "+s.User); err != nil {
		return nil, err
	}
	return m, tx.Commit()
}

// PlayerInput applies a control of the person playing participant to the
// game at its waiting turn (in.Kind is the game's: a negotiation's
// "end_conversation"); the game decides whether it is acceptable now. The
// waiting turn is closed unanswered and the job goes on.
func (s *Steward) PlayerInput(id, participant string, in deliberation.Input) (*manifest.Manifest, error) {
	tx, err := jobtx.Begin(s.Env, id, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Close()
	m := tx.M
	v, turn, err := s.waitingTurn(tx, id, participant)
	if err != nil {
		return nil, err
	}
	eff, _, _ := s.phaseEffect(id, m)
	d, ok := eff.(effect.Decider)
	if !ok {
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "its game takes no input from a player"}
	}
	in.From = participant
	recs, state, err := d.Decide(tx, in)
	if errors.Is(err, deliberation.ErrInvalidInput) {
		return nil, fmt.Errorf("job %s: %w", id, err)
	} else if err != nil {
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: err.Error()}
	}
	if err := closeTurn(tx, turn, codes.AgentCanceled, fmt.Sprintf("%s chose %s instead of answering", participant, in.Kind)); err != nil {
		return nil, err
	}
	for _, r := range recs {
		if err := tx.Append(r); err != nil {
			return nil, err
		}
	}
	if state != "" {
		m.Run.WorkflowState = state
	}
	m.Run.ErrorCode = ""
	m.Audit(tx.Now(), "Steward", "DECIDE", in.Kind+" as "+participant, nil)
	if err := s.record(tx, history.CommandDecide, "", "", map[string]any{"kind": in.Kind, "content": in.Content, "participant": participant, "role": v.Role}); err != nil {
		return nil, err
	}
	if err := s.transition(tx, history.CommandDecide, lifecycle.EvResume, lifecycle.Pending, "", in.Kind+" by "+participant+" ("+s.User+")"); err != nil {
		return nil, err
	}
	return m, tx.Commit()
}
