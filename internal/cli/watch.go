package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/textsafe"
)

var cmdWatch = &command{
	name: "watch", args: "[JOB] [--once] [--exit-on-finish]",
	summary: "a live view of the jobs (or one): status, phase, elapsed time, cost against budget, what happened last; updated as they change, fitted to the terminal, and saying when the folder's logistd stops or starts",
	example: "  logist watch                                 # every job; redrawn in place on a terminal\n" +
		"  logist watch fix-login --exit-on-finish      # one job, until it stops\n" +
		"  logist watch --once                          # the current view, once (scripts)\n" +
		"  logist watch > watch.log                     # not a terminal: one line per change\n" +
		"  logist watch --format json | jq .status      # one JSON object per change\n",
	flags: func(fs *pflag.FlagSet) {
		fs.Bool("once", false, "print the current view once and exit")
		fs.Bool("exit-on-finish", false, "exit once the job (without JOB: every job) has stopped: SUCCESS, CANCELED, or waiting for a steward (INTERVENTION_REQUIRED, HALTED_*)")
	},
	run: func(e *env, args []string) (*Result, error) {
		if len(args) > 1 {
			return nil, usagef("expected at most one JOB argument, got %d", len(args))
		}
		cfg := watchConfig{format: e.format, now: time.Now, dir: e.store.Dir}
		if len(args) == 1 {
			id, err := oneJob(args)
			if err != nil {
				return nil, err
			}
			cfg.job = id
		}
		once, _ := e.fs.GetBool("once")
		cfg.exitOnFinish, _ = e.fs.GetBool("exit-on-finish")
		if once {
			views, err := loadViews(openedSource{e.store, e.opener()}, cfg.job)
			if err != nil {
				return nil, err
			}
			return viewsResult(views, cfg.now()), nil
		}
		if e.format == "markdown" {
			return nil, usagef("--format markdown is for --once; the live view prints text or json")
		}
		cfg.tty = isTerminal(e.stdout)
		if !e.cluster { // in cluster mode the nodes run the jobs: no logistd of a folder
			cfg.daemon = e.store.DaemonPID
		}
		if cfg.tty && e.format == "text" {
			cfg.tick = time.Second // elapsed times move on; redrawn from memory
			f := e.stdout.(*os.File)
			cfg.size = func() (int, int) { return terminalSize(f) }
			resize := make(chan os.Signal, 1)
			signal.Notify(resize, syscall.SIGWINCH)
			defer signal.Stop(resize)
			cfg.resize = resize
		}
		ctx, stop := signalContext(e.ctx)
		defer stop()
		fw, err := newFolderWatch(e.store.Dir, cfg.job)
		if err != nil {
			return nil, err
		}
		defer fw.close()
		go fw.run(ctx)
		return nil, watchLoop(ctx, openedSource{e.store, e.opener()}, fw.out, e.stdout, cfg)
	},
}

