package jobtx

import (
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
)

// witnessLog records what a Witness hears: at each Begun the last record
// of the history, at each Wrote the last record written.
type witnessLog struct{ begun, wrote, ended []int64 }

func (w *witnessLog) Begun(t *Tx) { w.begun = append(w.begun, t.Log.State().NextSeq-1) }
func (w *witnessLog) Wrote(t *Tx) { w.wrote = append(w.wrote, t.Log.State().NextSeq-1) }
func (w *witnessLog) Ended(t *Tx) { w.ended = append(w.ended, t.Log.State().NextSeq-1) }

// A witness hears where the history stands as each transaction begins and
// after each append, whether the append is a record alone, a committed
// unit, or an illegal transition's refusal.
func TestWitnessHearsBeginsAndWrites(t *testing.T) {
	f := newFixture(t) // records 0-1: the start, the intent
	w := &witnessLog{}
	f.env.Witness = w
	tx := f.begin(t)
	n := 0
	if err := tx.Append(&history.Record{Type: history.TypeResponse, Interaction: &n, Phase: "work", Role: "worker",
		Response: &history.Response{Status: history.StatusSuccess, Action: "COMPLETED", EvidenceFiles: []string{}}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Transition(lifecycle.EvAdvance, lifecycle.Reviewing, "review", "SYSTEM", ""); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Transition(lifecycle.EvResume, lifecycle.Pending, "", "STEWARD", ""); err == nil {
		t.Fatal("an illegal transition was allowed")
	}
	tx.Close()
	f.begin(t).Close()
	if want := []int64{1, 4}; len(w.begun) != 2 || w.begun[0] != want[0] || w.begun[1] != want[1] {
		t.Errorf("begun at %v, want %v", w.begun, want)
	}
	// The response alone, the transition's unit (the transition carries
	// the commit), the refusal's error record.
	if want := []int64{2, 3, 4}; len(w.wrote) != 3 || w.wrote[0] != want[0] || w.wrote[1] != want[1] || w.wrote[2] != want[2] {
		t.Errorf("wrote up to %v, want %v", w.wrote, want)
	}
	// Each Close, once, after its writes.
	if want := []int64{4, 4}; len(w.ended) != 2 || w.ended[0] != want[0] || w.ended[1] != want[1] {
		t.Errorf("ended at %v, want %v", w.ended, want)
	}
}
