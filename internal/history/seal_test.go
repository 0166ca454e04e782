package history

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"testing"
	"time"
)

type sealKey struct{ priv ed25519.PrivateKey }

func (k sealKey) ID() string             { return "testkey" }
func (k sealKey) Sign(msg []byte) []byte { return ed25519.Sign(k.priv, msg) }

// TestSealMatchesAppend: Seal encodes a unit byte for byte as AppendBatch
// writes it, continuing from where the log stands.
func TestSealMatchesAppend(t *testing.T) {
	t.Parallel()
	_, priv, _ := ed25519.GenerateKey(nil)
	signer := sealKey{priv}
	dir := t.TempDir()
	l, _, err := OpenWith(dir, Options{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mk := func() []*Record {
		n := 0
		return []*Record{
			{Type: TypeError, Time: "2026-01-01T00:00:00Z", Error: &ErrorInfo{Code: "X", Message: "first"}},
			{Type: TypeIntent, Time: "2026-01-01T00:00:01Z", Interaction: &n, Request: &Request{Prompt: "p"}},
		}
	}
	if err := l.AppendBatch(mk()[:1]); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	lines, last, err := Seal(mk(), l.State().NextSeq, l.LastHash(), time.Now(), signer)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AppendBatch(mk()); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Join(lines, nil); !bytes.Equal(got, after[len(before):]) {
		t.Fatalf("Seal wrote\n%s\nAppendBatch wrote\n%s", got, after[len(before):])
	}
	if last != l.LastHash() {
		t.Fatalf("last hash %s, log's %s", last, l.LastHash())
	}
	// A new history starts from the genesis hash.
	first, _, err := Seal(mk()[:1], 0, "", time.Now(), signer)
	if err != nil {
		t.Fatal(err)
	}
	e, err := ParseLine(first[0])
	if err != nil || e.PrevHash != GenesisHash || e.Seq != 0 || e.More {
		t.Fatalf("first record %+v %v", e, err)
	}
}
