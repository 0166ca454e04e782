// Package daemon is logistd: it serves one jobs folder, picks up manifests
// as they are dropped (fsnotify, plus a full scan at start and whenever the
// watcher overflows), and runs them with the runner's scheduler.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/robfig/cron/v3"
	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/config"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/metrics"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/sandbox"
	"github.com/logist/logist/internal/schedule"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/schemas"
)

// Set at build time (-ldflags -X).
var (
	Version  = "dev"
	Revision = "unknown"
)

// Options are logistd's settings.
type Options struct {
	JobsDir     string
	Once        bool
	MaxParallel int
	Listen      string
	LogFormat   string
	LogLevel    string
	Grace       time.Duration
	// HistoryMaxBytes rotates a job's history file past this size.
	HistoryMaxBytes int64
	// Retention deletes finished jobs this long after they finished
	// (hourly maintenance); 0 keeps them.
	Retention time.Duration
	// Pprof serves net/http/pprof under /debug/pprof/ on the Listen address.
	Pprof bool
}

// Main parses args and runs the daemon until ctx ends (SIGTERM/SIGINT) or,
// with --once, until no job is runnable. It returns the exit code.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("logistd", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	fs.StringVar(&o.JobsDir, "jobs-dir", "./jobs", "jobs folder to serve (env LOGIST_JOBS_DIR)")
	fs.BoolVar(&o.Once, "once", false, "run every runnable job, then exit 0 when none is runnable")
	fs.IntVar(&o.MaxParallel, "max-parallel", 4, "jobs run at the same time")
	fs.StringVar(&o.Listen, "listen", "", "address for /metrics, /healthz and /readyz (e.g. 127.0.0.1:9464); empty: off")
	fs.BoolVar(&o.Pprof, "pprof", false, "also serve Go profiling (net/http/pprof) under /debug/pprof/ on --listen")
	fs.StringVar(&o.LogFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&o.Grace, "grace", 30*time.Second, "on SIGTERM, how long calls in flight may finish before they are killed")
	fs.Int64Var(&o.HistoryMaxBytes, "history-max-bytes", history.DefaultMaxBytes, "rotate a job's history.jsonl into a gzip archive past this size")
	fs.DurationVar(&o.Retention, "retention", 0, "delete finished jobs (SUCCESS, CANCELED) this long after they finished, checked hourly; 0 keeps them (e.g. 720h)")
	prices := fs.String("prices", "", "JSON price table (model -> input_per_mtok, output_per_mtok, cached_input_per_mtok) overriding and extending the built-in one, for agents that report tokens but no cost")
	version := fs.Bool("version", false, "print the version and exit")
	configFile := fs.String("config", "", "JSON config file (default $LOGISTD_CONFIG, else "+config.DefaultFile+" if it exists); flags win over environment (LOGISTD_<FLAG>), environment over the file")
	printConfig := fs.Bool("print-config", false, "print the effective configuration and where each value came from, then exit")
	checkSandbox := fs.Bool("check-sandbox", false, "print which sandbox layers (bwrap, landlock) work on this host and why not, run a call under each, then exit (1 if none works)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: logistd [flags]\n\nlogistd supervises the AI-agent jobs in a jobs folder.\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 1
	}
	if *version {
		fmt.Fprintf(stdout, "logistd %s (%s)\n", Version, Revision)
		return 0
	}
	if *checkSandbox {
		return sandbox.CheckHost(stdout)
	}
	sources, err := config.Apply(fs, config.Path(*configFile, getenv), getenv, "config", "print-config", "version", "check-sandbox", "help")
	if err != nil {
		fmt.Fprintf(stderr, "logistd: %v\n", err)
		return 1
	}
	if *printConfig {
		b, _ := json.MarshalIndent(config.Redacted(sources), "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "logistd: unexpected argument %q\n", fs.Arg(0))
		return 1
	}
	logger, err := newLogger(stderr, o.LogFormat, o.LogLevel)
	if err != nil {
		fmt.Fprintf(stderr, "logistd: %v\n", err)
		return 1
	}
	if *prices != "" {
		p, err := agent.LoadPrices(*prices)
		if err != nil {
			fmt.Fprintf(stderr, "logistd: %v\n", err)
			return 1
		}
		agent.SetPriceOverrides(p)
	}
	if err := Run(ctx, o, logger); err != nil {
		logger.Error(err.Error(), "type", "error", "job_id", "", "status", "", "actor", "SYSTEM", "error_code", "DAEMON", "attempt", 0, "checkpoint_id", "")
		fmt.Fprintf(stderr, "logistd: %v\n", err)
		return 1
	}
	return 0
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use json or text", format)
}

