package protocol

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"

	"github.com/logist/logist/internal/history"
)

// NewEvent builds an event chained to prev (the job's previous event hash,
// history.GenesisHash for the first) and, for the mandatory types, signed
// with role's key. The body is stored in its plain JSON form (see
// CanonicalJSON), so the event in memory is exactly what history.jsonl
// will give back; a nil body becomes {}.
func NewEvent(typ, role, subject string, body map[string]any, prev string, keys *Keys) (*history.ProtocolEvent, error) {
	if body == nil {
		body = map[string]any{}
	}
	plain, err := plainBody(body)
	if err != nil {
		return nil, err
	}
	e := &history.ProtocolEvent{Type: typ, Role: role, Subject: subject, Body: plain, PrevEvent: prev}
	if e.Hash, err = hashEvent(e); err != nil {
		return nil, err
	}
	if Mandatory[typ] {
		if keys == nil {
			return nil, fmt.Errorf("%s must be signed: no keys", typ)
		}
		if e.KeyID, e.Sig, err = keys.Sign(role, e.Hash); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Hash is the event's hash: hex sha256 of the canonical JSON of
// {type, role, subject, body, prev_event}. It is "" for a body that cannot
// be encoded (NaN), which never matches a stored hash.
func Hash(e *history.ProtocolEvent) string {
	h, _ := hashEvent(e)
	return h
}

func hashEvent(e *history.ProtocolEvent) (string, error) {
	b, err := CanonicalJSON(map[string]any{
		"type": e.Type, "role": e.Role, "subject": e.Subject, "body": e.Body, "prev_event": e.PrevEvent,
	})
	if err != nil {
		return "", err
	}
	return sha256Hex(b), nil
}

// VerifyEvent checks an event on its own: its hash is the hash of its
// content, and a mandatory type carries a valid signature by its role's key
// (pub: role -> "ed25519:<base64>", from session_initialized). A signature
// on a type that needs none is checked too: a bad one is never harmless.
// It returns a *GuardError (guard "chain").
func VerifyEvent(e *history.ProtocolEvent, pub map[string]string) error {
	if g := verifyEvent(e, pub); g != nil {
		return g
	}
	return nil
}

func verifyEvent(e *history.ProtocolEvent, pub map[string]string) *GuardError {
	if h := Hash(e); h == "" || h != e.Hash {
		return &GuardError{Class: FailHashMismatch, Guard: GuardChain, Msg: fmt.Sprintf("%s: stored hash %.16s… is not the hash of its content", e.Type, e.Hash)}
	}
	if !Mandatory[e.Type] && e.Sig == "" && e.KeyID == "" {
		return nil
	}
	if e.Sig == "" {
		return &GuardError{Class: FailSignatureInvalid, Guard: GuardChain, Msg: fmt.Sprintf("%s is a mandatory signed type and carries no signature", e.Type)}
	}
	enc, ok := pub[e.Role]
	if !ok {
		return &GuardError{Class: FailSignatureInvalid, Guard: GuardChain, Msg: fmt.Sprintf("%s: no public key recorded for role %q", e.Type, e.Role)}
	}
	key, err := DecodePublicKey(enc)
	if err != nil {
		return &GuardError{Class: FailSignatureInvalid, Guard: GuardChain, Msg: fmt.Sprintf("%s: %v", e.Type, err)}
	}
	// The key id must name the emitting role's own key: a signature by
	// another role's key is as invalid as a forged one.
	if want := KeyID(e.Role, key); e.KeyID != want {
		return &GuardError{Class: FailSignatureInvalid, Guard: GuardChain, Msg: fmt.Sprintf("%s: key id %q is not %s's key %q", e.Type, e.KeyID, e.Role, want)}
	}
	sig, err := base64.StdEncoding.DecodeString(e.Sig)
	if err != nil || !ed25519.Verify(key, []byte(e.Hash), sig) {
		return &GuardError{Class: FailSignatureInvalid, Guard: GuardChain, Msg: fmt.Sprintf("%s: signature does not verify with %s's key", e.Type, e.Role)}
	}
	return nil
}

// SessionBody is the body of session_initialized: the roles' public keys
// (what every later signature is checked against), the task and the
// policy in force, so the trace states the rules it was held to.
func SessionBody(keys *Keys, task string, p Policy) map[string]any {
	return map[string]any{"roles": keys.Public(), "protocol_version": 1, "task": task, "policy": p}
}

// VerificationBody is the body of verification_run_completed for a report
// stored as reportArtifact, about the final statement finalHash.
func VerificationBody(rep *Report, reportArtifact, finalHash, notes string) map[string]any {
	m := map[string]any{"status": rep.Status, "report_artifact": reportArtifact, "final_event": finalHash}
	if notes != "" {
		m["notes"] = notes
	}
	return m
}
