package runner

import (
	"container/list"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
)

// Defaults for StorageRetryInitial and StorageRetryMax.
const (
	DefaultStorageRetryInitial = time.Second
	DefaultStorageRetryMax     = time.Minute
)

// Scheduler runs jobs in parallel, at most MaxParallel at once, never one
// job twice at the same time. A run past its last agent call, recording
// the job's end, no longer counts among the MaxParallel (slot): at most as
// many again may be doing that.
type Scheduler struct {
	Engine *Engine
	Logger *slog.Logger
	// A run that failed because the disk refused a write (full, over
	// quota, read-only, I/O error) is run again after a wait that doubles
	// from StorageRetryInitial up to StorageRetryMax. Set them before the
	// first Nudge.
	StorageRetryInitial, StorageRetryMax time.Duration
	// OnStall, if set, hears that a job is stalled on its storage (code
	// is the error code) or, with code "", that it no longer is (metrics).
	// The stall is also noted for `logist status` (jobstore.WriteStall).
	OnStall func(id, code string)
	// OnRun, if set, hears that a run of job id has begun on its own
	// goroutine, before it waits for a slot (the daemon's intake latency).
	OnRun func(id string)
	// OnEnd, if set, hears that a run of job id has ended, before the
	// job may run again (the daemon settles a placement no unit of the
	// run made durable: jobstore.SettlePlaced).
	OnEnd func(id string)
	// OnIdle, if set, hears that the last running job has ended: no job
	// runs now (the daemon collects garbage then: idlegc.go). Called on
	// the ending run's goroutine; it must not block.
	OnIdle func()

	sem chan struct{}
	// ending holds the runs that gave their place in sem back once their
	// last agent call returned and now record the job's end (slot.leave):
	// as many as sem, so that at most twice MaxParallel jobs are open.
	ending  chan struct{}
	mu      sync.Mutex
	active  map[string]*run
	closed  bool
	wg      sync.WaitGroup
	idle    chan struct{} // closed and replaced when the last run ends
	baseCtx context.Context
	quit    chan struct{} // closed by Close and Stop: waits before a retry end
	quitted sync.Once
	// waitq holds the runs waiting for a place in sem, in the order they
	// came, and aheadOn says the preparer is at work on them (ahead.go).
	waitq   list.List
	aheadOn bool
}

type run struct {
	id     string
	cancel context.CancelCauseFunc
	// waiting is the run's place in s.waitq while it waits for a slot;
	// ahead says the preparer has picked it (ahead.go).
	waiting *list.Element
	ahead   bool
	// again is set when the job was nudged while running: look once more
	// when this run ends (a steward may have resumed it meanwhile).
	again bool
	// seed is the manifest as last read for the run, until the run takes
	// it for its first transaction (s.mu): a nudge while the run waits
	// for a slot brings a newer read, or none (a read that failed).
	seed *jobstore.Loaded
}

// NewScheduler returns a scheduler; runs get contexts derived from ctx.
func NewScheduler(ctx context.Context, e *Engine, maxParallel int, logger *slog.Logger) *Scheduler {
	if maxParallel < 1 {
		maxParallel = 1
	}
	return &Scheduler{Engine: e, Logger: logger, sem: make(chan struct{}, maxParallel), ending: make(chan struct{}, maxParallel), active: map[string]*run{},
		idle: make(chan struct{}), baseCtx: ctx, quit: make(chan struct{}),
		StorageRetryInitial: DefaultStorageRetryInitial, StorageRetryMax: DefaultStorageRetryMax}
}

// Nudge tells the scheduler job id may have changed. A runnable job that
// is not running starts; a running job whose manifest a steward moved out
// of the active statuses has its call in flight killed.
func (s *Scheduler) Nudge(id string) {
	l, err := s.Engine.Env.Store.LoadFile(id)
	s.nudge(id, l, err)
}

// NudgeLoaded is Nudge for a caller that has just read and checked the
// manifest (jobstore.Store.LoadFile): the run starts from that read, not
// from another (Engine.RunFrom). It reports whether the job runs (started
// now, or already running). l.M must not change from now on.
func (s *Scheduler) NudgeLoaded(id string, l *jobstore.Loaded) bool { return s.nudge(id, l, nil) }

func (s *Scheduler) nudge(id string, l *jobstore.Loaded, err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if r, ok := s.active[id]; ok {
		r.again = true
		if r.seed != nil {
			r.seed = l // the newer read, or none
		}
		if err == nil && !l.M.Status.Active() {
			r.cancel(ErrHalted)
			return false
		}
		return true
	}
	if err != nil || !l.M.Status.Active() || l.M.Schedule != nil { // templates never run themselves
		return false
	}
	s.start(id, l)
	return true
}

// takeSeed is the read a run of job id was started or last nudged with,
// once: its first attempt starts from it.
func (s *Scheduler) takeSeed(r *run) *jobstore.Loaded {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := r.seed
	r.seed = nil
	return l
}

