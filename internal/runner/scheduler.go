package runner

import (
	"context"
	"log/slog"
	"sync"

	"github.com/logist/logist/internal/jobstore"
)

// Scheduler runs jobs in parallel, at most MaxParallel at once, never one
// job twice at the same time.
type Scheduler struct {
	Engine *Engine
	Logger *slog.Logger

	sem     chan struct{}
	mu      sync.Mutex
	active  map[string]*run
	closed  bool
	wg      sync.WaitGroup
	idle    chan struct{} // closed and replaced when the last run ends
	baseCtx context.Context
}

type run struct {
	cancel context.CancelCauseFunc
	// again is set when the job was nudged while running: look once more
	// when this run ends (a steward may have resumed it meanwhile).
	again bool
}

// NewScheduler returns a scheduler; runs get contexts derived from ctx.
func NewScheduler(ctx context.Context, e *Engine, maxParallel int, logger *slog.Logger) *Scheduler {
	if maxParallel < 1 {
		maxParallel = 1
	}
	return &Scheduler{Engine: e, Logger: logger, sem: make(chan struct{}, maxParallel), active: map[string]*run{},
		idle: make(chan struct{}), baseCtx: ctx}
}

// Nudge tells the scheduler job id may have changed. A runnable job that
// is not running starts; a running job whose manifest a steward moved out
// of the active statuses has its call in flight killed.
func (s *Scheduler) Nudge(id string) {
	m, err := s.Engine.Env.Store.Load(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if r, ok := s.active[id]; ok {
		r.again = true
		if err == nil && !m.Status.Active() {
			r.cancel(ErrHalted)
		}
		return
	}
	if err != nil || !m.Status.Active() {
		return
	}
	s.start(id)
}

// start launches a run; s.mu is held.
func (s *Scheduler) start(id string) {
	ctx, cancel := context.WithCancelCause(s.baseCtx)
	r := &run{cancel: cancel}
	s.active[id] = r
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			s.end(id, r)
			return
		}
		if err := s.Engine.Run(ctx, id); err != nil {
			s.Logger.Error("job run failed", "type", "error", "job_id", id, "status", "", "actor", "SYSTEM",
				"error_code", "RUN_FAILED", "attempt", 0, "checkpoint_id", "", "err", err.Error())
		}
		<-s.sem
		s.end(id, r)
	}()
}

func (s *Scheduler) end(id string, r *run) {
	r.cancel(nil)
	s.mu.Lock()
	delete(s.active, id)
	again := r.again && !s.closed
	if len(s.active) == 0 {
		close(s.idle)
		s.idle = make(chan struct{})
	}
	s.mu.Unlock()
	if again {
		s.Nudge(id)
	}
}

// Running reports how many jobs are running.
func (s *Scheduler) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active)
}

// Idle returns a channel closed when no job runs (now or later).
func (s *Scheduler) Idle() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.active) == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.idle
}

// Stop takes no new work and cancels every run with cause (ErrShutdown),
// then waits for them to record what they were doing.
func (s *Scheduler) Stop(cause error) {
	s.mu.Lock()
	s.closed = true
	for _, r := range s.active {
		r.cancel(cause)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Close takes no new work (already running jobs go on).
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// Wait blocks until every run has ended.
func (s *Scheduler) Wait() { s.wg.Wait() }

// Runnable reports whether an entry is a job the daemon should run.
func Runnable(e jobstore.Entry) bool {
	return e.Err == nil && e.Manifest != nil && e.Unplaced == "" && e.Manifest.Status.Active()
}