// Daemon is a running logistd.
type Daemon struct {
	opts    Options
	log     *slog.Logger
	store   *jobstore.Store
	sched   *runner.Scheduler
	engine  *runner.Engine
	metrics *metrics.Metrics
	ready   atomic.Bool

	mu      sync.Mutex
	invalid map[string]string    // job or file -> last reported error
	seen    map[string]time.Time // runnable jobs not yet called: when first seen
	cron    *schedule.Scheduler
	// stewardOff is how far the steward events file has been read.
	stewardOff int64
	watched    map[string]bool
	// placed holds the folders place made, until the watcher reports their
	// creation: that event is the daemon's own and carries no news.
	placed  map[string]time.Time
	watcher *fsnotify.Watcher

	lock *jobstore.Lock // the daemon lock of the jobs folder
	key  *keyHolder
	// root is the jobs folder being served. rootGone is set while it is
	// gone (removed or moved away): the daemon polls for it to come back.
	root     os.FileInfo
	rootGone bool
}

// rootPoll is how often the daemon checks that the jobs folder is still the
// one it serves (a removal is not always reported by the watcher: the
// daemon's own lock file inside keeps the folder's inode alive), and, once
// it is gone, looks for it to come back.
const rootPoll = 200 * time.Millisecond

// testHookStarted, if set, is called once the daemon has scanned the folder
// (tests reach the watcher through it).
var testHookStarted func(*Daemon)

// keyHolder signs with the jobs folder's key. When the folder is removed and
// recreated the key goes with it; the daemon loads (or makes) the new
// folder's key and swaps it in before it runs any job there.
type keyHolder struct{ k atomic.Pointer[signing.Key] }

func (h *keyHolder) ID() string             { return h.k.Load().ID() }
func (h *keyHolder) Sign(msg []byte) []byte { return h.k.Load().Sign(msg) }

