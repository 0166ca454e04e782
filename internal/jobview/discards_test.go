package jobview

import (
	"errors"
	"slices"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
)

func rollbackRec(id, to string, changes map[string]any) history.Record {
	c := map[string]any{"checkpoint_id": to}
	for k, v := range changes {
		c[k] = v
	}
	return history.Record{Type: history.TypeSteward, Time: "t-" + id,
		Steward: &history.Steward{Command: history.CommandRollback, CommandID: id, Changes: c}}
}

// Only rollbacks that discarded something are listed, in order; one is
// found by its command id or its snapshot's name, the last by default.
func TestDiscards(t *testing.T) {
	recs := []history.Record{
		rollbackRec("a1", "cp-0001-work", map[string]any{"discarded_files": []any{"x.txt", "y.txt"}, "discarded_snapshot": "rollback-a1"}),
		rollbackRec("b2", "cp-start", nil), // nothing changed since the checkpoint
		{Type: history.TypeSteward, Steward: &history.Steward{Command: history.CommandResume, CommandID: "c3"}},
		rollbackRec("d4", "cp-start", map[string]any{"discarded_files": []any{"big.bin"}, "discarded_not_kept": "snapshot over its size cap"}),
	}
	ds := Discards(recs)
	if len(ds) != 2 || ds[0].CommandID != "a1" || ds[1].CommandID != "d4" {
		t.Fatalf("discards %+v", ds)
	}
	if !slices.Equal(ds[0].Files, []string{"x.txt", "y.txt"}) || ds[0].Snapshot != "rollback-a1" || ds[0].To != "cp-0001-work" || ds[0].Time != "t-a1" {
		t.Errorf("first %+v", ds[0])
	}
	if ds[1].NotKept == "" || ds[1].Snapshot != "" {
		t.Errorf("second %+v", ds[1])
	}
	for name, want := range map[string]string{"": "d4", "a1": "a1", "rollback-a1": "a1"} {
		if d, err := DiscardNamed("j", ds, name); err != nil || d.CommandID != want {
			t.Errorf("DiscardNamed(%q) = %+v, %v; want %s", name, d, err, want)
		}
	}
	if _, err := DiscardNamed("j", ds, "b2"); !errors.Is(err, jobstore.ErrNotFound) {
		t.Errorf("a rollback that discarded nothing: %v", err)
	}
	if _, err := DiscardNamed("j", nil, ""); !errors.Is(err, jobstore.ErrNotFound) {
		t.Errorf("no rollbacks: %v", err)
	}
}
