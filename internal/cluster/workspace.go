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
// any node then finds every point's snapshot in its own job folder. A run
// that stops for a steward (STUCK, a budget's halt) leaves work no point
// holds, which file mode keeps in its folder for the resumed run: the
// stopping unit carries it too (park; a git job's repository with it,
// bundleParked), and a claim after the stop restores it instead of the
// checkpoint, unless a rollback came since (one choice, restored.parked,
// which the repository follows: restoreGit). A
// steward's command runs on the same workspace; the snapshot a rollback
// keeps of what it discards goes to the store with the steering (kept).

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
	objects, err := withListing(dir, p, known)
	if err != nil {
		return nil, nil, err
	}
	return p, objects, nil
}

// withListing sets p's snapshot to its listing in job folder dir and
// returns the objects the listing names that are not in known.
func withListing(dir string, p *clusterstore.RecoveryPoint, known map[string]bool) (map[string][]byte, error) {
	b, err := os.ReadFile(snapshot.ListingPath(dir, p.ID))
	if err != nil {
		return nil, err
	}
	var l snapshot.Listing
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", p.ID, err)
	}
	p.Snapshot = b
	objects := map[string][]byte{}
	for _, en := range l.Entries {
		if en.SHA256 == "" || known[en.SHA256] || objects[en.SHA256] != nil {
			continue
		}
		c, err := os.ReadFile(filepath.Join(snapshot.ObjectDir(dir), en.SHA256))
		if err != nil {
			return nil, err
		}
		objects[en.SHA256] = c
	}
	return objects, nil
}

// parkedPoint is the id under which the store keeps the workspace a run
// left when it stopped for a steward (park). No recovery point of the
// engine's is named so (theirs are cp-…), and no history record names
// it: it is no place to roll back to, only where a resumed run goes on.
const parkedPoint = "parked"

// unparkedPoint is the point, without a snapshot, a stop whose workspace
// could not be parked (park or bundleParked failed: a snapshot over its
// cap) stores at its last record instead: a parked point before it holds
// the workspace of an earlier stop, older than the work the failed stop
// lost, and no longer counts (restoreWorkspace): the job goes on from
// its current checkpoint. Replaced by the next failed stop, it outlives
// the parked point's next replacement, which is after it.
const unparkedPoint = "parked-failed"

// park is the workspace of the job in folder dir as its run leaves it,
// stopping for a steward at the unit whose last record is last (a status
// a steward resumes: lifecycle.Status.Waiting): snapshotted as the store's
// parkedPoint, at last's sequence, with the objects not in known. In
// file mode the workspace stays where the worker left it and the resumed
// run finds it; a node's folder is only a cache, so the work since the
// last recovery point goes to the store with the stop. maxBytes caps the
// snapshot as the manifest caps a recovery point's (0: the default).
func park(dir string, last *history.Record, maxBytes int64, known map[string]bool) (*clusterstore.RecoveryPoint, map[string][]byte, error) {
	info, err := snapshot.TakeWith(filepath.Join(dir, jobstore.WorkspaceDir), dir, parkedPoint, snapshot.Options{MaxBytes: maxBytes})
	if err != nil {
		return nil, nil, err
	}
	p := &clusterstore.RecoveryPoint{ID: parkedPoint, Seq: last.Seq}
	if info.Listing == "" {
		return p, nil, nil // an empty workspace: no listing
	}
	objects, err := withListing(dir, p, known)
	if err != nil {
		return nil, nil, err
	}
	return p, objects, nil
}

// snapshotCap is the cap a committed manifest file sets on a snapshot's
// size (limits.max_snapshot_bytes; 0: the default), as the engine reads
// it for a recovery point's.
func snapshotCap(manifestFile []byte) int64 {
	var m struct {
		Limits *struct {
			MaxSnapshotBytes *int64 `json:"max_snapshot_bytes"`
		} `json:"limits"`
	}
	if json.Unmarshal(manifestFile, &m) != nil || m.Limits == nil || m.Limits.MaxSnapshotBytes == nil {
		return 0
	}
	return *m.Limits.MaxSnapshotBytes
}