// Run serves the jobs folder until ctx ends or, with Once, until idle.
func Run(ctx context.Context, o Options, logger *slog.Logger) error {
	if err := os.MkdirAll(o.JobsDir, 0o700); err != nil {
		return fmt.Errorf("jobs folder: %w", err)
	}
	store := jobstore.New(o.JobsDir)
	// The engine's saves overwrite manifests in place: a new file per
	// save cost more kernel time than the rest of a transaction.
	store.InPlace = true
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
		invalid: map[string]string{}, watched: map[string]bool{}, placed: map[string]time.Time{}, seen: map[string]time.Time{}, lock: lock, key: &keyHolder{}}
	// The lock may be replaced (the folder recreated): release whichever is held.
	defer func() { d.lock.Unlock() }()
	d.key.k.Store(key)
	env := &jobtx.Env{Store: store, Logger: logger, Obs: d.metrics,
		History: history.Options{Signer: d.key, MaxBytes: o.HistoryMaxBytes, Observe: d.metrics.HistoryWrite}}
	d.engine = runner.NewEngine(env)
	d.engine.Timings = d
	d.cron = schedule.New(env, logger, d.metrics)
	d.cron.Created = func(id string) {
		d.watchJob(id)
		d.consider(id, false)
	}
	// A run the schedule halted (Replace) was saved by this process: tell
	// the scheduler, which kills its call in flight.
	d.cron.Changed = func(id string) { d.sched.Nudge(id) }
	// Runs live until shutdown decides otherwise, not until the signal.
	runCtx, stopRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRuns()
	d.sched = runner.NewScheduler(runCtx, d.engine, o.MaxParallel, logger)

	if o.Listen != "" {
		srv, err := d.serve(o.Listen, reg)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	logger.Info("logistd starting", "jobs_dir", store.Dir, "version", Version, "once", o.Once, "max_parallel", o.MaxParallel, "signing_key", key.ID())

	if !o.Once {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			return fmt.Errorf("watch jobs folder: %w", err)
		}
		defer w.Close()
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
	// 15 ms measured) is done beside the scan, and before /readyz says ready.
	warmed := make(chan struct{})
	go func() {
		defer close(warmed)
		if err := schemas.Warm(schemas.Manifest, schemas.Response); err != nil {
			d.logErr("", "SCHEMA", err)
		}
		jobtx.Warm(d.key)
	}()
	// Watch first, then scan: a manifest dropped in between is seen twice,
	// never missed.
	d.scan()
	if !o.Once {
		go d.cron.Run(runCtx)
		d.watchStewardEvents()
		if o.Retention > 0 {
			maint := cron.New()
			prune := func() { schedule.Prune(d.store, o.Retention, time.Now(), logger) }
			maint.AddFunc("@hourly", prune)
			maint.Start()
			defer maint.Stop()
			go prune()
		}
	}
	<-warmed
	d.ready.Store(true)
	if testHookStarted != nil {
		testHookStarted(d)
	}

	if o.Once {
		select {
		case <-d.sched.Idle():
		case <-ctx.Done():
			// A job waiting for disk space (or a long call) must not keep
			// a signalled --once daemon alive.
			return d.shutdown()
		}
		d.sched.Wait()
		d.sched.Close()
		logger.Info("logistd done: no runnable job left")
		return nil
	}
	lerr := d.loop(ctx)
	return errors.Join(d.shutdown(), lerr)
}

func (d *Daemon) serve(addr string, reg *prometheus.Registry) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if problem := d.notReady(); problem != "" {
			http.Error(w, problem, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready: jobs folder loaded, watcher running, history writable")
	})
	if d.opts.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	d.log.Info("listening", "addr", ln.Addr().String())
	return srv, nil
}

