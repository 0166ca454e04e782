package jobview

import (
	"errors"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
)

func TestPoints(t *testing.T) {
	rp := func(id, desc string) history.Record {
		return history.Record{Type: history.TypeRecoveryPoint, RecoveryPoint: &history.RecoveryPoint{CheckpointID: id, Description: desc}}
	}
	recs := []history.Record{rp("cp-start", "first"), {Type: history.TypeTransition}, rp("cp-1", "one"), rp("cp-start", "again")}
	ps := Points(recs)
	if len(ps) != 2 || ps[0].CheckpointID != "cp-start" || ps[0].Description != "again" || ps[1].CheckpointID != "cp-1" {
		t.Fatalf("points %+v", ps)
	}
	if p, err := PointNamed("j", ps, "cp-1"); err != nil || p != ps[1] {
		t.Errorf("PointNamed cp-1: %v %v", p, err)
	}
	if _, err := PointNamed("j", ps, "cp-9"); !errors.Is(err, jobstore.ErrNotFound) {
		t.Errorf("PointNamed cp-9: %v", err)
	}
	if _, err := SnapshotChanges(t.TempDir(), ps[0], ps[1]); err == nil {
		t.Error("points without snapshots were compared")
	}
	if cps := Checkpoints(recs); len(cps) != 2 || cps[0].Restorable == "" {
		t.Errorf("checkpoints %+v", cps)
	}
}

func TestPMDecision(t *testing.T) {
	if in, err := PMDecision("veto", "r", "g"); err != nil || in.Content["decision"] != "veto" || in.From != "prime_minister" {
		t.Errorf("veto: %+v %v", in, err)
	}
	if _, err := PMDecision("shrug", "", ""); err == nil {
		t.Error("shrug taken")
	}
}