// start launches a run of job id, whose manifest was just read as l; s.mu
// is held.
func (s *Scheduler) start(id string, l *jobstore.Loaded) {
	ctx, cancel := context.WithCancelCause(s.baseCtx)
	r := &run{id: id, cancel: cancel, seed: l}
	s.active[id] = r
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.end(id, r)
		if s.OnEnd != nil {
			defer s.OnEnd(id)
		}
		if s.OnRun != nil {
			s.OnRun(id)
		}
		// A refusal an earlier run noted goes once a run succeeds.
		_, stalled := s.Engine.Env.Store.ReadStall(id)
		defer func() {
			if stalled {
				s.stall(id, nil)
			}
		}()
		full := "" // the code of the last attempt's write the disk refused
		for attempt := 1; ; attempt++ {
			// A disk still full would take the next attempt's agent call
			// and drop its answer (not recorded, its cost not counted),
			// at every retry: the storage is asked first. Only its
			// refusal holds the job back; the run finds out the rest.
			var probe error
			if full != "" {
				if perr := s.Engine.Env.Store.ProbeSpace(); perr != nil && storageRefused(perr) {
					probe = perr
				}
			}
			err := probe
			if probe == nil {
				if !s.acquire(ctx, r) {
					return
				}
				sl := &slot{s: s}
				err = s.runOnce(context.WithValue(ctx, slotKey{}, sl), id, s.takeSeed(r)) // nil for a later attempt: read again
				sl.end()
				if err == nil {
					return
				}
			}
			code, retry := runErrorCode(err)
			if probe != nil && storageFull(probe) {
				code = full // still what the job waits for
			}
			full = ""
			if retry && storageFull(err) {
				full = code
			}
			if !retry || ctx.Err() != nil {
				attrs := []any{"err", err.Error()}
				if stack, ok := FaultStack(err); ok {
					attrs = append(attrs, "stack", string(stack))
				}
				joblog.Log(s.Logger, "job run failed", joblog.Problem{Job: id, Code: code, Attempt: attempt}, attrs...)
				switch {
				case ctx.Err() != nil:
				case code == codes.JobGone:
					// No job is left to say why: a note would name
					// nothing and outlive it. One an earlier run left
					// goes.
					stalled = true
				default:
					// Not run again by itself: say why where logist
					// status looks (its manifest still says RUNNING).
					s.refused(id, code, err)
					stalled = false
				}
				return
			}
			// The disk refused a write. Nothing half-written is kept (the
			// history cuts a partial record, the manifest is replaced
			// atomically), so the job is as a crash at that point would
			// have left it: wait, without holding a slot other jobs need,
			// and run it again; the run's recovery takes it from there.
			d := s.storageBackoff(attempt)
			joblog.Log(s.Logger, "storage error: job paused, will run again", joblog.Problem{Job: id, Code: code, Attempt: attempt},
				"err", err.Error(), "retry_in", d.String())
			stalled = true
			now := time.Now().UTC()
			s.stall(id, &jobstore.Stall{Code: code, Reason: err.Error(), Since: now.Format(time.RFC3339), RetryAt: now.Add(d).Format(time.RFC3339), Attempt: attempt})
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			case <-s.quit:
				t.Stop()
				return
			}
		}
	}()
}

// slot is a run's place among the MaxParallel. The run gives it back when
// it ends, or earlier, as soon as its last agent call has returned
// (leaveSlot): what is left, committing the job's end (an fsync, the
// manifest, jobHistory.json), is no agent at work, and the next job's
// agent starts beside it instead of after it. Nothing is made durable any
// later for it: the end is committed as before, only no longer on the
// next job's path. The run then holds a place in ending, so that the
// jobs being opened and closed stay bounded too; when ending is full it
// keeps its place in sem to the end, as before.
type slot struct {
	s       *Scheduler
	mu      sync.Mutex
	leaving bool // its place in sem given back for one in ending
}

type slotKey struct{}

// leave gives the run's place in sem back if a place in ending is free.
func (sl *slot) leave() {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.leaving {
		return
	}
	select {
	case sl.s.ending <- struct{}{}:
		sl.leaving = true
		<-sl.s.sem
	default:
	}
}

// end gives back whichever place the run holds.
func (sl *slot) end() {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.leaving {
		<-sl.s.ending
		return
	}
	<-sl.s.sem
}

// leaveSlot tells the scheduler that ran ctx's run that the run makes no
// more agent calls (see slot). Without a scheduler (a test's direct
// Engine.Run) it does nothing.
func leaveSlot(ctx context.Context) {
	if sl, ok := ctx.Value(slotKey{}).(*slot); ok {
		sl.leave()
	}
}

// runOnce runs the job once, unless its history has gone missing. l is
// the manifest as read for the run, if the caller has it; the run's first
// transaction starts from it (Engine.RunFrom).
func (s *Scheduler) runOnce(ctx context.Context, id string, l *jobstore.Loaded) error {
	if l == nil {
		l, _ = s.Engine.Env.Store.LoadFile(id)
	}
	if l != nil {
		if err := jobtx.HistoryGone(s.Engine.Env.Store.JobDir(id), l.M); err != nil {
			return err
		}
	}
	return s.Engine.RunFrom(ctx, id, l)
}