// notReady says why the daemon is not ready, or "" when it is: the jobs
// folder has been loaded, the watcher runs, and a file can be written and
// fsync'd where histories live.
func (d *Daemon) notReady() string {
	if !d.ready.Load() {
		return "loading jobs folder"
	}
	if !d.opts.Once && d.watcher == nil {
		return "watcher not running"
	}
	f, err := os.CreateTemp(d.store.Dir, ".readyz-*")
	if err != nil {
		return "history not writable: " + err.Error()
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := f.Write([]byte("ok")); err != nil {
		return "history not writable: " + err.Error()
	}
	if err := f.Sync(); err != nil {
		return "history not writable: " + err.Error()
	}
	return ""
}

// scan looks at the whole folder: places bare manifests, reports invalid
// ones, starts runnable jobs.
func (d *Daemon) scan() {
	// Summaries: a finished job is only counted, so most manifests need
	// not be read; the ones the daemon acts on are loaded in full.
	entries, err := d.store.ListSummaries(false)
	if err != nil {
		d.logErr("", "SCAN", err)
		return
	}
	nInvalid := 0
	for _, e := range entries {
		if e.Unplaced != "" {
			d.place(e.Unplaced, true)
			continue
		}
		d.watchJob(e.ID)
		if e.Err != nil {
			nInvalid++
			d.reportInvalid(e.ID, e.Err)
			continue
		}
		d.clearInvalid(e.ID)
		if e.Partial && (e.Manifest.Status.Active() || e.Manifest.Schedule != nil) {
			m, err := d.store.Load(e.ID)
			if err != nil {
				nInvalid++
				d.reportInvalid(e.ID, err)
				continue
			}
			e.Manifest = m
		}
		d.note(e.ID, e.Manifest)
		if e.Manifest.Status.Active() {
			d.sched.Nudge(e.ID)
		}
	}
	d.metrics.SetInvalid(nInvalid)
}

// place moves a bare manifest into its folder. At a scan (atStart) a file
// still incomplete is reported; on a watcher event it is being written and
// its next write brings it back.
func (d *Daemon) place(bare string, atStart bool) {
	id, err := d.store.Place(bare)
	if errors.Is(err, jobstore.ErrIncomplete) && !atStart {
		d.log.Debug("manifest still being written", "file", filepath.Base(bare))
		return
	}
	if err != nil {
		d.reportInvalid(filepath.Base(bare), err)
		return
	}
	d.log.Info("placed manifest", "job_id", id, "from", filepath.Base(bare))
	d.mu.Lock()
	d.placed[id] = time.Now()
	d.mu.Unlock()
	d.watchJob(id)
	if !d.consider(id, false) {
		// No run's first history append will make the move durable.
		if err := d.store.SettlePlaced(id); err != nil {
			d.logErr(id, "PLACE", err)
		}
	}
}

// consider looks at one job after a change. From a watcher event, a
// manifest that is not yet complete JSON is being written: wait for the
// next write instead of reporting it. It reports whether the job was
// handed to the scheduler to run.
func (d *Daemon) consider(id string, fromEvent bool) (runs bool) {
	m, err := d.store.Load(id)
	if err != nil {
		if errors.Is(err, jobstore.ErrNotFound) {
			// A folder whose name cannot be a job id (control characters,
			// '..', ...) is reported as the scan reports it, not ignored.
			if ierr := manifest.ValidID(id); ierr != nil {
				if _, serr := os.Stat(filepath.Join(d.store.JobDir(id), jobstore.ManifestFile)); serr == nil {
					d.reportInvalid(id, err)
				}
			}
			return false
		}
		if fromEvent {
			if data, rerr := os.ReadFile(filepath.Join(d.store.JobDir(id), jobstore.ManifestFile)); rerr == nil && manifest.Incomplete(data) {
				return false
			}
		}
		d.reportInvalid(id, err)
		return false
	}
	d.clearInvalid(id)
	d.note(id, m)
	return d.sched.NudgeManifest(id, m)
}

// note records what the daemon knows of a job it has just read: its status
// for the gauges, since when it waits, when it was first seen runnable (for
// pickup latency), and its schedule if it is a template.
func (d *Daemon) note(id string, m *manifest.Manifest) {
	d.metrics.JobStatus(id, "", m.Status)
	if m.Status.Waiting() {
		if t, err := time.Parse(time.RFC3339Nano, m.Run.UpdatedAt); err == nil {
			d.metrics.WaitingSince(id, t)
		}
	}
	d.mu.Lock()
	if m.Status == lifecycle.Pending && m.Schedule == nil {
		if _, ok := d.seen[id]; !ok {
			d.seen[id] = time.Now()
		}
	}
	d.mu.Unlock()
	if d.cron != nil && !d.opts.Once {
		d.cron.Sync(id, m)
	}
}

// watchStewardEvents starts counting steward commands from now on.
func (d *Daemon) watchStewardEvents() {
	dir := filepath.Join(d.store.Dir, signing.Dir)
	if fi, err := os.Stat(filepath.Join(dir, steward.EventsFile)); err == nil {
		d.stewardOff = fi.Size()
	}
	if d.watcher != nil {
		if err := d.watcher.Add(dir); err != nil {
			d.log.Warn("cannot watch steward events; steward command metrics stay at 0", "err", err.Error())
		}
	}
}

func (d *Daemon) readStewardEvents() {
	d.mu.Lock()
	defer d.mu.Unlock()
	evs, off := steward.ReadEvents(filepath.Join(d.store.Dir, signing.Dir, steward.EventsFile), d.stewardOff)
	d.stewardOff = off
	for _, e := range evs {
		d.metrics.Steward(e.Command, e.Result)
	}
}

// CallStart (runner.Timings) observes pickup latency at a job's first call.
func (d *Daemon) CallStart(id string) {
	d.mu.Lock()
	t, ok := d.seen[id]
	delete(d.seen, id)
	d.mu.Unlock()
	if ok {
		d.metrics.Pickup(time.Since(t))
	}
}

// Phase (runner.Timings) observes a phase's duration.
func (d *Daemon) Phase(role string, dur time.Duration) { d.metrics.Phase(role, dur) }

// Tokens (runner.Timings) counts model tokens.
func (d *Daemon) Tokens(provider string, in, out, cache int64) {
	d.metrics.Tokens(provider, in, out, cache)
}

func (d *Daemon) watchJob(id string) {
	if d.watcher == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watched[id] {
		return
	}
	if err := d.watcher.Add(d.store.JobDir(id)); err != nil {
		d.log.Warn("cannot watch job folder; steward changes reach it at the next rescan", "job_id", id, "err", err.Error())
		return
	}
	d.watched[id] = true
}

func (d *Daemon) reportInvalid(id string, err error) {
	d.mu.Lock()
	same := d.invalid[id] == err.Error()
	d.invalid[id] = err.Error()
	d.mu.Unlock()
	if !same {
		d.log.Error("invalid manifest", "type", "error", "job_id", id, "status", "INVALID", "actor", "SYSTEM",
			"error_code", "MANIFEST_INVALID", "attempt", 0, "checkpoint_id", "", "err", err.Error())
	}
}

func (d *Daemon) clearInvalid(id string) {
	d.mu.Lock()
	delete(d.invalid, id)
	d.mu.Unlock()
}

func (d *Daemon) logErr(id, code string, err error) {
	d.log.Error(err.Error(), "type", "error", "job_id", id, "status", "", "actor", "SYSTEM", "error_code", code, "attempt", 0, "checkpoint_id", "")
}

// loop handles watcher events until ctx ends (nil) or the daemon cannot go
// on serving the folder.
func (d *Daemon) loop(ctx context.Context) error {
	poll := time.NewTicker(rootPoll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
			if !d.rootGone {
				if fi, err := os.Stat(d.store.Dir); err == nil && os.SameFile(fi, d.root) {
					continue
				}
				if err := d.rootLost(0); err != nil {
					return err
				}
				continue
			}
			if err := d.rootBack(); err != nil {
				return err
			}
		case ev, ok := <-d.watcher.Events:
			if !ok {
				return nil
			}
			if err := d.event(ev); err != nil {
				return err
			}
		case err, ok := <-d.watcher.Errors:
			if !ok {
				return nil
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				d.log.Warn("watcher overflow; rescanning the jobs folder")
				d.scan()
				continue
			}
			d.logErr("", "WATCHER", err)
		}
	}
}

