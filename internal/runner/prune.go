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

// pruner prunes a run's requests/ folder as the run goes: once every
// agent.KeepRequests calls, counted across steps, since one step may
// chain any number of calls (each outcome held for the next intent). A
// count of steps pruned such a chain never: its requests/ folder grew by
// a file per call, and every call made a new inode where the pool
// (agent/reqpool.go) would have given it a dropped call's file. The
// pruning runs beside the call's agent, off the path from one agent to
// the next; it touches only files of calls older than the newest
// agent.KeepRequests, never the call's own or a predicted call's.
// Snapshot objects no listing names are a crash's leftovers: the run's
// start (prune) takes them.
type pruner struct {
	e     *Engine
	id    string
	calls int // since the last pruning
}

// beside counts n calls about to be made and, when a pruning is due,
// starts it; the caller waits for it with the returned func once the
// calls are over, before the job's next transaction.
func (p *pruner) beside(n int) (wait func()) {
	p.calls += n
	if p.calls < agent.KeepRequests {
		return func() {}
	}
	p.calls = 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := agent.PruneRequests(p.e.Env.Store.JobDir(p.id)); err != nil {
			p.e.Env.Logger.Warn("pruning requests failed", "job_id", p.id, "err", err.Error())
		}
	}()
	return func() { <-done }
}
