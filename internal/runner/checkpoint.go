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
// snapshot of the workspace for logist rollback. One is taken before the
// first phase, and one at every phase boundary (an answer that completed
// its phase).

// startPoint is the workspace as the job found it: rollback can always
// return here.
func startPoint(phase string) *history.Record {
	cp := &history.RecoveryPoint{CheckpointID: "cp-start", Sequence: -1, ResumePhase: phase, CanResumeFrom: true,
		Description: "workspace before the first phase", RollbackFiles: []string{}}
	return &history.Record{Type: history.TypeRecoveryPoint, Phase: phase, Role: "SYSTEM", RecoveryPoint: cp}
}

// phasePoint is the boundary after c's answer completed its phase; the job
// resumes from it in next ("" when the workflow ended).
func phasePoint(c *call, ans *response.Answer, next string) *history.Record {
	n := c.interaction
	cp := &history.RecoveryPoint{
		CheckpointID: fmt.Sprintf("cp-%04d-%s", n, c.phase), Sequence: n, ResumePhase: next, CanResumeFrom: true,
		Description:   fmt.Sprintf("%s completed phase %s: %s", c.role, c.phase, truncate(ans.Summary, 200)),
		RollbackFiles: ans.EvidenceFiles,
		Metadata:      map[string]any{"evidence_count": len(ans.EvidenceFiles), "role": c.role, "phase": c.phase, "summary": ans.Summary},
	}
	return &history.Record{Type: history.TypeRecoveryPoint, Phase: c.phase, Role: c.role, RecoveryPoint: cp}
}

// snapshot copies the workspace for a recovery point. A failure is logged
// and leaves the point without a snapshot: the job goes on, only rollback
// to this point is lost.
func (e *Engine) snapshot(tx *jobtx.Tx, cp *history.RecoveryPoint) {
	info, err := snapshot.Take(tx.Store().Workspace(tx.ID), tx.Dir, cp.CheckpointID)
	if err != nil {
		tx.LogCode(codes.SnapshotFailed, "SYSTEM", 0, err.Error())
		return
	}
	cp.Snapshot = &history.SnapshotRef{Listing: info.Listing, Files: info.Files, Bytes: info.Bytes, New: info.New}
}
