package runner

import (
	"context"
	"fmt"
	"strings"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/snapshot"
	"github.com/logist/logist/internal/workflow"
)

// Recovery points: safe places to resume from (seed 002), each with a
// snapshot of the workspace for logist rollback and the files changed
// since the checkpoint the job was at. One is taken before the first
// phase, and one at every phase boundary (an answer that completed its
// phase). In a git workspace each point is also a commit on the job branch
// (commit), its id in the point's record.

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

// gamePoint is a safe boundary inside phase that its effect named (a
// game's private conversation, round or vote ended: seed 004 §2.2): the
// job resumes from it in the same phase, the effect replaying its history
// up to here. Its id is unique in the job: the interaction counter only
// grows, and a game asks for a turn between two of its boundaries.
func gamePoint(tx *jobtx.Tx, phase string, p *workflow.Point) *history.Record {
	n := tx.Log.State().NextInteraction
	cp := &history.RecoveryPoint{
		CheckpointID: fmt.Sprintf("cp-%04d-%s", n, p.Name), Sequence: n, ResumePhase: phase, CanResumeFrom: true,
		Description: p.Description, RollbackFiles: []string{}, EvidenceFiles: []string{},
		Metadata: map[string]any{"phase": phase, "boundary": p.Name, "summary": p.Description},
	}
	return &history.Record{Type: history.TypeRecoveryPoint, Phase: phase, Role: "SYSTEM", RecoveryPoint: cp}
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
		e.noteScan(tx, info.Stats)
		cp.Snapshot = &history.SnapshotRef{Listing: info.Listing, Files: info.Files, Bytes: info.Bytes, New: info.New}
		// The point's unit waits for the fsync of a folder the snapshot
		// made (a job's first snapshots folder) before it is written
		// (history.Log): started now, it runs beside the rest of the
		// transaction. A new job's start waits until all its entries
		// are made (prepare).
		if tx.Log.Size() > 0 {
			_ = tx.Log.SettleStart()
		}
	}
	e.commit(tx, cp)
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

// commit records a recovery point of a git workspace on the job branch:
// cp-start names the base commit the workspace was cloned at (and where
// it came from); a phase's point commits the workspace as the agent left
// it, on top of its HEAD, with a message naming the phase, the role and
// the agent's summary. The commit is made before the point's record, so
// the record names a commit that exists; a crash in between leaves a
// commit no record names, which reconcileGit undoes before the call is
// asked again. A failure is logged and leaves the point without a commit
// (its snapshot still restores it).
func (e *Engine) commit(tx *jobtx.Tx, cp *history.RecoveryPoint) {
	m := tx.M
	if !m.IsGit() {
		return
	}
	ctx := context.Background()
	ws, branch := tx.Store().Workspace(tx.ID), gitws.Branch(tx.ID)
	if cp.Sequence < 0 {
		commit, err := gitws.BaseCommit(ctx, ws)
		if err != nil {
			tx.LogCode(codes.GitCommitFailed, "SYSTEM", 0, fmt.Sprintf("%s: %v", cp.CheckpointID, err))
			return
		}
		cp.Git = &history.GitPoint{Branch: branch, Commit: commit, Repo: m.Workspace.Git.Repo, Ref: m.Workspace.Git.Ref}
		return
	}
	role, _ := cp.Metadata["role"].(string)
	phase, _ := cp.Metadata["phase"].(string)
	summary, _ := cp.Metadata["summary"].(string)
	commit, err := gitws.Commit(ctx, ws, branch, gitws.Message{Job: tx.ID, Checkpoint: cp.CheckpointID, Phase: phase, Role: role, Summary: summary})
	if err != nil {
		tx.LogCode(codes.GitCommitFailed, "SYSTEM", 0, fmt.Sprintf("%s: %v", cp.CheckpointID, err))
		tx.M.Run.GitError = err.Error() // for logist status, until one succeeds
		return
	}
	tx.M.Run.GitError = ""
	cp.Git = &history.GitPoint{Branch: branch, Commit: commit}
}

// gitRefused stops the job for a steward when its last recovery point's
// commit failed because of what was left in the workspace's repository
// and it is still there: a setting that would run a program or a link in
// .git (gitws's vet), no repository of the job's, a lock (gitws.
// Committable, the rule an answer that completes its phase is held to).
// An answer that leaves such a repository is refused (response.Judge); a
// point's commit meets one only when the repository changed after its
// answer was judged, or at a point no answer completes (a game's). The
// agent's work is in the point's snapshot, but the job branch, what the
// job is for, lacks it: no agent runs until a steward mends it and
// resumes; the next point commits the work. Another commit failure (git
// missing, a full disk) leaves the job going, as before.
func (e *Engine) gitRefused(tx *jobtx.Tx) *outcome {
	m := tx.M
	if !m.IsGit() || m.Run.GitError == "" {
		return nil
	}
	err := gitws.Committable(tx.Store().Workspace(tx.ID), tx.ID)
	if err == nil {
		return nil
	}
	reason := "the last recovery point has no commit on the job branch: " + err.Error() + "; then logist resume"
	return &outcome{code: codes.GitUnsafe, logs: []logEntry{{code: codes.GitUnsafe, actor: "SYSTEM", msg: reason}},
		transition: &transition{lifecycle.EvAgentFailed, lifecycle.InterventionRequired, "", "SYSTEM", reason}}
}

// reconcileGit undoes, in a git workspace, a recovery point's commit that
// a crash kept out of the history (the point's unit was cut back, so the
// call that completed the phase is asked again): the branch goes back to
// the commit the agent had left, so the branch and the history agree.
func (e *Engine) reconcileGit(tx *jobtx.Tx) {
	if !tx.M.IsGit() {
		return
	}
	recs, err := history.ReadAll(tx.Dir)
	if err != nil {
		tx.LogCode(codes.GitCommitFailed, "SYSTEM", 0, fmt.Sprintf("job branch not checked against the history: %v", err))
		return
	}
	known := map[string]bool{}
	for _, r := range recs {
		if p := r.RecoveryPoint; p != nil && p.Git != nil {
			known[p.Git.Commit] = true
		}
	}
	dropped, err := gitws.Reconcile(context.Background(), tx.Store().Workspace(tx.ID), func(c string) bool { return known[c] })
	switch {
	case err != nil:
		tx.LogCode(codes.GitCommitFailed, "SYSTEM", 0, fmt.Sprintf("job branch not checked against the history: %v", err))
	case dropped != "":
		tx.LogCode(codes.GitReconciled, "SYSTEM", 0, fmt.Sprintf("undid commit %s, made for a recovery point the history does not have", strings.TrimSpace(dropped)))
	}
}
