package runner

import (
	"context"
	"log/slog"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
)

// The next jobs' files, made ahead. A job's start creates its history,
// the history's head and its workspace, and makes their entries durable
// (an fsync of the job folder, and of the jobs folder for the job
// folder's own entry) before its first agent call. When a wave of jobs
// ends together (scenario 6 of the bench: 200 at once) those creations
// and fsyncs land in the burst of the next wave's starts, while the CPUs
// stand mostly idle in the middle of each wave, every agent at work.
//
// So while jobs wait for a slot, a preparer makes the files of the next
// MaxParallel of them (in the order they wait) at the CPU gate's lowest
// priority (prioAhead: only while no transaction holds or waits for a
// place), one job per place, and fsyncs their folders together, off the
// gate and off every job's path. The start then finds the files made and
// their entries durable (history.Prepare, atomicfile.EntryDurable): it
// creates nothing and fsyncs no folder.
//
// Durability is unchanged: a start skips a folder fsync only when this
// process fsync'd that folder after the entry was made (the generations
// atomicfile keeps); otherwise — the fsync failed or has not ended, or
// the files were made by a process that died since — the first unit
// settles them as it settles a new history. What is made is what a job
// that has not started may hold: an empty history and head are none to
// every reader (history.Prepare), and an empty workspace is what the
// start makes. A job removed, edited or cancelled before its start keeps
// them harmlessly.
//
// Only jobs whose manifest the intake read and checked, that are active
// and have never recorded anything, are prepared; a job that runs at once
// (a slot free) waits for nothing and is never prepared: one job arriving
// on an idle daemon costs nothing more.

// aheadBatch is how many jobs' files the preparer makes before fsyncing
// their folders: one fsync of the jobs folder serves them all, and their
// job folders' fsyncs run side by side.
const aheadBatch = 16

// acquire takes a place in s.sem for run r, or returns false once ctx
// ends. A run that has to wait joins the line the preparer works from.
func (s *Scheduler) acquire(ctx context.Context, r *run) bool {
	select {
	case s.sem <- struct{}{}:
		return true
	default:
	}
	s.mu.Lock()
	r.waiting = s.waitq.PushBack(r)
	s.kickAhead()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waitq.Remove(r.waiting)
		r.waiting = nil
		s.kickAhead() // the next MaxParallel moved on by one
		s.mu.Unlock()
	}()
	select {
	case s.sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// kickAhead starts the preparer if it is not at work (s.mu held). It ends
// by itself once nothing is left to prepare (nextAhead).
func (s *Scheduler) kickAhead() {
	if s.aheadOn || s.closed {
		return
	}
	s.aheadOn = true
	s.wg.Add(1)
	go s.ahead()
}

// ahead is the preparer: it makes the files of the next jobs in line, a
// batch at a time, then settles their entries.
func (s *Scheduler) ahead() {
	defer s.wg.Done()
	gh := &gateHold{g: s.Engine.gate}
	var dirs []string
	for {
		r := s.nextAhead(len(dirs) == 0)
		if r != nil {
			gh.enter(prioAhead)
			if dir := s.prepareJob(r); dir != "" {
				dirs = append(dirs, dir)
			}
			gh.leave()
		}
		if len(dirs) > 0 && (r == nil || len(dirs) == aheadBatch) {
			// The folders' fsyncs, joined with any in flight that covers
			// them; a failure leaves them dirty, for the job's first unit
			// to settle.
			dirs = append(dirs, s.Engine.Env.Store.Dir)
			if err := atomicfile.SyncDirtyStart(dirs...)(); err != nil {
				s.Logger.Debug("job folders prepared ahead not settled", "err", err.Error())
			}
			dirs = dirs[:0]
			continue
		}
		if r == nil {
			return // nextAhead has let s.aheadOn go
		}
	}
}

// nextAhead picks the next run among the first MaxParallel in line whose
// files may be made ahead, and marks it so that it is picked once. None:
// nil, and with last (the preparer has nothing of its own left to
// settle) the preparer ends (s.aheadOn), under the same lock as the
// look, so that a run joining the line meanwhile starts a new one.
func (s *Scheduler) nextAhead(last bool) *run {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		n := 0
		for e := s.waitq.Front(); e != nil && n < cap(s.sem); e, n = e.Next(), n+1 {
			r := e.Value.(*run)
			if !r.ahead {
				r.ahead = true
				if preparable(r.seed) {
					return r
				}
			}
		}
	}
	if last {
		s.aheadOn = false
	}
	return nil
}

// preparable says whether a job read as l may have its files made
// ahead: checked by the intake, runnable, never started, nothing
// recorded (its manifest would say so: run.updated_at).
func preparable(l *jobstore.Loaded) bool {
	if l == nil || l.M == nil {
		return false
	}
	m := l.M
	return m.Status.Active() && m.Schedule == nil && m.Run.StartedAt == "" && m.Run.UpdatedAt == ""
}

// prepareJob makes run r's files, if it still waits for a slot and
// nobody holds its lock (a steward's command: it is left alone). It
// returns the job's folder if it made them, its entries noted dirty.
func (s *Scheduler) prepareJob(r *run) string {
	store := s.Engine.Env.Store
	lk, held, err := store.TryLockJob(r.id)
	if err != nil || !held {
		return ""
	}
	defer lk.Unlock() //nolint:errcheck // closing the descriptor releases it anyway
	s.mu.Lock()
	waiting := r.waiting != nil
	s.mu.Unlock()
	if !waiting {
		return "" // its start has come: it makes them itself
	}
	dir := store.JobDir(r.id)
	made, err := history.Prepare(dir)
	if err != nil || !made {
		if err != nil {
			s.Logger.Debug("job's files not prepared ahead", slog.String("job_id", r.id), slog.String("err", err.Error()))
		}
		return ""
	}
	// A workspace already there (or anything in its place) is the
	// start's to check (checkWorkspace), as without a preparation.
	_ = store.MakeWorkspace(r.id)
	// The job folder's entry in the jobs folder: the preparer's fsync
	// of the jobs folder covers it (EntryDurable at the history's open).
	atomicfile.MarkCreated(dir)
	return dir
}
