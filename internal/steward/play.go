package steward

import (
	"encoding/json"
	"fmt"
	"strings"

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
	// Controls are the moves (Move.Control) open to the participant now,
	// in the order a person is offered them (playControls): the CLI's
	// hint and the console's play page offer these and no other.
	Controls []string `json:"controls"`
}

// The controls of a person playing a participant, besides the game's own
// inputs (deliberation.View.Inputs, "end_conversation").
const (
	// ControlAnswer answers the waiting turn (its schema's JSON).
	ControlAnswer = "answer"
	// ControlSkip skips it.
	ControlSkip = "skip"
)

// Move is one move of a person playing a participant: a control of
// PlayView.Controls, and for ControlAnswer the answer's JSON.
type Move struct {
	Control string
	Answer  []byte
}

// Check is the one rule for a move's free text, whoever sends it (logist
// play --vote --reason, the console's play form and API): an answer's
// reason (a vote's public reason) is held to the game's limit by
// CheckVoteReason before the job is read, so a reason the vote's schema
// would refuse is refused up front, naming the field, its length and the
// limit. An answer that is no object, or whose reason is no string, is
// left to that schema.
func (mv Move) Check() error {
	if mv.Control != ControlAnswer {
		return nil
	}
	var a struct {
		Reason *string `json:"reason"`
	}
	if json.Unmarshal(mv.Answer, &a) != nil || a.Reason == nil {
		return nil
	}
	return CheckVoteReason(*a.Reason)
}

// News is what a person is told of move mv made by participant.
func (mv Move) News(id, participant string) string {
	switch mv.Control {
	case ControlAnswer:
		return fmt.Sprintf("%s's move filed; job %s goes on", participant, id)
	case ControlSkip:
		return fmt.Sprintf("%s skips the turn; job %s goes on", participant, id)
	case "end_conversation":
		return fmt.Sprintf("%s ended the private conversation; job %s goes on", participant, id)
	}
	return fmt.Sprintf("%s chose %s; job %s goes on", participant, mv.Control, id)
}

// playControls are the moves open to a participant: none unless its turn
// waits (every control acts on that turn); then an answer, a skip, and
// the inputs its game accepts from it now.
func playControls(v *deliberation.View, turn *PlayTurn) []string {
	if turn == nil {
		return []string{}
	}
	return append([]string{ControlAnswer, ControlSkip}, v.Inputs...)
}

// PlayTurn is a turn waiting for a human's answer.
type PlayTurn struct {
	Interaction int `json:"interaction"`
	// Schema is the answer's schema (a file in schemas/).
	Schema string `json:"schema"`
	// Prompt is what the participant is asked, built from its view only.
	Prompt string `json:"prompt"`
}

// Instruction is what the turn asks: the prompt's last section (the rest
// is the participant's view, shown apart), or with whole the prompt.
func (t *PlayTurn) Instruction(whole bool) string {
	if i := strings.LastIndex(t.Prompt, "\n## "); i >= 0 && !whole {
		return t.Prompt[i+1:]
	}
	return t.Prompt
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
	pv.Controls = playControls(v, pv.Turn)
	return pv, nil
}

// playerTurn is participant's view and its turn waiting for a reply (nil
// if none), for a job whose phase plays a game.
func (s *Steward) playerTurn(tx *jobtx.Tx, id, participant string) (*deliberation.View, *history.Record, error) {
	m := tx.M
	if err := s.playsGame(id, m); err != nil {
		return nil, nil, err
	}
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

// playsGame refuses, out of order, a job whose workflow has no phase
// whose effect shows a party's view (effect.Viewer): it plays no game at
// any status, so it is not a matter of waiting (a PENDING job's "in no
// phase", a running one's "not waiting for a reply" misled). The command
// line is fine: the job is not of the kind logist play acts on, as a
// schedule command on a job that is no schedule. A workflow that does
// not resolve is phaseEffect's to report.
func (s *Steward) playsGame(id string, m *manifest.Manifest) error {
	wf, err := m.ResolveWorkflow()
	if err != nil {
		return nil
	}
	for _, ph := range wf.Phases {
		if _, ok := s.Effects[ph.Effect].(effect.Viewer); ok {
			return nil
		}
	}
	return &jobtx.OutOfOrderError{ID: id, Status: m.Status,
		Want: fmt.Sprintf("it plays no game: its workflow %s has no game with parties to play", wf.Name),
		Hint: "logist play is for the human players of a game"}
}

// waitingTurn is participant's view and its waiting turn, which the
// controls act on: a job that does not wait for that participant's reply
// is out of order.
func (s *Steward) waitingTurn(tx *jobtx.Tx, id, participant string) (*deliberation.View, *history.Record, error) {
	m := tx.M
	if err := s.playsGame(id, m); err != nil {
		return nil, nil, err
	}
	if err := awaitingReply(id, m); err != nil {
		return nil, nil, err
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

// Play makes participant's move mv at its waiting turn: the one entry
// point of logist play's moves and the console's (answer, skip, or one of
// the game's inputs such as end_conversation).
func (s *Steward) Play(id, participant string, mv Move) (*manifest.Manifest, error) {
	if err := mv.Check(); err != nil {
		return nil, err
	}
	switch mv.Control {
	case ControlAnswer:
		return s.answerTurn(id, participant, mv.Answer)
	case ControlSkip:
		return s.Skip(id, participant)
	case "":
		return nil, fmt.Errorf("job %s: %w: no move", id, deliberation.ErrInvalidInput)
	}
	return s.PlayerInput(id, participant, deliberation.Input{Kind: mv.Control})
}

// answerTurn files participant's answer to its waiting turn, as Reply
// files a role's.
func (s *Steward) answerTurn(id, participant string, answer []byte) (*manifest.Manifest, error) {
	tx, err := jobtx.Begin(s.Env, id, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Close()
	v, in, err := s.waitingTurn(tx, id, participant)
	if err != nil {
		return nil, err
	}
	return s.fileReply(tx, id, in, answer, map[string]any{"role": v.Role, "participant": participant, "interaction": *in.Interaction},
		"reply as "+v.Role+" by "+s.User)
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
	v, in, err := s.waitingTurn(tx, id, participant)
	if err != nil {
		return nil, err
	}
	if err := closeTurn(tx, in, codes.TurnPassed, fmt.Sprintf("%s skipped the turn (logist play --skip by %s)", participant, s.User)); err != nil {
		return nil, err
	}
	return s.goOn(tx, history.CommandReply, "REPLY", "as "+v.Role+": turn skipped",
		map[string]any{"role": v.Role, "participant": participant, "interaction": *in.Interaction, "skipped": true},
		"turn of "+participant+" skipped by "+s.User)
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
	v, turn, err := s.waitingTurn(tx, id, participant)
	if err != nil {
		return nil, err
	}
	in.From = participant
	closeIt := func() error {
		return closeTurn(tx, turn, codes.AgentCanceled, fmt.Sprintf("%s chose %s instead of answering", participant, in.Kind))
	}
	if err := s.decide(tx, id, in, closeIt); err != nil {
		return nil, err
	}
	return s.goOn(tx, history.CommandDecide, "DECIDE", in.Kind+" as "+participant,
		map[string]any{"kind": in.Kind, "content": in.Content, "participant": participant, "role": v.Role},
		in.Kind+" by "+participant+" ("+s.User+")")
}
