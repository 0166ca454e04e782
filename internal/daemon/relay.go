package daemon

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/signing"
)

// handoverFile, in the jobs folder's .logist, is where a daemon that stops
// cleanly writes the time up to which it has logged other processes'
// records; the next daemon logs them from there on, so that the steward's
// commands while no daemon ran reach the log at the next start. It is
// removed at start: after a crash there is none, and the next daemon logs
// from its own start (it cannot tell which of the records after the
// crashed daemon's last handover that daemon had logged).
const handoverFile = "log-handover"

// relay puts in the daemon's log the transitions and errors that another
// process records in a job's history — the steward's CLI (resume, halt,
// rollback, reply, pm, activate), whose own log goes nowhere a steward
// would look — exactly once, with the fields of the daemon's own lines
// (jobtx.TransitionLine, jobtx.ErrorLine), and moves the job gauges
// with those transitions. So the daemon's log holds every transition of
// its jobs, whoever made it.
//
// Whose a record is: the relay follows each job's history, and the
// daemon's own transactions tell it (jobtx.Witness), under the job's
// lock, where the history stands as they begin — records it has not read
// up to there are another process's: it logs them first — and how far
// they wrote: those it skips, jobtx logged them as they were made. Other
// processes' appends are also read when the watcher reports that a
// history is no longer the size the daemon left it, under the job's lock
// too, so that no append of the daemon's own is met half-way.
//
// Which records are this daemon's to log: those recorded at or after
// from (its start, or when the previous daemon stopped cleanly:
// handoverFile), and, in the last pass at shutdown, before until.
type relay struct {
	log   *slog.Logger
	store *jobstore.Store
	obs   interface {
		JobStatus(id string, from, to lifecycle.Status)
	}
	from time.Time

	mu    sync.Mutex
	until time.Time
	jobs  map[string]*followed
	// pending are jobs whose history the watcher reported changed.
	pending map[string]bool
	wake    chan struct{}
}

// followed is a job's history as the relay has accounted for it.
type followed struct {
	// f has passed on (or skipped) every record accounted for; used
	// only under the job's lock.
	f *history.Follower
	// size is the active file's size when it was last read or written
	// here (under relay.mu): a watcher event that finds it so is news of
	// nothing.
	size int64
	// open: a transaction of this daemon holds the job's lock (from Begun
	// to Ended, under relay.mu). No other process's command can append
	// meanwhile (it takes the lock first), so what the watcher reports
	// then is the daemon's own append: heard notes it, and the history
	// is checked once at Ended, not stat'd and waited for under the lock
	// (catchUp) while the transaction that wrote it still holds it.
	open, heard bool
}

// mtimeSlack: a file's modification time comes from a coarse clock (a
// few milliseconds behind the one records are stamped with), so a history
// counts as written before from only if it was so by this much.
const mtimeSlack = time.Second

// writtenBefore says whether fi (a history's active file) was last written
// before t for certain.
func writtenBefore(fi os.FileInfo, t time.Time) bool { return fi.ModTime().Before(t.Add(-mtimeSlack)) }

// errUntil stops a read at the first record after the relay's until.
var errUntil = errors.New("record after the last pass's end")

// newRelay takes up where the previous daemon left off (handoverFile), or
// starts at now.
func newRelay(store *jobstore.Store, log *slog.Logger, obs interface {
	JobStatus(id string, from, to lifecycle.Status)
}, now time.Time) *relay {
	r := &relay{log: log, store: store, obs: obs, from: now, jobs: map[string]*followed{}, pending: map[string]bool{},
		wake: make(chan struct{}, 1)}
	p := filepath.Join(store.Dir, signing.Dir, handoverFile)
	if b, err := os.ReadFile(p); err == nil {
		if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b))); err == nil && t.Before(now) {
			r.from = t
		}
		// Gone for good before this daemon logs anything: a crash must not
		// make the next one log again what this one will.
		err = os.Remove(p)
		if err == nil {
			err = atomicfile.SyncDir(filepath.Dir(p))
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Warn("cannot remove the log handover; after a crash the next start may log some steward changes twice", "err", err.Error())
		}
	}
	return r
}

