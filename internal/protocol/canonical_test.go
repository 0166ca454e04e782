package protocol

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/logist/logist/internal/history"
)

// TestCanonicalJSON pins the canonical form: sorted keys, no whitespace,
// no HTML escaping, numbers in float64 shortest form, typed Go values
// equal to their decoded JSON.
func TestCanonicalJSON(t *testing.T) {
	for _, c := range []struct {
		in   any
		want string
	}{
		{map[string]any{"b": 1, "a": []string{"x", "y"}, "c": map[string]any{"z": true, "y": nil}},
			`{"a":["x","y"],"b":1,"c":{"y":null,"z":true}}`},
		{map[string]any{"conf": 0.85, "big": int64(1) << 53, "neg": -3, "exp": 1e21, "f": 2.0},
			`{"big":9007199254740992,"conf":0.85,"exp":1e+21,"f":2,"neg":-3}`},
		{map[string]any{"cmd": "a < b && c > d", "u": "ünï\u2028"}, `{"cmd":"a < b && c > d","u":"ünï\u2028"}`},
		{[]any{}, `[]`},
		{map[string]any{}, `{}`},
	} {
		got, err := CanonicalJSON(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("CanonicalJSON(%v) = %s, want %s", c.in, got, c.want)
		}
		// Decoding the canonical form and encoding again is a fixed point.
		var back any
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		again, _ := CanonicalJSON(back)
		if string(again) != string(got) {
			t.Errorf("not stable: %s then %s", got, again)
		}
	}
	if _, err := CanonicalJSON(map[string]any{"x": math.NaN()}); err == nil {
		t.Error("NaN encoded")
	}
}

// TestHashStable: an event's hash is the same built in memory and decoded
// from history, and is pinned (a change of the canonical form would make
// every recorded trace unverifiable).
func TestHashStable(t *testing.T) {
	body := map[string]any{"text": "x < y", "confidence": 0.7, "evidence": []string{"sha256:" + zeros(64)}, "n": 3}
	e, err := NewEvent(ClaimIssued, Executor, "c1", body, history.GenesisHash, nil2keys(t))
	if err != nil {
		t.Fatal(err)
	}
	const pinned = "b2d2a4ccc738c80d54ecd6971cc161d36818be036ae1f04f7a93c718b1c8ec5a"
	if e.Hash != pinned {
		t.Errorf("hash %s, pinned %s", e.Hash, pinned)
	}
	b, _ := json.Marshal(e)
	var back history.ProtocolEvent
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if Hash(&back) != e.Hash {
		t.Errorf("hash after a JSON round trip %s, built %s", Hash(&back), e.Hash)
	}
	// The canonical input, spelled out.
	want := `{"body":{"confidence":0.7,"evidence":["sha256:` + zeros(64) + `"],"n":3,"text":"x < y"},"prev_event":"` +
		history.GenesisHash + `","role":"executor","subject":"c1","type":"claim_issued"}`
	if got := sha256Hex([]byte(want)); got != e.Hash {
		t.Errorf("hash %s is not sha256 of %s (%s)", e.Hash, want, got)
	}
	// The same body in other Go shapes hashes the same: float64 3, []any,
	// and float32 0.7 (encoding/json writes float32 at its own precision).
	for _, b2 := range []map[string]any{
		{"n": 3.0, "confidence": 0.7, "text": "x < y", "evidence": []any{"sha256:" + zeros(64)}},
		{"n": int64(3), "confidence": float32(0.7), "text": "x < y", "evidence": []string{"sha256:" + zeros(64)}},
	} {
		e2, err := NewEvent(ClaimIssued, Executor, "c1", b2, history.GenesisHash, nil2keys(t))
		if err != nil || e2.Hash != e.Hash {
			t.Errorf("body %v hashed %s, want %s (%v)", b2, e2.Hash, e.Hash, err)
		}
	}
}

func zeros(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}

func nil2keys(t testing.TB) *Keys {
	t.Helper()
	k, err := LoadOrCreateKeys(t.TempDir(), Roles)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