// signalContext ends on SIGINT or SIGTERM: the live commands exit cleanly
// (status 0) when interrupted.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// terminalSize is the columns and rows of the terminal f, or 80x24 if it
// does not say.
func terminalSize(f *os.File) (int, int) {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 || ws.Row == 0 {
		return 80, 24
	}
	return int(ws.Col), int(ws.Row)
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// watchSource is what watch reads: the jobs folder (jobstore.Store), or a
// fake in tests.
type watchSource interface {
	List() ([]jobstore.Entry, error)
	Load(id string) (*manifest.Manifest, error)
}

// openedSource shows a watch what encrypt_history sealed (the reason and
// summaries of job.json) opened, as logist status does.
type openedSource struct {
	watchSource
	op *jobview.Opener
}

func (o openedSource) List() ([]jobstore.Entry, error) {
	ens, err := o.watchSource.List()
	for i := range ens {
		if ens[i].Manifest != nil && ens[i].Manifest.EncryptHistory {
			o.op.Manifest(ens[i].Manifest)
		}
	}
	return ens, err
}

func (o openedSource) Load(id string) (*manifest.Manifest, error) {
	m, err := o.watchSource.Load(id)
	if m != nil && m.EncryptHistory {
		o.op.Manifest(m)
	}
	return m, err
}

// loadViews reads every job (or the one named) once.
func loadViews(src watchSource, only string) (map[string]jobView, error) {
	views := map[string]jobView{}
	if only != "" {
		m, err := src.Load(only)
		if errors.Is(err, jobstore.ErrNotFound) {
			return nil, err
		}
		views[only] = viewOf(only, m, err)
		return views, nil
	}
	entries, err := src.List()
	if err != nil {
		return nil, err
	}
	for _, en := range entries {
		if en.Unplaced != "" {
			continue // logistd moves it into its folder; shown from there
		}
		views[en.ID] = viewOf(en.ID, en.Manifest, en.Err)
	}
	return views, nil
}

func sortedIDs(views map[string]jobView) []string {
	ids := make([]string, 0, len(views))
	for id := range views {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

type watchConfig struct {
	job          string // "" = every job
	tty          bool   // redraw a table in place
	format       string // text or json
	exitOnFinish bool
	now          func() time.Time
	tick         time.Duration // on a terminal, redraw (from memory) this often; 0 = only on changes
	dir          string
	// size is the terminal's columns and rows (nil: 80x24); resize
	// signals that they changed.
	size   func() (int, int)
	resize <-chan os.Signal
	// daemon is the pid of the folder's logistd, 0 for none
	// (jobstore.Store.DaemonPID); nil: not shown. It is asked every
	// daemonPoll (default a second), and a change is shown.
	daemon     func() int
	daemonPoll time.Duration
}

// watchLoop shows the jobs and then, for each id received on events, reads
// that one job again and shows what changed: on a terminal (cfg.tty) by
// redrawing the table in place, else as one line per change. An empty id
// means events were lost: everything is read again. It returns nil when
// ctx ends or, with cfg.exitOnFinish, when every job shown has stopped.
func watchLoop(ctx context.Context, src watchSource, events <-chan string, w io.Writer, cfg watchConfig) error {
	if cfg.now == nil {
		cfg.now = time.Now
	}
	views, err := loadViews(src, cfg.job)
	if err != nil {
		return err
	}
	shown := map[string]string{} // id -> key last printed (lines and json)
	out := &watchOutput{w: w, cfg: cfg}
	if cfg.daemon != nil {
		out.daemon = cfg.daemon()
		if err := out.daemonChanged(true); err != nil {
			return err
		}
	}
	emit := func(changed []string) error {
		if cfg.tty && cfg.format == "text" {
			return out.redraw(views)
		}
		for _, id := range changed {
			v, ok := views[id]
			if !ok {
				if _, was := shown[id]; was {
					delete(shown, id)
					if err := out.removed(id); err != nil {
						return err
					}
				}
				continue
			}
			if shown[id] == v.key() {
				continue
			}
			shown[id] = v.key()
			if err := out.changed(v); err != nil {
				return err
			}
		}
		return nil
	}
	allDone := func() bool {
		if !cfg.exitOnFinish || len(views) == 0 {
			return false
		}
		for _, v := range views {
			if !v.done {
				return false
			}
		}
		return true
	}
	if err := emit(sortedIDs(views)); err != nil {
		return err
	}
	if allDone() {
		return nil
	}
	var tick, poll <-chan time.Time
	if cfg.tick > 0 {
		t := time.NewTicker(cfg.tick)
		defer t.Stop()
		tick = t.C
	}
	if cfg.daemon != nil {
		every := cfg.daemonPoll
		if every <= 0 {
			every = time.Second
		}
		t := time.NewTicker(every)
		defer t.Stop()
		poll = t.C
	}
	for {
		var ids []string
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			if err := out.redraw(views); err != nil {
				return err
			}
			continue
		case <-cfg.resize:
			if err := out.redraw(views); err != nil {
				return err
			}
			continue
		case <-poll:
			pid := cfg.daemon()
			if (pid == 0) == (out.daemon == 0) {
				continue // still there, or still gone
			}
			out.daemon = pid
			if err := out.daemonChanged(false); err != nil {
				return err
			}
			if err := out.redraw(views); err != nil {
				return err
			}
			continue
		case id, ok := <-events:
			if !ok {
				return errors.New("file watcher stopped")
			}
			ids = append(ids, id)
		}
		// Take whatever else is queued: one redraw for a burst.
	drain:
		for {
			select {
			case id, ok := <-events:
				if !ok {
					break drain
				}
				ids = append(ids, id)
			default:
				break drain
			}
		}
		changed, err := refresh(src, views, cfg.job, ids)
		if err != nil {
			return err
		}
		if err := emit(changed); err != nil {
			return err
		}
		if allDone() {
			return nil
		}
	}
}

// refresh re-reads the jobs named (each once; "" = all) and returns the
// ids whose view may have changed, sorted.
func refresh(src watchSource, views map[string]jobView, only string, ids []string) ([]string, error) {
	seen := map[string]bool{}
	for _, id := range ids {
		if id == "" {
			fresh, err := loadViews(src, only)
			if err != nil && !errors.Is(err, jobstore.ErrNotFound) {
				return nil, err
			}
			for id := range views {
				seen[id] = true
				delete(views, id)
			}
			for id, v := range fresh {
				seen[id] = true
				views[id] = v
			}
			continue
		}
		if (only != "" && id != only) || seen[id] {
			continue
		}
		seen[id] = true
		m, err := src.Load(id)
		if errors.Is(err, jobstore.ErrNotFound) {
			delete(views, id) // removed (or its job.json is)
			continue
		}
		views[id] = viewOf(id, m, err)
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// watchOutput writes the view.
type watchOutput struct {
	w      io.Writer
	cfg    watchConfig
	daemon int // the folder's logistd as last seen (cfg.daemon)
}

func (o *watchOutput) changed(v jobView) error {
	now := o.cfg.now()
	if o.cfg.format == "json" {
		return o.json(v.object(now))
	}
	_, err := fmt.Fprintln(o.w, textsafe.Line(v.line(now)))
	return err
}

func (o *watchOutput) json(obj map[string]any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.w, "%s\n", textsafe.EscapeJSON(b))
	return err
}

func (o *watchOutput) removed(id string) error {
	now := o.cfg.now().UTC()
	if o.cfg.format == "json" {
		return o.json(map[string]any{"job_id": id, "status": "REMOVED", "updated_at": now.Format(time.RFC3339Nano)})
	}
	_, err := fmt.Fprintf(o.w, "%s %s REMOVED\n", now.Format(time.RFC3339), id)
	return err
}

// daemonChanged says (as a line or a JSON object; a redraw shows it in
// its header) that the folder's logistd went away or came back; at the
// start, only that none runs.
func (o *watchOutput) daemonChanged(start bool) error {
	if o.cfg.tty && o.cfg.format == "text" || (start && o.daemon != 0) {
		return nil
	}
	now := o.cfg.now().UTC()
	if o.cfg.format == "json" {
		return o.json(map[string]any{"daemon": daemonInfo(o.daemon), "updated_at": now.Format(time.RFC3339Nano)})
	}
	_, err := fmt.Fprintf(o.w, "%s %s\n", now.Format(time.RFC3339), textsafe.Line(o.daemonLine()))
	return err
}

// daemonLine is the folder's logistd as watch shows it.
func (o *watchOutput) daemonLine() string {
	if o.daemon == 0 {
		return "logistd stopped: " + noDaemon(o.cfg.dir) + "; jobs do not move until one does"
	}
	return "logistd " + daemonText(o.daemon)
}

// ANSI: cursor to the top left, clear the screen below it.
const ansiRedraw = "\x1b[H\x1b[J"

// redraw draws the whole view in place, in one write, fitted to the
// terminal (watchScreen).
func (o *watchOutput) redraw(views map[string]jobView) error {
	if !o.cfg.tty || o.cfg.format != "text" {
		return nil
	}
	now := o.cfg.now()
	width, height := 80, 24
	if o.cfg.size != nil {
		width, height = o.cfg.size()
	}
	what := "all jobs"
	if o.cfg.job != "" {
		what = "job " + o.cfg.job
	}
	head := []string{fmt.Sprintf("logist watch: %s in %s, %s (Ctrl-C to quit)", what, o.cfg.dir, now.Format("15:04:05"))}
	if o.cfg.daemon != nil {
		head = append(head, o.daemonLine())
	}
	var b bytes.Buffer
	b.WriteString(ansiRedraw)
	b.WriteString(watchScreen(head, views, now, width, height))
	_, err := o.w.Write(b.Bytes())
	return err
}

// folderWatch turns fsnotify events in the jobs folder into the ids of the
// jobs to read again: a job folder that appears or goes, a job.json that
// is replaced (the daemon and the steward replace it by rename), written
// or removed.
type folderWatch struct {
	dir  string
	only string
	w    *fsnotify.Watcher
	out  chan string
}

func newFolderWatch(dir, only string) (*folderWatch, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	fw := &folderWatch{dir: dir, only: only, w: w, out: make(chan string, 64)}
	if err := w.Add(dir); err != nil {
		_ = w.Close() // the error is Add's
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("jobs folder %s: %w", dir, jobstore.ErrNotFound)
		}
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	// Watches go on before the first read (watchLoop's): a change in
	// between is read twice, never missed.
	ents, err := os.ReadDir(dir)
	if err != nil {
		_ = w.Close() // the error is ReadDir's
		return nil, fmt.Errorf("read jobs folder: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() && fw.wants(e.Name()) {
			_ = w.Add(filepath.Join(dir, e.Name())) // gone already: nothing to watch
		}
	}
	return fw, nil
}

func (fw *folderWatch) wants(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	return fw.only == "" || name == fw.only
}

func (fw *folderWatch) close() { _ = fw.w.Close() } // a watcher: nothing to lose

// run forwards events until ctx ends; it closes out when the watcher fails.
func (fw *folderWatch) run(ctx context.Context) {
	send := func(id string) bool {
		select {
		case fw.out <- id:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-fw.w.Events:
			if !ok {
				close(fw.out)
				return
			}
			if id, ok := fw.job(ev); ok && !send(id) {
				return
			}
		case _, ok := <-fw.w.Errors:
			if !ok {
				close(fw.out)
				return
			}
			if !send("") { // events may be lost: read everything again
				return
			}
		}
	}
}

// job maps an event to the job to read again.
func (fw *folderWatch) job(ev fsnotify.Event) (string, bool) {
	rel, err := filepath.Rel(fw.dir, ev.Name)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	if !fw.wants(parts[0]) {
		return "", false
	}
	switch len(parts) {
	case 1:
		if ev.Has(fsnotify.Create) {
			if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
				// A new job folder: watch it, then read it (its job.json
				// may already be there).
				_ = fw.w.Add(ev.Name)
				return parts[0], true
			}
			return "", false
		}
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			return parts[0], true // the folder went: the job is gone (or was a file)
		}
	case 2:
		if parts[1] == jobstore.ManifestFile {
			return parts[0], true
		}
	}
	return "", false
}
