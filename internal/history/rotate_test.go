package history

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/logist/logist/internal/signing"
)

// TestRotationSealsWhatEveryLineSays: the archives a rotation seals from
// what its Log knows (sealKnown) are indexed, and leave the state, exactly
// as sealing them from every line does (the path a crash's recovery takes).
func TestRotationSealsWhatEveryLineSays(t *testing.T) {
	key, err := signing.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	l, _, err := OpenWith(dir, Options{Signer: key, MaxBytes: 3000})
	if err != nil {
		t.Fatal(err)
	}
	// Records that move every part of the state: intents left open,
	// responses with sessions, recovery points, units of several records.
	for i := range 30 {
		n := i
		in := &Record{Type: TypeIntent, Interaction: &n, Phase: "work", Role: "worker", Request: &Request{Prompt: "p"}}
		out := &Record{Type: TypeResponse, Interaction: &n, Phase: "work", Role: []string{"worker", "supervisor"}[i%2],
			Response: &Response{Status: StatusSuccess, Action: "COMPLETED", SessionID: "s" + string(rune('a'+i%5))}}
		rp := &Record{Type: TypeRecoveryPoint, RecoveryPoint: &RecoveryPoint{CheckpointID: "cp" + string(rune('a'+i%7))}}
		var err error
		switch i % 3 {
		case 0:
			err = l.AppendBatch([]*Record{in, out, rp})
		case 1:
			err = l.Append(in)
		default:
			err = l.AppendBatch([]*Record{out, rp})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	idx, err := readIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Archives) < 3 {
		t.Fatalf("want three archives or more, have %d", len(idx.Archives))
	}
	// Seal each archive again from every line, in turn.
	prev := &Index{State: State{Responses: map[string]int{}}}
	for i, a := range idx.Archives {
		f, err := os.Open(filepath.Join(dir, a.File))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(zr)
		_ = f.Close()
		if err != nil {
			t.Fatal(err)
		}
		want, st, last, err := summarize(data, prev, nil)
		if err != nil {
			t.Fatal(err)
		}
		want.File = a.File
		if a != want {
			t.Errorf("archive %d indexed as %+v; from its lines %+v", i+1, a, want)
		}
		prev = &Index{Archives: append(prev.Archives, want), LastHash: last, State: st}
	}
	got, _ := json.Marshal(idx.State)
	want, _ := json.Marshal(prev.State)
	if !bytes.Equal(got, want) || idx.LastHash != prev.LastHash {
		t.Errorf("index state %s (last %s); from the archives' lines %s (last %s)", got, idx.LastHash, want, prev.LastHash)
	}
}
