package protocol

import (
	"errors"
	"testing"

	"github.com/logist/logist/internal/history"
)

func guardOf(t *testing.T, err error) *GuardError {
	t.Helper()
	var g *GuardError
	if !errors.As(err, &g) {
		t.Fatalf("%v (%T) is not a *GuardError", err, err)
	}
	return g
}

// TestNewEventSignsMandatoryTypes: the six mandatory types are signed by
// the emitting role's key and verify; the others carry no signature.
func TestNewEventSignsMandatoryTypes(t *testing.T) {
	keys := nil2keys(t)
	pub := keys.Public()
	if len(Mandatory) != 6 {
		t.Fatalf("%d mandatory types", len(Mandatory))
	}
	for typ, role := range Emitters {
		e, err := NewEvent(typ, role, "x", map[string]any{"k": 1}, history.GenesisHash, keys)
		if role == System {
			if Mandatory[typ] {
				t.Fatalf("SYSTEM emits mandatory %s", typ)
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if signed := e.Sig != ""; signed != Mandatory[typ] {
			t.Errorf("%s signed=%v, mandatory=%v", typ, signed, Mandatory[typ])
		}
		if err := VerifyEvent(e, pub); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
		if e.Hash != Hash(e) || len(e.Hash) != 64 {
			t.Errorf("%s hash %q", typ, e.Hash)
		}
	}
	if _, err := NewEvent(ClaimIssued, Executor, "c", nil, history.GenesisHash, nil); err == nil {
		t.Error("mandatory event built without keys")
	}
	if e, _ := NewEvent(SessionAborted, System, "", nil, history.GenesisHash, nil); e == nil || e.Body == nil {
		t.Error("nil body not made {}")
	}
}

// TestVerifyEventDetects every way an event can lie about itself.
func TestVerifyEventDetects(t *testing.T) {
	keys, other := nil2keys(t), nil2keys(t)
	pub := keys.Public()
	mk := func() *history.ProtocolEvent {
		e, err := NewEvent(ClaimIssued, Executor, "c1", map[string]any{"text": "t"}, history.GenesisHash, keys)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for name, c := range map[string]struct {
		edit  func(e *history.ProtocolEvent)
		class string
	}{
		"edited body":      {func(e *history.ProtocolEvent) { e.Body["text"] = "u" }, FailHashMismatch},
		"edited subject":   {func(e *history.ProtocolEvent) { e.Subject = "c2" }, FailHashMismatch},
		"edited prev":      {func(e *history.ProtocolEvent) { e.PrevEvent = zeros(63) + "1" }, FailHashMismatch},
		"no signature":     {func(e *history.ProtocolEvent) { e.Sig, e.KeyID = "", "" }, FailSignatureInvalid},
		"garbage sig":      {func(e *history.ProtocolEvent) { e.Sig = "!!" }, FailSignatureInvalid},
		"other job's key":  {func(e *history.ProtocolEvent) { e.KeyID, e.Sig, _ = other.Sign(Executor, e.Hash) }, FailSignatureInvalid},
		"other role's key": {func(e *history.ProtocolEvent) { e.KeyID, e.Sig, _ = keys.Sign(Critic, e.Hash) }, FailSignatureInvalid},
		"key id claims the role, critic signs": {func(e *history.ProtocolEvent) {
			id, _, _ := keys.Sign(Executor, e.Hash)
			_, e.Sig, _ = keys.Sign(Critic, e.Hash)
			e.KeyID = id
		}, FailSignatureInvalid},
		"rehashed after edit, old signature": {func(e *history.ProtocolEvent) { e.Body["text"] = "u"; e.Hash = Hash(e) }, FailSignatureInvalid},
	} {
		e := mk()
		c.edit(e)
		err := VerifyEvent(e, pub)
		if err == nil {
			t.Errorf("%s: not detected", name)
			continue
		}
		if g := guardOf(t, err); g.Class != c.class || g.Guard != GuardChain {
			t.Errorf("%s: %v, want %s", name, g, c.class)
		}
	}
	if err := VerifyEvent(mk(), map[string]string{}); err == nil {
		t.Error("verified without the role's public key")
	}
	// A signature on a type that needs none must still be valid.
	e, _ := NewEvent(ProposalReviewed, Critic, "p1", nil, history.GenesisHash, keys)
	e.KeyID, e.Sig = "critic:0000000000000000", "AAAA"
	if err := VerifyEvent(e, pub); err == nil {
		t.Error("bad optional signature accepted")
	}
}
