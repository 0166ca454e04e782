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
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.AwaitingReply {
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "it is not waiting for a reply", Hint: hintFor(m.Status, id)}
	}
	recs, err := history.ReadAll(tx.Dir)
	if err != nil {
		return nil, err
	}
	in := awaitedIntent(recs, role)
	if in == nil {
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: fmt.Sprintf("no turn of role %q is waiting for a reply", role)}
	}
	meta := in.Request.Metadata
	if err := validateReply(tx.Store().Workspace(id), meta, answer); err != nil {
		return nil, &InvalidReplyError{Role: role, Err: err}
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
	m.Run.ErrorCode = ""
	m.Audit(tx.Now(), "Steward", "REPLY", "as "+role, nil)
	if err := s.record(tx, history.CommandReply, "", "", map[string]any{"role": role, "interaction": *in.Interaction}); err != nil {
		return nil, err
	}
	if err := s.transition(tx, history.CommandReply, lifecycle.EvResume, lifecycle.Pending, "", "reply as "+role+" by "+s.User); err != nil {
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
func validateReply(workspace string, meta map[string]any, raw []byte) error {
	schema, _ := meta[history.MetaAnswerSchema].(string)
	turn, _ := meta[history.MetaTurnKey].(string)
	v := response.Judge(raw, response.Contract{Turn: turn != "", Schema: schema, Workspace: response.Dir(workspace)})
	if v.Err != nil {
		return v.Err
	}
	return nil
}

// Decide applies the steward's decision to the job's deliberation (the
// Prime Minister's approve / veto / amend_and_approve) and lets it go on.
func (s *Steward) Decide(id string, in deliberation.Input) (*manifest.Manifest, error) {
	tx, err := jobtx.Begin(s.Env, id, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Close()
	m := tx.M
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.AwaitingSteward {
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "it is not waiting for a steward's decision", Hint: hintFor(m.Status, id)}
	}
	if in.From == "" {
		in.From = s.User
	}
	eff, wf, err := s.phaseEffect(id, m)
	if err != nil {
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: err.Error()}
	}
	d, ok := eff.(effect.Decider)
	if !ok {
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: fmt.Sprintf("job %s does not play a deliberation (workflow %s)", id, wf.Name)}
	}
	recs, state, err := d.Decide(tx, in)
	if errors.Is(err, deliberation.ErrInvalidInput) {
		return nil, fmt.Errorf("job %s: %w", id, err) // malformed, whatever the job's state
	} else if err != nil {
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: err.Error()}
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
	m.Audit(tx.Now(), "Steward", "DECIDE", in.Kind, nil)
	if err := s.record(tx, history.CommandDecide, "", "", map[string]any{"kind": in.Kind, "content": in.Content}); err != nil {
		return nil, err
	}
	if err := s.transition(tx, history.CommandDecide, lifecycle.EvResume, lifecycle.Pending, "", in.Kind+" by "+s.User); err != nil {
		return nil, err
	}
	return m, tx.Commit()
}
