package jobview

import (
	"fmt"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/snapshot"
)

// Checkpoint is a recovery point (or a rollback's return to one) as a
// history holds it: its id and its workspace snapshot.
type Checkpoint struct {
	ID       string                 `json:"checkpoint_id"`
	Seq      int64                  `json:"seq"`
	Time     string                 `json:"ts"`
	Phase    string                 `json:"resume_phase,omitempty"`
	Snapshot *history.SnapshotRef   `json:"snapshot,omitempty"`
	Point    *history.RecoveryPoint `json:"recovery_point,omitempty"`
	// Restorable is "" when a rollback may return here, else why not.
	Restorable string `json:"restorable_error,omitempty"`
}

// Checkpoints are the recovery points of a history, in order (the first
// record naming each id).
func Checkpoints(recs []history.Record) []Checkpoint {
	out := []Checkpoint{}
	seen := map[string]bool{}
	for _, r := range recs {
		if r.RecoveryPoint == nil || seen[r.RecoveryPoint.CheckpointID] {
			continue
		}
		p := r.RecoveryPoint
		seen[p.CheckpointID] = true
		cp := Checkpoint{ID: p.CheckpointID, Seq: r.Seq, Time: r.Time, Phase: p.ResumePhase, Snapshot: p.Snapshot, Point: p}
		if err := p.Restorable(); err != nil {
			cp.Restorable = err.Error()
		}
		out = append(out, cp)
	}
	return out
}

// CheckpointDiff is what changed in the workspace of job dir from
// checkpoint from to checkpoint to, compared by their snapshots' listings
// (content hash, link target, mode). A checkpoint the history does not
// hold is jobstore.ErrNotFound; one without a snapshot cannot be compared.
func CheckpointDiff(dir string, recs []history.Record, from, to string) (snapshot.Changes, error) {
	entries := func(id string) ([]snapshot.Entry, error) {
		for _, cp := range Checkpoints(recs) {
			if cp.ID != id {
				continue
			}
			if cp.Snapshot == nil {
				return nil, fmt.Errorf("checkpoint %s has no workspace snapshot to compare", id)
			}
			return snapshot.Entries(dir, id, cp.Snapshot.Listing)
		}
		return nil, fmt.Errorf("checkpoint %s: %w", id, jobstore.ErrNotFound)
	}
	a, err := entries(from)
	if err != nil {
		return snapshot.Changes{}, err
	}
	b, err := entries(to)
	if err != nil {
		return snapshot.Changes{}, err
	}
	return snapshot.Diff(a, b), nil
}