func (d *Daemon) event(ev fsnotify.Event) error {
	if filepath.Clean(ev.Name) == d.store.Dir {
		if ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
			return d.rootLost(ev.Op)
		}
		return nil
	}
	d.fileEvent(ev)
	return nil
}

func (d *Daemon) fileEvent(ev fsnotify.Event) {
	rel, err := filepath.Rel(d.store.Dir, ev.Name)
	if err != nil || strings.HasPrefix(rel, "..") {
		return
	}
	parts := strings.Split(rel, string(filepath.Separator))
	base := parts[len(parts)-1]
	if rel == filepath.Join(signing.Dir, steward.EventsFile) {
		d.readStewardEvents()
		return
	}
	if strings.HasPrefix(parts[0], ".") {
		return
	}
	switch len(parts) {
	case 1:
		if ev.Op&(fsnotify.Create|fsnotify.Write|fsnotify.Rename) == 0 {
			if ev.Op&fsnotify.Remove != 0 {
				d.mu.Lock()
				delete(d.watched, base)
				d.mu.Unlock()
			}
			return
		}
		fi, err := os.Lstat(ev.Name)
		if err != nil {
			return
		}
		switch {
		case fi.IsDir():
			d.mu.Lock()
			at, ok := d.placed[base]
			delete(d.placed, base)
			// Bounded in time: an event lost to an overflow must not make
			// a later folder of the same name pass unseen.
			own := ok && ev.Op&fsnotify.Create != 0 && time.Since(at) < 5*time.Second
			d.mu.Unlock()
			if own {
				return // place has looked at it
			}
			d.watchJob(base)
			d.consider(base, true)
		case fi.Mode().IsRegular() && strings.HasSuffix(base, ".json"):
			d.place(ev.Name, false)
		}
	case 2:
		if base == jobstore.ManifestFile && ev.Op&(fsnotify.Create|fsnotify.Write|fsnotify.Rename) != 0 {
			// The echo of our own save carries no news (the engine that
			// wrote it goes on by itself); a steward's change is a new file.
			if d.store.WrittenHere(parts[0]) {
				return
			}
			d.consider(parts[0], true)
		}
	}
}

