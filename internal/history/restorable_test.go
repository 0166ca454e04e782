package history

import (
	"strings"
	"testing"
)

// One rule says whether a point can be rolled back to; jobHistory.json
// offers a point as can_resume_from only when it holds, even for points
// recorded before the rule (which said true for the end of the job).
func TestRestorableAndCanResumeFrom(t *testing.T) {
	snap := &SnapshotRef{Listing: "snapshots/x.json", Files: 1}
	for _, c := range []struct {
		p    RecoveryPoint
		want string // "" = restorable
	}{
		{RecoveryPoint{CheckpointID: "cp-0000-work", ResumePhase: "review", Snapshot: snap}, ""},
		{RecoveryPoint{CheckpointID: "cp-0003-review", ResumePhase: "", Snapshot: snap}, "where the job ended"},
		{RecoveryPoint{CheckpointID: "cp-0001-work", ResumePhase: "review"}, "no workspace snapshot"},
	} {
		err := c.p.Restorable()
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: Restorable() = %v, want %q", c.p.CheckpointID, err, c.want)
		}
	}
	recs := []Record{
		{Type: TypeRecoveryPoint, RecoveryPoint: &RecoveryPoint{CheckpointID: "cp-0000-work", ResumePhase: "review", CanResumeFrom: true, Snapshot: snap}},
		{Type: TypeRecoveryPoint, RecoveryPoint: &RecoveryPoint{CheckpointID: "cp-0003-review", CanResumeFrom: true, Snapshot: snap}},
	}
	h := Materialise("j", "", "/ws", recs)
	if !h.RecoveryPoints[0].CanResumeFrom || h.RecoveryPoints[1].CanResumeFrom {
		t.Fatalf("can_resume_from = %v, %v; want true, false (the end of the job)", h.RecoveryPoints[0].CanResumeFrom, h.RecoveryPoints[1].CanResumeFrom)
	}
	if !recs[1].RecoveryPoint.CanResumeFrom {
		t.Fatal("Materialise changed the record it was given")
	}
}
