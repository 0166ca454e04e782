package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/snapshot"
)

// Workspaces move with the job. The engine snapshots the workspace at
// each recovery point into the job folder (internal/snapshot: a listing,
// and objects named by their content's SHA-256); the unit that records
// the point carries the listing and the objects the store may lack to the
// store, under the fence (pointOf). A node that claims the job writes the
// listings and objects back into its job folder and restores the
// workspace from the job's current checkpoint (restoreWorkspace): the
// newest recovery point, or the one a rollback returned to. Rollback on
// any node then finds every point's snapshot in its own job folder.

// pointOf is the recovery point that recs (a unit's records) hold, if any, as the
// store keeps it, with the objects of its listing not in known (objects
// the store holds already). A unit records at most one point (the engine
// takes one per outcome).
func pointOf(dir string, recs []*history.Record, known map[string]bool) (*clusterstore.RecoveryPoint, map[string][]byte, error) {
	var p *clusterstore.RecoveryPoint
	var ref *history.SnapshotRef
	for _, e := range recs {
		if e.Type != history.TypeRecoveryPoint || e.RecoveryPoint == nil {
			continue
		}
		if p != nil {
			return nil, nil, fmt.Errorf("a unit records two recovery points (%s, %s)", p.ID, e.RecoveryPoint.CheckpointID)
		}
		p = &clusterstore.RecoveryPoint{ID: e.RecoveryPoint.CheckpointID, Seq: e.Seq}
		ref = e.RecoveryPoint.Snapshot
	}
	if p == nil || ref == nil || ref.Listing == "" {
		// No point; a point without a snapshot; an empty workspace.
		return p, nil, nil
	}
	b, err := os.ReadFile(snapshot.ListingPath(dir, p.ID))
	if err != nil {
		return nil, nil, err
	}
	var l snapshot.Listing
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, nil, fmt.Errorf("snapshot of %s: %w", p.ID, err)
	}
	p.Snapshot = b
	objects := map[string][]byte{}
	for _, en := range l.Entries {
		if en.SHA256 == "" || known[en.SHA256] || objects[en.SHA256] != nil {
			continue
		}
		c, err := os.ReadFile(filepath.Join(snapshot.ObjectDir(dir), en.SHA256))
		if err != nil {
			return nil, nil, err
		}
		objects[en.SHA256] = c
	}
	return p, objects, nil
}

// restoreWorkspace writes the job's recovery points' listings (from s)
// into job folder dir and makes its workspace what the job's current
// checkpoint holds (the last record naming a checkpoint with a snapshot:
// history.Record.Checkpoint, the rule the history's state applies). Only
// the objects that needs are read from the store, with those of the
// points also names (a rollback's target; nil: none; every point when it
// says so): a claim reads one point's objects, not every point's. It
// returns the objects it wrote. A job without a point gets an empty
// workspace (the engine prepares it).
func restoreWorkspace(ctx context.Context, s clusterstore.Store, dir, id string, lines [][]byte, also func(cp string) bool) (map[string]bool, error) {
	ws := filepath.Join(dir, jobstore.WorkspaceDir)
	var cp string
	var ref *history.SnapshotRef
	for _, line := range lines {
		e, err := history.ParseLine(line)
		if err != nil {
			return nil, err
		}
		if c, snap, ok := e.Checkpoint(); ok && snap != nil {
			cp, ref = c, snap
		}
	}
	points, err := s.Points(ctx, id)
	if err != nil {
		return nil, err
	}
	var sums []string
	for _, p := range points {
		if p.Snapshot == nil {
			continue
		}
		if !clusterstore.ValidPointID(p.ID) {
			return nil, fmt.Errorf("job %s: invalid recovery point id %q in the store", id, p.ID)
		}
		ps, err := clusterstore.ListingSums(p.Snapshot)
		if err != nil {
			return nil, fmt.Errorf("job %s: snapshot of %s: %w", id, p.ID, err)
		}
		if p.ID == cp || (also != nil && also(p.ID)) {
			sums = append(sums, ps...)
		}
		if err := atomicfile.MkdirAll(filepath.Join(dir, snapshot.Dir), 0o700); err != nil {
			return nil, err
		}
		if err := atomicfile.WriteFile(snapshot.ListingPath(dir, p.ID), p.Snapshot, 0o600); err != nil {
			return nil, err
		}
	}
	slices.Sort(sums)
	sums = slices.Compact(sums)
	known := map[string]bool{}
	if len(sums) > 0 {
		objects, err := s.Objects(ctx, sums)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", id, err)
		}
		objDir := snapshot.ObjectDir(dir)
		if err := atomicfile.MkdirAll(objDir, 0o700); err != nil {
			return nil, err
		}
		for sum, b := range objects {
			if err := atomicfile.WriteFile(filepath.Join(objDir, sum), b, 0o600); err != nil {
				return nil, err
			}
			known[sum] = true
		}
	}
	if cp == "" {
		return known, nil
	}
	if err := snapshot.RestoreRef(ws, dir, cp, ref.Listing); err != nil {
		return nil, fmt.Errorf("job %s: restore the workspace of %s: %w", id, cp, err)
	}
	return known, nil
}