// rootLost handles the jobs folder itself being removed or moved away: its
// watch is gone with it (and the watches of its job folders), so the daemon
// polls for a folder at the same path and takes it up when it appears.
func (d *Daemon) rootLost(op fsnotify.Op) error {
	if d.rootGone {
		return nil
	}
	d.rootGone = true
	_ = d.watcher.Remove(d.store.Dir) // moved away: stop hearing about the old folder
	d.mu.Lock()
	for id := range d.watched {
		_ = d.watcher.Remove(d.store.JobDir(id))
	}
	d.watched = map[string]bool{}
	d.invalid = map[string]string{}
	d.mu.Unlock()
	how := "noticed by polling"
	if op != 0 {
		how = op.String()
	}
	d.log.Error("jobs folder removed or moved away; waiting for it to come back", "type", "error", "job_id", "",
		"status", "", "actor", "SYSTEM", "error_code", "JOBS_DIR_GONE", "attempt", 0, "checkpoint_id", "",
		"jobs_dir", d.store.Dir, "how", how)
	return d.rootBack()
}

// rootBack takes up a jobs folder that has reappeared: its daemon lock (the
// old one went with the old folder), its signing key, a watch, and a full
// scan. It fails when the daemon must stop: another logistd took the new
// folder first.
func (d *Daemon) rootBack() error {
	fi, err := os.Stat(d.store.Dir)
	if err != nil || !fi.IsDir() {
		return nil // not back yet
	}
	// The watch goes on the new folder first, then the scan: a job
	// dropped in between is seen twice, never missed.
	lock, err := d.store.LockDaemon()
	var held *jobstore.DaemonLockedError
	if errors.As(err, &held) && held.PID == os.Getpid() {
		// The same folder, moved away and back: the lock we hold is its lock.
		lock, err = d.lock, nil
	}
	if err != nil {
		return fmt.Errorf("jobs folder %s is back but cannot be taken up: %w", d.store.Dir, err)
	}
	release := func() {
		if lock != d.lock {
			lock.Unlock()
		}
	}
	key, err := signing.LoadOrCreate(d.store.Dir)
	if err != nil {
		release()
		d.logErr("", "DAEMON_KEY", fmt.Errorf("jobs folder %s is back but its signing key cannot be set up: %w; will try again", d.store.Dir, err))
		return nil
	}
	if err := d.watcher.Add(d.store.Dir); err != nil {
		release()
		d.logErr("", "WATCHER", fmt.Errorf("watch %s: %w; will try again", d.store.Dir, err))
		return nil
	}
	if lock != d.lock {
		d.lock.Unlock()
		d.lock = lock
	}
	d.key.k.Store(key)
	d.root, d.rootGone = fi, false
	d.log.Info("jobs folder is back; rescanning", "jobs_dir", d.store.Dir, "signing_key", key.ID())
	d.scan()
	return nil
}

// shutdown stops taking work, lets calls in flight finish within the grace
// period, then kills them; the interrupted turns are recorded and resumed
// at the next start.
func (d *Daemon) shutdown() error {
	d.log.Info("shutting down: no new work; waiting for calls in flight", "grace", d.opts.Grace.String())
	d.sched.Close()
	d.engine.Draining.Store(true)
	select {
	case <-d.sched.Idle():
	case <-time.After(d.opts.Grace):
		d.log.Warn("grace period over; killing calls in flight")
	}
	d.sched.Stop(runner.ErrShutdown)
	d.log.Info("logistd stopped")
	return nil
}