// restoreWorkspace writes the job's recovery points' listings (from s)
// into job folder dir and makes its workspace what the job's current
// checkpoint holds (the last record naming a checkpoint with a snapshot:
// history.Record.Checkpoint, the rule the history's state applies) — or,
// when parked says so, what the job's run left when it last stopped for
// a steward (park), if that stop came after the record and no later
// stop failed to park its own (unparkedPoint): a resumed job
// goes on from its work as in file mode, while a rollback since (or a
// recovery point a later run took) names the checkpoint again. Only
// the objects that needs are read from the store, with those of the
// points also names (a rollback's target; nil: none; every point when it
// says so): a claim reads one point's objects, not every point's. It
// returns the objects it wrote and which workspace it chose: the one
// rule, which a git job's repository follows (restoreGit). A job without
// a point gets an empty workspace (the engine prepares it).
func restoreWorkspace(ctx context.Context, s clusterstore.Store, dir, id string, lines [][]byte, also func(cp string) bool, parked bool) (restored, error) {
	ws := filepath.Join(dir, jobstore.WorkspaceDir)
	var cp, listing string
	cpSeq := int64(-1)
	for _, line := range lines {
		e, err := history.ParseLine(line)
		if err != nil {
			return restored{}, err
		}
		if c, snap, ok := e.Checkpoint(); ok && snap != nil {
			cp, listing, cpSeq = c, snap.Listing, e.Seq
		}
	}
	points, err := s.Points(ctx, id)
	if err != nil {
		return restored{}, err
	}
	if parked {
		unparked := int64(-1) // the last stop that parked nothing
		for _, p := range points {
			if p.ID == unparkedPoint {
				unparked = p.Seq
			}
		}
		for _, p := range points {
			if p.ID == parkedPoint && p.Seq > cpSeq && p.Seq > unparked {
				cp, listing = parkedPoint, ""
				if p.Snapshot != nil {
					listing = snapshot.ListingPath("", parkedPoint)
				}
			}
		}
	}
	var sums []string
	for _, p := range points {
		if p.Snapshot == nil {
			continue
		}
		if !clusterstore.ValidPointID(p.ID) {
			return restored{}, fmt.Errorf("job %s: invalid recovery point id %q in the store", id, p.ID)
		}
		ps, err := clusterstore.ListingSums(p.Snapshot)
		if err != nil {
			return restored{}, fmt.Errorf("job %s: snapshot of %s: %w", id, p.ID, err)
		}
		if p.ID == cp || (also != nil && also(p.ID)) {
			sums = append(sums, ps...)
		}
		if err := atomicfile.MkdirAll(filepath.Join(dir, snapshot.Dir), 0o700); err != nil {
			return restored{}, err
		}
		if err := atomicfile.WriteFile(snapshot.ListingPath(dir, p.ID), p.Snapshot, 0o600); err != nil {
			return restored{}, err
		}
	}
	slices.Sort(sums)
	sums = slices.Compact(sums)
	known := map[string]bool{}
	if len(sums) > 0 {
		objects, err := s.Objects(ctx, sums)
		if err != nil {
			return restored{}, fmt.Errorf("job %s: %w", id, err)
		}
		objDir := snapshot.ObjectDir(dir)
		if err := atomicfile.MkdirAll(objDir, 0o700); err != nil {
			return restored{}, err
		}
		for sum, b := range objects {
			if err := atomicfile.WriteFile(filepath.Join(objDir, sum), b, 0o600); err != nil {
				return restored{}, err
			}
			known[sum] = true
		}
	}
	out := restored{known: known, parked: cp == parkedPoint}
	if cp == "" {
		return out, nil
	}
	if err := snapshot.RestoreRef(ws, dir, cp, listing); err != nil {
		return restored{}, fmt.Errorf("job %s: restore the workspace of %s: %w", id, cp, err)
	}
	return out, nil
}

// restored is what restoreWorkspace made of a job's workspace: the
// objects it wrote (those the store holds), and whether it is the one
// the job's last stop parked rather than its checkpoint's.
type restored struct {
	known  map[string]bool
	parked bool
}
