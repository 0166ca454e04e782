package phases

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/protocol"
	"github.com/logist/logist/internal/workflow"
)

// session is the protocol state of one job for one engine step.
type session struct {
	tx      *jobtx.Tx
	phase   string
	pol     protocol.Policy
	store   protocol.Store
	keys    *protocol.Keys
	led     *protocol.Ledger
	recs    []history.Record
	initial protocol.State
	// out are the events made in this step, in order.
	out []*history.Record
}

// open replays the job's protocol state. A trace whose last event does not
// verify (a signature that is not the role's, a broken link) stops the
// session: seed 003 marks it failed and stops progression.
func open(tx *jobtx.Tx, phase string) (*session, *workflow.Failure, error) {
	pol, err := Policy(tx.M)
	if err != nil {
		return nil, nil, err
	}
	recs, err := history.ReadAll(tx.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("protocol: read history: %w", err)
	}
	store := protocol.NewStore(tx.Dir)
	led, err := protocol.Replay(recs, &store)
	if err != nil {
		return nil, nil, fmt.Errorf("protocol: replay: %w", err)
	}
	keys, err := protocol.LoadOrCreateKeys(tx.Dir, protocol.Roles)
	if err != nil {
		return nil, nil, err
	}
	s := &session{tx: tx, phase: phase, pol: pol, store: store, keys: keys, led: led, recs: recs, initial: led.State}
	switch led.State {
	case protocol.Failed:
		return s, &workflow.Failure{Code: codes.ProtocolFailed, Reason: "the protocol session has failed; it cannot go on (roll back or start a new job)"}, nil
	case protocol.Aborted:
		return s, &workflow.Failure{Code: codes.ProtocolFailed, Reason: "the protocol session was aborted by an operator"}, nil
	}
	if err := led.ValidateLast(); err != nil {
		reason := "integrity violation: " + err.Error()
		class := protocol.FailSignatureInvalid
		var ge *protocol.GuardError
		if errors.As(err, &ge) {
			class = ge.Class
		}
		if r, err := s.event(protocol.SessionFailed, protocol.System, "", map[string]any{"reason": reason, "class": class}); err == nil {
			s.out = append(s.out, r)
		}
		return s, &workflow.Failure{Code: codes.ProtocolFailed, Reason: reason}, nil
	}
	if led.State == protocol.Initialized && len(led.Events) == 0 {
		body := protocol.SessionBody(keys, tx.M.TaskDescription, pol)
		r, err := s.event(protocol.SessionInitialized, protocol.System, "", body)
		if err != nil {
			return nil, nil, fmt.Errorf("protocol: initialise session: %w", err)
		}
		s.out = append(s.out, r)
	}
	return s, nil, nil
}

// Policy is the job's protocol policy with defaults.
func Policy(m *manifest.Manifest) (protocol.Policy, error) { return protocol.DecodePolicy(m.Protocol) }

// event makes, checks and applies one event; it returns its record.
func (s *session) event(typ, role, subject string, body map[string]any) (*history.Record, error) {
	body = redact(body, s.tx.Redact).(map[string]any)
	e, err := protocol.NewEvent(typ, role, subject, body, s.led.Head, s.keys)
	if err != nil {
		return nil, err
	}
	if err := s.led.Check(e, s.pol); err != nil {
		return nil, err
	}
	s.led.Apply(e)
	return &history.Record{Type: history.TypeEvent, Phase: s.phase, Role: role, Event: e}, nil
}

// emit is event for a list being built.
func (s *session) emit(recs *[]*history.Record, typ, role, subject string, body map[string]any) error {
	r, err := s.event(typ, role, subject, body)
	if err != nil {
		return err
	}
	*recs = append(*recs, r)
	return nil
}

// redact applies the job's secret redaction to every string of a body
// before it is hashed and signed (the history layer cannot rewrite event
// bodies afterwards without breaking their signatures).
func redact(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, m := range x {
			out[k] = redact(m, f)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, m := range x {
			out[i] = redact(m, f)
		}
		return out
	case []string:
		out := make([]any, len(x))
		for i, m := range x {
			out[i] = f(m)
		}
		return out
	}
	return v
}

// items is obj[key] as a list of objects (the schema already checked it).
func items(obj map[string]any, key string) []map[string]any {
	raw, _ := obj[key].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, r := range raw {
		if m, ok := r.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// pick copies the named members that are present.
func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// excerpt is the start of an artifact, for an agent's context.
func (s *session) excerpt(id string, n int) string {
	b, err := s.store.Get(id)
	if err != nil {
		return "(artifact " + id + " is missing)"
	}
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// jsonLine renders v compactly for a context line.
func jsonLine(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
