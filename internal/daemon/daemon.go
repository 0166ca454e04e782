// Package daemon is logistd: it serves one jobs folder, picks up manifests
// as they are dropped (fsnotify, plus a full scan at start and whenever the
// watcher overflows), and runs them with the runner's scheduler.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/cluster"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/metrics"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/schedule"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/schemas"
)

// Daemon is a running logistd.
type Daemon struct {
	opts    Options
	log     *slog.Logger
	store   *jobstore.Store
	sched   *runner.Scheduler
	engine  *runner.Engine
	metrics *metrics.Metrics
	relay   *relay
	ready   atomic.Bool
	checks  lateChecks
	// scanMu makes scans take turns; rescans asks for one in the
	// background (an overflow, the folder back) without holding up the
	// event loop.
	scanMu   sync.Mutex
	rescans  lateChecks
	placeMu  sync.Mutex // place, from a scan and an event at once
	scanDone chan struct{}
	// scanCtx ends when the daemon stops: a scan under way gives up
	// (scans, waited for before Run returns).
	scanCtx context.Context
	scans   sync.WaitGroup

	mu      sync.Mutex
	invalid map[string]string    // job or file -> last reported error
	denied  map[string]string    // job -> why its manifest cannot be read (reportDenied)
	seen    map[string]time.Time // runnable jobs not yet called: when first seen
	// arrivals holds, for the jobs the event loop handed over, when their
	// folder or file arrived, until their run begins (intake latency).
	arrivals map[string]time.Time
	cron     *schedule.Scheduler
	// stewardOff is how far the steward events file has been read.
	stewardOff int64
	watched    map[string]bool
	// polled holds the job folders watched by polling: the watcher's
	// limit was reached (unwatched.go).
	polled polled
	// placed holds the folders place made, until the watcher reports their
	// creation: that event is the daemon's own and carries no news.
	placed map[string]time.Time
	// quiet holds a timer per bare manifest not yet complete JSON
	// (placeWhenQuiet).
	quiet   map[string]*time.Timer
	watcher *fsnotify.Watcher
	// fresh, while a scan runs, holds the jobs an event read meanwhile.
	fresh map[string]bool
	// costWarned is the cost warning last logged per job (warnCost).
	costWarned map[string]string

	lock *jobstore.Lock // the daemon lock of the jobs folder
	key  *keyHolder
	// root is the jobs folder being served. rootGone is set while it is
	// gone (removed or moved away): the daemon polls for it to come back.
	root     os.FileInfo
	rootGone bool
}

// testHookStarted, if set, is called once the daemon has scanned the folder
// (tests reach the watcher through it).
var testHookStarted func(*Daemon)

// testHookScanned, if set, is called by every scan once it has read the
// folder and noted what it read, before it forgets what it did not find
// (a test holds it there).
var testHookScanned func(*Daemon)

// keyHolder signs with the jobs folder's key. When the folder is removed and
// recreated the key goes with it; the daemon loads (or makes) the new
// folder's key and swaps it in before it runs any job there.
type keyHolder struct{ k atomic.Pointer[signing.Key] }

func (h *keyHolder) ID() string             { return h.k.Load().ID() }
func (h *keyHolder) Sign(msg []byte) []byte { return h.k.Load().Sign(msg) }

// makeJobsDir makes the jobs folder dir if it is not there, but not the
// folders above it: a mistyped --jobs-dir (/srv/jbos/jobs) would
// otherwise be made whole and served, empty, while the jobs wait in the
// real one.
func makeJobsDir(dir string) error {
	err := os.Mkdir(dir, 0o700)
	switch {
	case err == nil, errors.Is(err, fs.ErrExist):
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("jobs folder %s: its parent folder %s does not exist: logistd makes the jobs folder, not the folders above it (a mistyped --jobs-dir?)", dir, filepath.Dir(filepath.Clean(dir)))
	}
	return fmt.Errorf("jobs folder: %w", err)
}