// stall notes that job id is stalled on its storage (st) or no longer is
// (nil), for status and metrics. A note that cannot be written is only
// logged: the run's own retry goes on.
func (s *Scheduler) stall(id string, st *jobstore.Stall) {
	store := s.Engine.Env.Store
	var err error
	code := ""
	if st != nil {
		if prev, ok := store.ReadStall(id); ok {
			st.Since = prev.Since // stalled since the first refusal
		}
		code, err = st.Code, store.WriteStall(id, *st)
	} else {
		err = store.ClearStall(id)
	}
	if err != nil {
		s.Logger.Warn("cannot note the job's stall", "job_id", id, "err", err.Error())
	}
	if s.OnStall != nil {
		s.OnStall(id, code)
	}
}

// refused notes that a run of job id was refused with code and will not be
// retried (a cut or corrupt history), for logist status. Not a stall: the
// stalled-jobs gauge does not count it.
func (s *Scheduler) refused(id, code string, err error) {
	store := s.Engine.Env.Store
	since := time.Now().UTC().Format(time.RFC3339)
	if prev, ok := store.ReadStall(id); ok && prev.Refused && prev.Code == code {
		since = prev.Since // refused since the first refusal
	}
	if werr := store.WriteStall(id, jobstore.Stall{Code: code, Reason: err.Error(), Since: since, Refused: true}); werr != nil {
		s.Logger.Warn("cannot note the job's refusal", "job_id", id, "err", werr.Error())
	}
}

func (s *Scheduler) storageBackoff(attempt int) time.Duration {
	d, limit := s.StorageRetryInitial, s.StorageRetryMax
	if d <= 0 {
		d = DefaultStorageRetryInitial
	}
	if limit < d {
		limit = d
	}
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// storageRefused reports a write the job's storage refused, which may
// succeed later: the disk (storageFull) or access to the job's files
// (storageDenied). runErrorCode tells the two apart.
func storageRefused(err error) bool { return storageDenied(err) || storageFull(err) }

// storageDenied reports a job's file or folder that refused access: made
// read-only for a moment, an ownership being fixed. It may pass.
func storageDenied(err error) bool {
	return errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

// storageFull reports a write the disk refused: it may succeed later,
// once space (or the file system) is back.
func storageFull(err error) bool {
	for _, e := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// runErrorCode names why a run failed, for the log, and whether the
// scheduler runs the job again by itself.
func runErrorCode(err error) (code string, retry bool) {
	var missing *jobtx.HistoryMissingError
	var notFile *history.NotFileError
	msg := err.Error()
	switch {
	case errors.Is(err, jobstore.ErrNotFound):
		// The job's folder or manifest went away under its run (removed,
		// renamed): no job is left to note a refusal for, and a note
		// would outlive it in the stall folder.
		return codes.JobGone, false
	case errors.As(err, &missing), errors.Is(err, history.ErrMissing):
		return codes.HistoryMissing, false
	case storageDenied(err):
		// It may pass: retried.
		return codes.StorageDenied, true
	case storageFull(err):
		// What failed is named before the first colon ("append history:
		// write …", "save manifest: …"); paths may say anything.
		before, _, _ := strings.Cut(msg, ":")
		var words []string
		for _, w := range strings.Fields(before) {
			if !strings.ContainsRune(w, filepath.Separator) {
				words = append(words, w)
			}
		}
		op := strings.Join(words, " ")
		switch {
		case strings.Contains(op, "history"):
			return codes.HistoryWrite, true
		case strings.Contains(op, "manifest"):
			return codes.ManifestWrite, true
		}
		return codes.StorageWrite, true
	case errors.As(err, &notFile):
		// A symlink, a FIFO or a folder where the history's file is.
		return codes.HistoryCorrupt, false
	case errors.Is(err, fs.ErrNotExist) && strings.Contains(msg, "stat history"):
		// Deleted under a run in progress: never start a new one.
		return codes.HistoryMissing, false
	case strings.Contains(msg, "history") && strings.Contains(msg, "newer than this logist supports"):
		// Written by a newer Logist: never cut off as if torn, never run.
		return codes.HistoryTooNew, false
	case strings.Contains(msg, "history") && strings.Contains(msg, "corrupt"):
		return codes.HistoryCorrupt, false
	}
	return codes.RunFailed, false
}

func (s *Scheduler) end(id string, r *run) {
	r.cancel(nil)
	s.mu.Lock()
	delete(s.active, id)
	again := r.again && !s.closed
	idle := len(s.active) == 0
	if idle {
		close(s.idle)
		s.idle = make(chan struct{})
	}
	s.mu.Unlock()
	if again {
		s.Nudge(id)
	} else if idle && s.OnIdle != nil {
		s.OnIdle()
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
	s.quitted.Do(func() { close(s.quit) })
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
	s.quitted.Do(func() { close(s.quit) })
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
