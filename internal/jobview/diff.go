package jobview

import (
	"fmt"
	"strings"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/snapshot"
)

// Points are a history's recovery points in the order recorded (a point
// recorded twice, by a restarted job, counts once: the last). logist
// result, logist diff and the console read checkpoints from here.
func Points(recs []history.Record) []*history.RecoveryPoint {
	var out []*history.RecoveryPoint
	at := map[string]int{}
	for _, r := range recs {
		p := r.RecoveryPoint
		if r.Type != history.TypeRecoveryPoint || p == nil {
			continue
		}
		if i, ok := at[p.CheckpointID]; ok {
			out[i] = p
			continue
		}
		at[p.CheckpointID] = len(out)
		out = append(out, p)
	}
	return out
}

// PointNamed is the point called cp among job id's points ps, or
// jobstore.ErrNotFound naming the ones it has.
func PointNamed(id string, ps []*history.RecoveryPoint, cp string) (*history.RecoveryPoint, error) {
	var known []string
	for _, p := range ps {
		if p.CheckpointID == cp {
			return p, nil
		}
		known = append(known, p.CheckpointID)
	}
	return nil, fmt.Errorf("job %s has no checkpoint %q (it has: %s): %w", id, cp, strings.Join(known, ", "), jobstore.ErrNotFound)
}

// SnapshotChanges are the files two checkpoints' workspace snapshots
// differ in (content hash, link target, mode); a point without a
// snapshot cannot be compared.
func SnapshotChanges(jobDir string, from, to *history.RecoveryPoint) (snapshot.Changes, error) {
	var sides [2][]snapshot.Entry
	for i, p := range []*history.RecoveryPoint{from, to} {
		if p.Snapshot == nil {
			return snapshot.Changes{}, fmt.Errorf("checkpoint %s has no workspace snapshot to compare", p.CheckpointID)
		}
		es, err := snapshot.Entries(jobDir, p.CheckpointID, p.Snapshot.Listing)
		if err != nil {
			return snapshot.Changes{}, err
		}
		sides[i] = es
	}
	return snapshot.Diff(sides[0], sides[1]), nil
}

// Checkpoint is a recovery point as the console lists it: where it sits
// in the history, and whether a rollback may return to it.
type Checkpoint struct {
	ID    string                 `json:"checkpoint_id"`
	Phase string                 `json:"resume_phase,omitempty"`
	Point *history.RecoveryPoint `json:"recovery_point"`
	// Restorable is "" when a rollback may return here, else why not.
	Restorable string `json:"restorable_error,omitempty"`
}

// Checkpoints are Points with whether each is restorable.
func Checkpoints(recs []history.Record) []Checkpoint {
	out := []Checkpoint{}
	for _, p := range Points(recs) {
		cp := Checkpoint{ID: p.CheckpointID, Phase: p.ResumePhase, Point: p}
		if err := p.Restorable(); err != nil {
			cp.Restorable = err.Error()
		}
		out = append(out, cp)
	}
	return out
}
