package runner

import (
	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/snapshot"
)

// prune applies the job folder's pruning policy when a run of job id
// starts, and every agent.KeepRequests steps of a long run
// (docs/operations.md, "What a job folder keeps"): the request
// files of all but the newest agent.KeepRequests calls, and snapshot
// objects no listing names (a crash's leftovers); at a run's start with
// predicted (the engine predicts calls), first the files a daemon that
// died made for a predicted call (agent.TidyRequests: one read of the
// folder for both). Failures are logged: pruning never stops a job.
func (e *Engine) prune(id string, predicted bool) {
	dir := e.Env.Store.JobDir(id)
	n, err := agent.TidyRequests(dir, predicted)
	if err != nil {
		e.Env.Logger.Warn("pruning requests failed", "job_id", id, "err", err.Error())
	}
	files, bytes, serr := snapshot.Prune(dir)
	if serr != nil {
		e.Env.Logger.Warn("pruning snapshot objects failed", "job_id", id, "err", serr.Error())
	}
	if n > 0 || files > 0 {
		e.Env.Logger.Info("pruned job folder", "job_id", id, "request_files", n, "snapshot_objects", files, "snapshot_bytes", bytes)
	}
}
