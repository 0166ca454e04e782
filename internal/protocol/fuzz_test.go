package protocol

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/schemas/schemastest"
)

// FuzzCheckEvent feeds arbitrary events, as decoded from a history line,
// to the guards at every point of a valid trace. The guards must never
// panic, must be deterministic, and an event they accept must verify: its
// hash and role hold, and the whole trace with it fails no check but
// evidence (a claim may cite missing evidence and continue, seed 003).
func FuzzCheckEvent(f *testing.F) {
	dir := f.TempDir()
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o700); err != nil {
		f.Fatal(err)
	}
	b := newTBIn(f, dir, ws)
	b.init()
	b.claimingRest()
	b.emit(ClaimChallenged, "c1", map[string]any{"reason": "weak"})
	b.emit(ClaimIssued, "c2", claimBody(0.6, "c1", b.l.Claims["c1"].Evidence...))
	b.final("c2")
	b.verification()
	recs, store, p := b.recs, b.store, b.p
	for i, r := range recs {
		line, _ := json.Marshal(r.Event)
		f.Add(line, uint8(i))
		// The same event one step too early and too late.
		f.Add(line, uint8(i+1))
		if i > 0 {
			f.Add(line, uint8(i-1))
		}
	}
	f.Add([]byte(`{"type":"claim_issued","role":"executor","subject":"c9","body":{"text":"t","confidence":1e308,"evidence":[null,{}]},"prev_event":"x"}`), uint8(6))
	f.Add([]byte(`{"type":"session_initialized","role":"SYSTEM","body":{"roles":{"planner":7}}}`), uint8(0))
	f.Add([]byte(`{"type":"tool_execution_completed","role":"SYSTEM","subject":"i1","body":{"exit_code":-1e400}}`), uint8(5))
	f.Add([]byte(`null`), uint8(3))

	f.Fuzz(func(t *testing.T, data []byte, k uint8) {
		defer schemastest.NoFault(t)()
		var e history.ProtocolEvent
		if json.Unmarshal(data, &e) != nil {
			return
		}
		n := int(k) % (len(recs) + 1)
		l, err := Replay(recs[:n], &store)
		if err != nil {
			t.Fatal(err)
		}
		err1 := l.Check(&e, p)
		err2 := l.Check(&e, p)
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("Check not deterministic: %v then %v", err1, err2)
		}
		trace := append(append([]history.Record{}, recs[:n]...), history.Record{Seq: int64(n + 1), Type: history.TypeEvent, Role: e.Role, Event: &e})
		rep := Verify(trace, store, p, VerifyOptions{})
		l.Apply(&e)
		if err1 != nil {
			return
		}

		if e.Hash != Hash(&e) || Emitters[e.Type] != e.Role {
			t.Fatalf("accepted an event whose hash or role is wrong: %+v", e)
		}
		for _, c := range rep.Checks {
			if c.Name != CheckEvidence && len(c.Failures) > 0 {
				t.Fatalf("accepted event fails %s: %+v", c.Name, c.Failures)
			}
		}
	})
}