// Run serves the jobs folder until ctx ends or, with Once, until idle.
func Run(ctx context.Context, o Options, logger *slog.Logger) error {
	if err := makeJobsDir(o.JobsDir); err != nil {
		return err
	}
	store := jobstore.New(o.JobsDir)
	// The engine's saves overwrite manifests in place: a new file per
	// save cost more kernel time than the rest of a transaction.
	store.InPlace = true
	// It notes every save in the change journal: kept open, a note costs
	// four system calls instead of eleven.
	store.KeepJournalOpen = true
	lock, err := store.LockDaemon()
	if err != nil {
		return err
	}

	key, err := signing.LoadOrCreate(store.Dir)
	if err != nil {
		return fmt.Errorf("history signing key: %w", err)
	}

	reg := prometheus.NewRegistry()
	d := &Daemon{opts: o, log: logger, store: store, metrics: metrics.New(reg, Version, Revision),
		invalid: map[string]string{}, denied: map[string]string{}, watched: map[string]bool{}, placed: map[string]time.Time{}, quiet: map[string]*time.Timer{}, seen: map[string]time.Time{}, arrivals: map[string]time.Time{}, costWarned: map[string]string{}, lock: lock, key: &keyHolder{}}
	// The lock may be replaced (the folder recreated): release whichever is held.
	// Closing the descriptor releases it whatever flock(LOCK_UN) says.
	defer func() { _ = d.lock.Unlock() }()
	d.key.k.Store(key)
	// The log's transitions of other processes are this daemon's from now
	// (or from the previous daemon's clean stop) on.
	d.relay = newRelay(store, logger, d.metrics, time.Now())
	env := &jobtx.Env{Store: store, Logger: logger, Obs: d.metrics, Witness: d.relay, Getenv: o.Getenv,
		History: history.Options{Signer: d.key, MaxBytes: o.HistoryMaxBytes, Observe: d.metrics.HistoryWrite}}
	// The storage seam: each unit this process appends is committed
	// through the jobs folder's store, the owner's (cluster.OwnCommit).
	env.History.Commit = cluster.OwnCommit(env)
	// The composition root: the engine and the schedules' steward play
	// the built-in workflows' effects, and import none of them.
	effects := builtins.Effects()
	d.engine = runner.NewEngine(env, effects)
	if o.Budgets != (manifest.Budgets{}) {
		d.engine.Defaults = o.Budgets
	}
	d.engine.Timings = d
	mp, err := startMeter(d.log, d.opts.Listen)
	if err != nil {
		return err
	}
	defer mp.close()
	d.engine.Meter = mp.agents
	d.engine.Contain = containment(o.Sandbox, o.outputCeiling(), d.log, mp, d.metrics)
	d.cron = schedule.New(env, logger, d.metrics, effects)
	if o.cronClock != nil {
		d.cron.Clock = o.cronClock
	}
	d.cron.Created = func(id string) {
		d.watchJob(id)
		d.consider(id, false, time.Time{}, nil)
	}
	// A run the schedule halted (Replace) was saved by this process: tell
	// the scheduler, which kills its call in flight.
	d.cron.Changed = func(id string) { d.sched.Nudge(id) }
	// Runs live until shutdown decides otherwise, not until the signal.
	runCtx, stopRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRuns()
	// The schedules and the relay stop after the runs, before the relay's
	// last pass (stopped, below).
	cronDone, relayDone := make(chan struct{}), make(chan struct{})
	stopped := func() {
		stopRuns()
		if !o.Once {
			<-cronDone
			<-relayDone
		}
		d.relay.finish()
	}
	d.sched = runner.NewScheduler(runCtx, d.engine, o.MaxParallel, logger)
	d.sched.OnStall = d.metrics.Stalled
	d.sched.OnRun = d.runBegun
	d.sched.OnEnd = d.runEnded
	d.sched.OnIdle = func() { collectWhileIdle() }
	_ = store.ClearStalls() // notes a previous daemon left; failing, they are only stale
	if err := store.ReserveStallSpace(); err != nil {
		logger.Warn("cannot reserve space for stall notes: a job stalled on a full disk may not show as Stalled in logist status",
			"path", store.Dir, "err", err.Error())
	}

	if o.Listen != "" {
		// The console's steward signs as the engine does.
		srv, err := d.serve(o.Listen, reg, steward.New(env, effects))
		if err != nil {
			return err
		}
		defer srv.Close() //nolint:errcheck // at exit; nothing to do about it
	}
	logger.Info("logistd starting", "jobs_dir", store.Dir, "version", Version, "once", o.Once, "max_parallel", o.MaxParallel, "signing_key", key.ID())
	warnExposure(logger, store.Dir, consoleTokenFiles(o, store.Dir))

	if !o.Once {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			return fmt.Errorf("watch jobs folder: %w", err)
		}
		defer w.Close() //nolint:errcheck // at exit; a watcher holds no data
		d.watcher = w
		if err := w.Add(store.Dir); err != nil {
			return fmt.Errorf("watch %s: %w", store.Dir, err)
		}
		if d.root, err = os.Stat(store.Dir); err != nil {
			return fmt.Errorf("jobs folder: %w", err)
		}
	}
	// What the first job would otherwise do for the first time in the
	// middle of its pickup (compile the schemas, build the encoders: about
	// 15 ms measured) is done before /readyz says ready.
	warmed := make(chan struct{})
	go func() {
		defer close(warmed)
		if err := schemas.Warm(schemas.Manifest, schemas.Response); err != nil {
			d.logErr("", codes.Schema, err)
		}
		jobtx.Warm(d.key)
	}()
	// Watch first, then scan: a manifest dropped in between is seen twice,
	// never missed. A serving daemon is ready once it watches (new work
	// is picked up at once) while its first scan goes on beside the event
	// loop, starting the jobs to run as it reads them (docs/performance.md,
	// "Readiness"); --once has nothing to serve before it.
	d.scanDone = make(chan struct{})
	scanCtx, stopScans := context.WithCancel(context.WithoutCancel(ctx))
	d.scanCtx = scanCtx
	defer d.scans.Wait()
	defer stopScans()
	if o.Once {
		d.firstScan()
	} else {
		d.scans.Add(1)
		go func() { defer d.scans.Done(); d.firstScan() }()
	}
	if !o.Once {
		go func() { defer close(cronDone); d.cron.Run(runCtx) }()
		go func() { defer close(relayDone); d.relay.run(runCtx) }()
		d.watchStewardEvents()
		if o.Retention > 0 {
			maint := cron.New()
			prune := func() { schedule.Prune(d.store, o.Retention, time.Now(), logger) }
			if _, err := maint.AddFunc("@hourly", prune); err != nil {
				return fmt.Errorf("retention schedule: %w", err)
			}
			maint.Start()
			defer maint.Stop()
			go prune()
		}
	}
	if o.Once {
		// Nothing comes after: the finished jobs' checks are done now,
		// so an invalid manifest is still reported.
		d.checkFinished()
	}
	<-warmed
	d.ready.Store(true)
	d.checkLater()
	if testHookStarted != nil {
		go func() { <-d.scanDone; testHookStarted(d) }()
	}

	if o.Once {
		select {
		case <-d.sched.Idle():
		case <-ctx.Done():
			// A job waiting for disk space (or a long call) must not keep
			// a signalled --once daemon alive.
			err := d.shutdown(ctx)
			stopped()
			return err
		}
		d.sched.Wait()
		d.sched.Close()
		d.settlePlacements()
		stopped()
		logger.Info("logistd done: no runnable job left")
		return nil
	}
	lerr := d.loop(ctx)
	serr := d.shutdown(ctx)
	stopped()
	return errors.Join(serr, lerr)
}

