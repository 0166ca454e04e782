package history

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/logist/logist/internal/signing"
)

// checkLinks fails unless each of u's links is what ParseLine reads from
// its line: the sequence, predecessor, type, and a hash that is the
// SHA-256 of the record's exact bytes in the line.
func checkLinks(t testing.TB, u Unit) {
	t.Helper()
	if len(u.Links) != len(u.Lines) || len(u.Lines) != len(u.Records) {
		t.Fatalf("a unit of %d lines, %d links, %d records", len(u.Lines), len(u.Links), len(u.Records))
	}
	for i, line := range u.Lines {
		e, err := ParseLine(line)
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		sum := sha256.Sum256(e.Body)
		got := Link{Seq: e.Seq, PrevHash: e.PrevHash, Hash: e.Hash, Type: e.Type}
		if e.Legacy || hex.EncodeToString(sum[:]) != e.Hash {
			t.Fatalf("line %d is not a sealed envelope: %s", i, line)
		}
		if got != u.Links[i] {
			t.Fatalf("line %d reads as %+v, its link says %+v", i, got, u.Links[i])
		}
		if i > 0 && u.Links[i].PrevHash != u.Links[i-1].Hash {
			t.Fatalf("link %d names %s, not its predecessor's hash %s", i, u.Links[i].PrevHash, u.Links[i-1].Hash)
		}
	}
}

// TestUnitLinksAreTheirLines: the links a log hands over with a unit
// (Unit.Links, which the owner's store checks in place of parsing the
// lines) are what ParseLine reads from the very lines written, for every
// kind of record and unit, signed or not, across units.
func TestUnitLinksAreTheirLines(t *testing.T) {
	t.Parallel()
	key, err := signing.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, signer := range []Signer{key, nil} {
		t.Run(fmt.Sprintf("signed=%v", signer != nil), func(t *testing.T) {
			units, lastHash := 0, GenesisHash
			var next int64
			l, _, err := OpenWith(t.TempDir(), Options{Signer: signer, Commit: func(u Unit) error {
				checkLinks(t, u)
				if u.Links[0].Seq != next || u.Links[0].PrevHash != lastHash {
					t.Fatalf("unit %d begins at %d after %s, want %d after %s", units, u.Links[0].Seq, u.Links[0].PrevHash, next, lastHash)
				}
				next, lastHash = u.Links[len(u.Links)-1].Seq+1, u.Links[len(u.Links)-1].Hash
				units++
				return u.Write()
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			n := 0
			odd := "line\nbreak \"quoted\" \\ <tag> & \u2028 \xff é"
			if err := l.Append(&Record{Type: TypeIntent, Interaction: &n, Role: odd, Phase: "work",
				Request: &Request{Prompt: odd, FilesContext: []string{odd}, Metadata: map[string]any{"k": odd}}}); err != nil {
				t.Fatal(err)
			}
			manifest, _ := json.Marshal(map[string]any{"status": "RUNNING", "task_description": odd})
			batch := []*Record{
				benchRecord(0),
				{Type: TypeTransition, Transition: &Transition{From: "PENDING", To: "RUNNING"}},
				{Type: TypeRecoveryPoint, RecoveryPoint: &RecoveryPoint{CheckpointID: "cp-1"}},
				{Type: TypeEvent, Event: &ProtocolEvent{Type: "proposal", Role: odd, Subject: "p1"}},
				{Type: TypeMessage, Message: json.RawMessage(`{"text":"hi"}`)},
				{Type: TypeSteward, Steward: &Steward{Command: CommandHalt}},
				{Type: TypeError, Error: &ErrorInfo{Code: "TEST", Message: odd}},
				{Type: TypeCommit, Commit: &Commit{Sum: "s", Manifest: manifest, Plain: manifest}},
			}
			if err := l.AppendBatch(batch); err != nil {
				t.Fatal(err)
			}
			if err := l.AppendBatch([]*Record{{Type: TypeCommit, Commit: &Commit{Sum: "t", Manifest: json.RawMessage(`"deflate:AAAA"`)}}}); err != nil {
				t.Fatal(err)
			}
			if units != 3 || next != 10 || l.LastHash() != lastHash {
				t.Fatalf("%d units, next %d, log's last hash %s, the links' %s", units, next, l.LastHash(), lastHash)
			}
		})
	}
}
