package runner

import (
	"fmt"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/snapshot"
)

// Recovery points: safe places to resume from (seed 002), each with a
// snapshot of the workspace for logist rollback and the files changed
// since the checkpoint the job was at. One is taken before the first
// phase, and one at every phase boundary (an answer that completed its
// phase).

// startPoint is the workspace as the job found it: rollback can always
// return here. It has no earlier checkpoint, so no changes.
func startPoint(phase string) *history.Record {
	cp := &history.RecoveryPoint{CheckpointID: "cp-start", Sequence: -1, ResumePhase: phase, CanResumeFrom: true,
		Description: "workspace before the first phase", RollbackFiles: []string{}, EvidenceFiles: []string{}}
	return &history.Record{Type: history.TypeRecoveryPoint, Phase: phase, Role: "SYSTEM", RecoveryPoint: cp}
}

// phasePoint is the boundary after c's answer completed its phase; the job
// resumes from it in next ("" when the workflow ended). Its changes and
// rollback files are filled in when its snapshot is taken (snapshot).
func phasePoint(c *call, ans *response.Answer, next string) *history.Record {
	n := c.interaction
	cp := &history.RecoveryPoint{
		CheckpointID: fmt.Sprintf("cp-%04d-%s", n, c.phase), Sequence: n, ResumePhase: next, CanResumeFrom: true,
		Description:   fmt.Sprintf("%s completed phase %s: %s", c.role, c.phase, truncate(ans.Summary, 200)),
		RollbackFiles: []string{}, EvidenceFiles: ans.EvidenceFiles,
		Metadata: map[string]any{"evidence_count": len(ans.EvidenceFiles), "role": c.role, "phase": c.phase, "summary": ans.Summary},
	}
	return &history.Record{Type: history.TypeRecoveryPoint, Phase: c.phase, Role: c.role, RecoveryPoint: cp}
}

// snapshot copies the workspace for a recovery point and lists what
// changed since the job's current checkpoint (the previous point, or the
// one a rollback returned to): its Changes, and as RollbackFiles the
// files a rollback to that checkpoint would restore or remove. A failure
// to snapshot is logged and leaves the point without a snapshot, and not
// can_resume_from (the job goes on, only rollback to this point is lost);
// a base without a snapshot leaves the changes unknown.
func (e *Engine) snapshot(tx *jobtx.Tx, cp *history.RecoveryPoint) {
	base, baseSnap := tx.CheckpointRef()
	var opts snapshot.Options
	if l := tx.M.Limits; l != nil && l.MaxSnapshotBytes != nil {
		opts.MaxBytes = *l.MaxSnapshotBytes
	}
	info, err := snapshot.TakeWith(tx.Store().Workspace(tx.ID), tx.Dir, cp.CheckpointID, opts)
	if err == nil {
		cp.Snapshot = &history.SnapshotRef{Listing: info.Listing, Files: info.Files, Bytes: info.Bytes, New: info.New}
	}
	// Offered for rollback only if rollback takes it (not the end of the
	// job, not without a snapshot).
	cp.CanResumeFrom = cp.Restorable() == nil
	if err != nil {
		tx.LogCode(codes.SnapshotFailed, "SYSTEM", 0, err.Error())
		tx.M.Run.SnapshotError = err.Error() // for logist status, until one succeeds
		return
	}
	tx.M.Run.SnapshotError = ""
	if base == "" || baseSnap == nil {
		return
	}
	was, err := snapshot.Entries(tx.Dir, base, baseSnap.Listing)
	if err != nil {
		tx.LogCode(codes.SnapshotFailed, "SYSTEM", 0, fmt.Sprintf("changes since %s not listed: %v", base, err))
		return
	}
	ch := snapshot.Diff(was, info.Entries)
	cp.Changes, cp.BaseCheckpoint, cp.RollbackFiles = fileChanges(ch), base, ch.Paths()
}

// fileChanges is c as the history records it.
func fileChanges(c snapshot.Changes) *history.FileChanges {
	return &history.FileChanges{Added: c.Added, Modified: c.Modified, Deleted: c.Deleted}
}