// firstScan is the start-up scan. Then the job gauges are whole
// (logistd_startup_scan_complete), and the scan's garbage is handed back.
func (d *Daemon) firstScan() {
	defer close(d.scanDone)
	// The views check after the scan starts from the scan's heap: the
	// scan's GC target holds until the garbage is handed back.
	release := holdScanGC()
	defer release()
	stopped := d.scan()
	d.metrics.ScanComplete()
	// The views of the jobs found not running are brought up to date
	// (views.go): in the background of a serving daemon, before --once
	// exits.
	for _, id := range stopped {
		if d.scanCtx != nil && d.scanCtx.Err() != nil {
			break
		}
		d.refreshView(id)
	}
	// The start-up scan of a large folder peaks far above what the daemon
	// then holds (50,000 manifests read, the index rebuilt): hand the
	// freed pages back now, not whenever the runtime's scavenger gets to
	// them. One GC, once.
	debug.FreeOSMemory()
	release()
	setRunGC()
	d.checkLater()
}

// rescan asks for a scan in the background (the watcher lost events, the
// folder came back); asked again while one runs, it scans once more.
func (d *Daemon) rescan() {
	d.rescans.pending.Store(true)
	if !d.rescans.running.CompareAndSwap(false, true) {
		return
	}
	d.scans.Add(1)
	go func() {
		defer d.scans.Done()
		for d.rescans.pending.Swap(false) {
			d.scan()
		}
		d.rescans.running.Store(false)
		if d.rescans.pending.Load() {
			d.rescan() // asked between the last scan and the line above
		}
	}()
}

// CallStart (runner.Timings) observes pickup latency at a job's first call.
func (d *Daemon) CallStart(id string) {
	if el, ok := d.takeSince(d.seen, id); ok {
		d.metrics.Pickup(el)
	}
}

// Phase (runner.Timings) observes a phase's duration.
func (d *Daemon) Phase(role string, dur time.Duration) { d.metrics.Phase(role, dur) }

// Tokens (runner.Timings) counts model tokens.
func (d *Daemon) Tokens(provider string, in, out, cache int64) {
	d.metrics.Tokens(provider, in, out, cache)
}

// logErr logs the daemon's own problem with job id ("" for none).
func (d *Daemon) logErr(id, code string, err error) {
	joblog.Log(d.log, err.Error(), joblog.Problem{Job: id, Code: code})
}

// shutdown stops taking work, lets calls in flight finish within the grace
// period (or until the process asks again: a second stop signal), then
// kills them; the interrupted turns are recorded and resumed at the next
// start.
func (d *Daemon) shutdown(ctx context.Context) error {
	d.log.Info("shutting down: no new work; waiting for calls in flight", "grace", d.opts.Grace.String(), "signal", stopCause(ctx))
	d.sched.Close()
	d.engine.Draining.Store(true)
	grace := time.NewTimer(d.opts.Grace)
	defer grace.Stop()
	select {
	case <-d.sched.Idle():
	case <-grace.C:
		d.log.Warn("grace period over; killing calls in flight")
	case <-hurried(ctx):
		d.log.Warn("stop signal again: not waiting for the grace period; killing calls in flight")
	}
	d.sched.Stop(runner.ErrShutdown)
	d.settlePlacements()
	d.log.Info("logistd stopped")
	return nil
}
