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

// TestAppendSealed: lines sealed elsewhere go into a history through the
// unit write the engine's appends use: the log continues after them as
// after its own, and reopened reads the same state; lines that do not
// continue the history, are not envelopes as Logist writes them, or end a
// unit with a More record store nothing.
func TestAppendSealed(t *testing.T) {
	t.Parallel()
	_, priv, _ := ed25519.GenerateKey(nil)
	signer := sealKey{priv}
	dir := t.TempDir()
	l, _, err := OpenWith(dir, Options{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := 0
	unit := func() []*Record {
		return []*Record{
			{Type: TypeIntent, Interaction: &n, Request: &Request{Prompt: "p"}},
			{Type: TypeError, Error: &ErrorInfo{Code: "X", Message: "m"}},
		}
	}
	if err := l.Append(&Record{Type: TypeError, Error: &ErrorInfo{Code: "X", Message: "own"}}); err != nil {
		t.Fatal(err)
	}
	lines, last, err := Seal(unit(), l.State().NextSeq, l.LastHash(), time.Now(), signer)
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := Seal(unit()[1:], 0, "", time.Now(), signer)
	if err != nil {
		t.Fatal(err)
	}
	size := l.Size()
	refused := map[string][][]byte{
		"replayed":           first,
		"reordered":          {lines[1], lines[0]},
		"a More record last": {lines[0]},
		"reformatted":        {bytes.Replace(lines[0], []byte(`{"hash"`), []byte(`{ "hash"`), 1), lines[1]},
		"garbage":            {[]byte("not a record\n")},
	}
	for what, ls := range refused {
		if err := l.AppendSealed(ls); err == nil {
			t.Fatalf("%s lines were appended", what)
		}
		if l.Size() != size || !l.Intact() {
			t.Fatalf("%s lines left something in the file", what)
		}
	}
	if err := l.AppendSealed(lines); err != nil {
		t.Fatal(err)
	}
	if l.State().NextSeq != 3 || l.LastHash() != last || l.State().NextInteraction != 1 {
		t.Fatalf("state after the sealed unit: %+v %s", l.State(), l.LastHash())
	}
	if err := l.Append(&Record{Type: TypeError, Error: &ErrorInfo{Code: "X", Message: "own again"}}); err != nil {
		t.Fatal(err)
	}
	es, err := ReadEntries(dir)
	if err != nil || len(es) != 4 {
		t.Fatalf("entries %d %v", len(es), err)
	}
	for i, e := range es[1:3] {
		if !bytes.Equal(e.Line(), lines[i]) {
			t.Fatalf("record %d reads back as\n%s\nnot\n%s", i+1, e.Line(), lines[i])
		}
	}
	re, _, err := OpenWith(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if re.State().NextSeq != 4 || re.LastHash() != l.LastHash() {
		t.Fatalf("reopened at %+v %s, want %+v %s", re.State(), re.LastHash(), l.State(), l.LastHash())
	}
}
