package history

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/logist/logist/internal/signing"
)

// A batch is stored as appends one by one would store it: one chain, the
// same state; and it costs one fsync.
func TestAppendBatchChainsLikeAppend(t *testing.T) {
	t.Parallel()
	key, err := signing.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	syncs := 0
	l, _, err := OpenWith(dir, Options{Signer: key, Observe: func(int, time.Duration) { syncs++ }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Append(benchRecord(0)); err != nil {
		t.Fatal(err)
	}
	batch := []*Record{benchRecord(1), benchRecord(2), {Type: TypeRecoveryPoint, RecoveryPoint: &RecoveryPoint{CheckpointID: "cp-1"}}}
	if err := l.AppendBatch(batch); err != nil {
		t.Fatal(err)
	}
	if syncs != 2 {
		t.Errorf("%d fsyncs, want 2 (one append, one batch)", syncs)
	}
	es, err := ReadEntries(dir)
	if err != nil || len(es) != 4 {
		t.Fatalf("%d entries, %v", len(es), err)
	}
	for i := 1; i < len(es); i++ {
		if es[i].Seq != int64(i) || es[i].PrevHash != es[i-1].Hash {
			t.Errorf("record %d: seq %d prev %s, want chained to %s", i, es[i].Seq, es[i].PrevHash, es[i-1].Hash)
		}
	}
	if batch[2].Seq != 3 || l.LastHash() != es[3].Hash {
		t.Errorf("batch fields not assigned: seq %d", batch[2].Seq)
	}
	st := l.State()
	if st.NextSeq != 4 || st.LastCheckpoint != "cp-1" || st.Responses["worker"] != 3 {
		t.Errorf("state %+v", st)
	}
	// Reopened, the state read back is the same.
	l2, _, err := OpenWith(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if st2 := l2.State(); st2.NextSeq != st.NextSeq || st2.LastCheckpoint != st.LastCheckpoint || l2.LastHash() != l.LastHash() {
		t.Errorf("reopened state %+v", st2)
	}
}

// BenchmarkAppendBatch measures a commit unit's three records written with
// one fsync (compare BenchmarkAppend × 3).
func BenchmarkAppendBatch(b *testing.B) {
	key, err := signing.LoadOrCreate(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	l, _, err := OpenWith(b.TempDir(), Options{Signer: key})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	i := 0
	for b.Loop() {
		if err := l.AppendBatch([]*Record{benchRecord(i), benchRecord(i + 1), benchRecord(i + 2)}); err != nil {
			b.Fatal(err)
		}
		i += 3
	}
}

// The records a Log keeps in memory materialise the same jobHistory.json
// as the records read back from the file; past recsMax it keeps none.
func TestKeptRecordsMaterialiseAsTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := 0
	intent := &Record{Type: TypeIntent, Interaction: &n, Phase: "work", Role: "worker", Attempt: 1,
		Request: &Request{Prompt: "p", FilesContext: []string{"a.go"}, Metadata: map[string]any{"attempt": 1, "accepted_formats": []string{"COMPLETED"}, "cost": 0.1 + 0.2}}}
	if err := l.Append(intent); err != nil {
		t.Fatal(err)
	}
	unit := []*Record{
		{Type: TypeResponse, Interaction: &n, Phase: "work", Role: "worker", Response: &Response{Status: StatusSuccess, Action: "COMPLETED", EvidenceFiles: []string{}, Summary: "s", CostUSD: 0.07}},
		{Type: TypeRecoveryPoint, Phase: "work", RecoveryPoint: &RecoveryPoint{CheckpointID: "cp-1", RollbackFiles: []string{}, Metadata: map[string]any{"summary": "s"}}},
		{Type: TypeMessage, Phase: "work", Message: []byte(`{"kind": "note",  "text": "spaced"}`)},
		{Type: TypeTransition, Phase: "review", Transition: &Transition{From: "RUNNING", To: "REVIEWING"}, Commit: &Commit{Sum: "x", Manifest: []byte(`{"a":1}`)}},
	}
	if err := l.AppendBatch(unit); err != nil {
		t.Fatal(err)
	}
	kept, ok := l.Records()
	if !ok || len(kept) != 5 {
		t.Fatalf("kept %d records, ok %v", len(kept), ok)
	}
	read, err := ReadAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(Materialise("j", "t0", "/ws", kept))
	b, _ := json.Marshal(Materialise("j", "t0", "/ws", read))
	if string(a) != string(b) {
		t.Errorf("from memory:\n%s\nfrom the file:\n%s", a, b)
	}
	// A reopened log keeps what it scanned.
	l2, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if recs, ok := l2.Records(); !ok || len(recs) != 5 {
		t.Errorf("reopened: %d records, ok %v", len(recs), ok)
	}
	for i := 0; i < recsMax; i++ {
		if err := l2.Append(&Record{Type: TypeError, Error: &ErrorInfo{Code: "X"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := l2.Records(); ok {
		t.Error("a long history is still kept in memory")
	}
	l2.Close()
}
