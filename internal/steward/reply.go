package steward

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/internal/effect"
	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/response"
)

// Reply files the answer of a role played by a human (provider "human")
// for the turn it was asked, validated exactly as an agent's answer would
// be, and lets the job go on.
func (s *Steward) Reply(id, role string, answer []byte) (*manifest.Manifest, error) {
	tx, err := jobtx.Begin(s.Env, id, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Close()
	m := tx.M
	if err := awaitingReply(id, m); err != nil {
		return nil, err
	}
	recs, err := history.ReadAll(tx.Dir)
	if err != nil {
		return nil, err
	}
	in := awaitedIntent(recs, role)
	if in == nil {
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: fmt.Sprintf("no turn of role %q is waiting for a reply", role)}
	}
	return s.fileReply(tx, id, in, answer, map[string]any{"role": role, "interaction": *in.Interaction}, "reply as "+role+" by "+s.User)
}

// awaitingReply refuses a job that waits for no human's reply.
func awaitingReply(id string, m *manifest.Manifest) error {
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.AwaitingReply {
		return &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "it is not waiting for a reply", Hint: HintFor(m, id)}
	}
	return nil
}

// fileReply files answer for the waiting turn in, validated exactly as an
// agent's answer would be, where the engine reads it, and lets the job go
// on; changes is the steward record's.
func (s *Steward) fileReply(tx *jobtx.Tx, id string, in *history.Record, answer []byte, changes map[string]any, reason string) (*manifest.Manifest, error) {
	meta := in.Request.Metadata
	if err := validateReply(response.In(tx.Store().Workspace(id), gitws.AnswerCheck(tx.M.IsGit(), id)), meta, answer); err != nil {
		return nil, &InvalidReplyError{Role: in.Role, Err: err}
	}
	p, err := agent.ReplyFile(tx.Dir, &agent.Request{Interaction: *in.Interaction, Metadata: meta})
	if err != nil {
		return nil, err
	}
	if err := atomicfile.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(p, answer, 0o600); err != nil {
		return nil, err
	}
	return s.goOn(tx, history.CommandReply, "REPLY", "as "+in.Role, changes, reason)
}

// goOn ends every steward command that answers a waiting job (a reply, a
// skipped turn, a decision, a player's input): the waiting code is
// cleared, the audit line, the signed steward record (changes) and the
// transition back to PENDING are recorded, and tx is committed.
func (s *Steward) goOn(tx *jobtx.Tx, cmd, audit, note string, changes map[string]any, reason string) (*manifest.Manifest, error) {
	m := tx.M
	m.Run.ErrorCode = ""
	m.Audit(tx.Now(), "Steward", audit, note, nil)
	if err := s.record(tx, cmd, "", "", changes); err != nil {
		return nil, err
	}
	if err := s.transition(tx, cmd, lifecycle.EvResume, lifecycle.Pending, "", reason); err != nil {
		return nil, err
	}
	return m, tx.Commit()
}

// InvalidReplyError is a reply that would fail an agent's validation.
type InvalidReplyError struct {
	Role string
	Err  error
}

func (e *InvalidReplyError) Error() string {
	return fmt.Sprintf("reply as %s is not a valid answer: %v", e.Role, e.Err)
}

func (e *InvalidReplyError) Unwrap() error { return e.Err }

// Awaiting are the turns that wait for a reply, one per role: the
// role's last intent without a response (what Reply answers), in the
// order of the history.
func Awaiting(recs []history.Record) []*history.Record {
	var out []*history.Record
	seen := map[string]bool{}
	for i := range recs {
		r := &recs[i]
		if r.Type != history.TypeIntent || seen[r.Role] {
			continue
		}
		seen[r.Role] = true
		if in := awaitedIntent(recs, r.Role); in != nil {
			out = append(out, in)
		}
	}
	return out
}

// awaitedIntent is the role's last intent without a response.
func awaitedIntent(recs []history.Record, role string) *history.Record {
	answered := map[int]bool{}
	for i := range recs {
		if recs[i].Type == history.TypeResponse && recs[i].Interaction != nil {
			answered[*recs[i].Interaction] = true
		}
	}
	for i := len(recs) - 1; i >= 0; i-- {
		r := &recs[i]
		if r.Type == history.TypeIntent && r.Role == role && r.Interaction != nil && r.Request != nil && !answered[*r.Interaction] {
			return r
		}
	}
	return nil
}

// validateReply holds a reply to what the engine holds the agent's answer
// to (response.Judge): a turn's own schema, or the base contract (plus the
// phase's schema for a COMPLETED answer) with its evidence in the job's
// workspace.
func validateReply(workspace response.Workspace, meta map[string]any, raw []byte) error {
	schema, _ := meta[history.MetaAnswerSchema].(string)
	turn, _ := meta[history.MetaTurnKey].(string)
	v := response.Judge(raw, response.Contract{Turn: turn != "", Schema: schema, Workspace: workspace})
	if v.Err != nil {
		return v.Err
	}
	return nil
}

// Decide applies the steward's decision to the job's deliberation (the
// Prime Minister's approve / veto / amend_and_approve) and lets it go on.
func (s *Steward) Decide(id string, in deliberation.Input) (*manifest.Manifest, error) {
	reason, _ := in.Content["reason"].(string)
	guidance, _ := in.Content["guidance"].(string)
	if err := CheckTexts(reason, guidance); err != nil {
		return nil, err
	}
	tx, err := jobtx.Begin(s.Env, id, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Close()
	m := tx.M
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.AwaitingSteward {
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "it is not waiting for a steward's decision", Hint: HintFor(m, id)}
	}
	if in.From == "" {
		in.From = s.User
	}
	if err := s.decide(tx, id, in, nil); err != nil {
		return nil, err
	}
	return s.goOn(tx, history.CommandDecide, "DECIDE", in.Kind, map[string]any{"kind": in.Kind, "content": in.Content}, in.Kind+" by "+s.User)
}

// decide gives input in to the deliberation of job id's phase (its
// effect.Decider), and appends the records it amounts to and sets the
// workflow's state after them. accepted, if set, runs once the game has
// accepted in, before its records (a player's control closes its
// waiting turn there). A malformed input is refused whatever the job's
// state (exit 1); any other refusal is out of order (exit 2).
func (s *Steward) decide(tx *jobtx.Tx, id string, in deliberation.Input, accepted func() error) error {
	m := tx.M
	eff, wf, err := s.phaseEffect(id, m)
	if err != nil {
		return &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: err.Error()}
	}
	d, ok := eff.(effect.Decider)
	if !ok {
		return &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: fmt.Sprintf("job %s does not play a deliberation (workflow %s)", id, wf.Name)}
	}
	recs, state, err := d.Decide(tx, in)
	if errors.Is(err, deliberation.ErrInvalidInput) {
		return fmt.Errorf("job %s: %w", id, err) // malformed, whatever the job's state
	} else if err != nil {
		return &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: err.Error()}
	}
	if accepted != nil {
		if err := accepted(); err != nil {
			return err
		}
	}
	for _, r := range recs {
		if err := tx.Append(r); err != nil {
			return err
		}
	}
	if state != "" {
		m.Run.WorkflowState = state
	}
	return nil
}