func (r *relay) job(id string) *followed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobs[id]
}

// Begun (jobtx.Witness) logs what another process recorded since the
// relay last read the job's history.
func (r *relay) Begun(t *jobtx.Tx) {
	end := t.Log.State().NextSeq - 1
	j := r.job(t.ID)
	if j != nil && j.f.Last() == end {
		return
	}
	if j == nil || j.f.Last() > end { // a new history under the same name
		j = r.follow(t.ID, t.Dir, end)
	}
	if j.f.Last() < end {
		r.read(t.ID, j)
	}
	r.mu.Lock()
	j.size, j.open = t.Log.Size(), true
	r.mu.Unlock()
}

// Ended (jobtx.Witness): the transaction lets the lock go. A change the
// watcher reported while it held it is checked now, as any other.
func (r *relay) Ended(t *jobtx.Tx) {
	r.mu.Lock()
	j := r.jobs[t.ID]
	heard := j != nil && j.heard
	if j != nil {
		j.open, j.heard = false, false
	}
	r.mu.Unlock()
	if heard {
		r.notify(t.ID)
	}
}

// Wrote (jobtx.Witness) passes over the daemon's own records.
func (r *relay) Wrote(t *jobtx.Tx) {
	j := r.job(t.ID)
	if j == nil {
		return // Begun made one, unless the job's folder went away since
	}
	j.f.Skip(t.Log.State().NextSeq - 1)
	r.mu.Lock()
	j.size = t.Log.Size()
	r.mu.Unlock()
}

// follow starts following a job's history the relay has not read yet,
// from its first record: those from before from are passed over as they
// are read. When its last record is known (end >= 0) and it was last
// written before from, none is new: the follower starts after end.
func (r *relay) follow(id, dir string, end int64) *followed {
	j := &followed{f: history.NewFollower(dir)}
	if end >= 0 {
		if fi, err := os.Stat(history.Path(dir)); err == nil && writtenBefore(fi, r.from) {
			j.f = history.NewFollowerAfter(dir, end)
		}
	}
	r.mu.Lock()
	r.jobs[id] = j
	r.mu.Unlock()
	return j
}

// read logs the records of j's history it has not accounted for yet.
func (r *relay) read(id string, j *followed) {
	err := j.f.Poll(func(e history.Entry) error { return r.pass(id, &e.Record) })
	if err != nil && !errors.Is(err, errUntil) {
		r.log.Warn("cannot read a job's history for the log; its steward changes are logged when it can be read",
			"job_id", id, "err", err.Error())
	}
}

// pass logs one record another process wrote.
func (r *relay) pass(id string, rec *history.Record) error {
	at, err := time.Parse(time.RFC3339Nano, rec.Time)
	if err != nil || at.Before(r.from) {
		return nil // before this daemon's time: not its to log
	}
	r.mu.Lock()
	until := r.until
	r.mu.Unlock()
	if !until.IsZero() && !at.Before(until) {
		return errUntil // the next daemon's
	}
	switch {
	case rec.Type == history.TypeTransition && rec.Transition != nil:
		tr := rec.Transition
		joblog.LogTransition(r.log, jobtx.TransitionLine(id, tr, tr.Reason), "seq", rec.Seq)
		r.obs.JobStatus(id, lifecycle.Status(tr.From), lifecycle.Status(tr.To))
	case rec.Type == history.TypeError && rec.Error != nil:
		joblog.Log(r.log, rec.Error.Message, jobtx.ErrorLine(id, rec), "seq", rec.Seq)
	}
	return nil
}

// notify says the watcher saw job id's history change.
func (r *relay) notify(id string) {
	r.mu.Lock()
	r.pending[id] = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// forget drops what the relay knows of a job that left the folder: a job
// made again under its name has a history of its own.
func (r *relay) forget(id string) {
	r.mu.Lock()
	delete(r.jobs, id)
	delete(r.pending, id)
	r.mu.Unlock()
}

// reset forgets every job (the jobs folder itself went away).
func (r *relay) reset() {
	r.mu.Lock()
	r.jobs, r.pending = map[string]*followed{}, map[string]bool{}
	r.mu.Unlock()
}

// run reads the histories that changed while no daemon watched them (what
// the steward did while no daemon ran, or before the watcher was on its
// job), then those the watcher reports changed, until ctx ends.
func (r *relay) run(ctx context.Context) {
	r.sweep(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
			r.drain()
		}
	}
}

func (r *relay) drain() {
	r.mu.Lock()
	ids := make([]string, 0, len(r.pending))
	for id := range r.pending {
		ids = append(ids, id)
	}
	r.pending = map[string]bool{}
	r.mu.Unlock()
	for _, id := range ids {
		r.check(id, false)
	}
}

// check reads job id's history if it is not the size the daemon left it
// (or, for a job the relay has not read yet: if sweeping and the history
// was written since from).
func (r *relay) check(id string, sweeping bool) {
	r.mu.Lock()
	if j := r.jobs[id]; j != nil && j.open && !sweeping {
		j.heard = true // for Ended
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	fi, err := os.Stat(history.Path(r.store.JobDir(id)))
	if err != nil {
		return
	}
	r.mu.Lock()
	j := r.jobs[id]
	same := j != nil && j.size == fi.Size()
	r.mu.Unlock()
	// An empty history the relay has not followed yet holds nothing to
	// read (one made ahead of its job's start: runner's ahead.go); its
	// first records bring another event.
	if same || (j == nil && (fi.Size() == 0 || (sweeping && writtenBefore(fi, r.from)))) {
		return
	}
	r.catchUp(id)
}

// sized says whether the relay has accounted for j's history up to size.
func (r *relay) sized(j *followed, size int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return j.size == size
}

// catchUp reads job id's history under its lock.
func (r *relay) catchUp(id string) {
	lk, err := r.store.LockJob(id)
	if err != nil {
		return // gone, or no longer a job
	}
	defer lk.Unlock() //nolint:errcheck // closing the descriptor releases it anyway
	j := r.job(id)
	if j == nil {
		j = r.follow(id, r.store.JobDir(id), -1)
	} else if fi, err := os.Stat(history.Path(r.store.JobDir(id))); err == nil && r.sized(j, fi.Size()) {
		// The change was the daemon's own append, heard while its
		// transaction still held the lock: Wrote has accounted for it
		// since. Reading would parse the daemon's records again (the
		// follower skips them by number, not by offset) once per call.
		return
	}
	r.read(id, j)
	if fi, err := os.Stat(history.Path(r.store.JobDir(id))); err == nil {
		r.mu.Lock()
		j.size = fi.Size()
		r.mu.Unlock()
	}
}

// sweep reads every history that changed behind the relay's back: at
// start, the steward's commands since the previous daemon stopped; at
// shutdown, those the watcher reported too late.
func (r *relay) sweep(ctx context.Context) {
	ents, err := os.ReadDir(r.store.Dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if ctx.Err() != nil {
			return // the last pass sweeps again
		}
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			r.check(e.Name(), true)
		}
	}
}

// finish is the last pass, once the daemon writes no more: it logs what
// other processes recorded until now, and hands the rest to the next
// daemon.
func (r *relay) finish() {
	until := time.Now()
	r.mu.Lock()
	r.until = until
	r.mu.Unlock()
	r.drain()
	r.sweep(context.Background())
	p := filepath.Join(r.store.Dir, signing.Dir, handoverFile)
	if err := atomicfile.WriteFile(p, []byte(until.UTC().Format(time.RFC3339Nano)+"\n"), 0o600); err != nil {
		r.log.Warn("cannot write the log handover; steward changes made before the next start will not be logged", "err", err.Error())
	}
}
