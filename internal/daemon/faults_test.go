package daemon

// Faults of the jobs folder under a running daemon (docs/hostile-inputs.md,
// "Faults"): the folder removed and recreated or moved away, the watcher
// overflowing, a signal while --once waits.

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/verify"
)

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// has reports a log line with every key/value given.
func (l *logBuffer) has(kv ...string) bool {
	l.mu.Lock()
	data := append([]byte(nil), l.b.Bytes()...)
	l.mu.Unlock()
	for _, line := range bytes.Split(data, []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			if m[kv[i]] != kv[i+1] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// seedLine checks the daemon's lines of seed 004 §7 (joblog.Check) and
// returns the one with error_code code (nil if none).
func (l *logBuffer) seedLine(t *testing.T, code string) map[string]any {
	t.Helper()
	l.mu.Lock()
	data := append([]byte(nil), l.b.Bytes()...)
	l.mu.Unlock()
	var found map[string]any
	for _, line := range joblog.Lines(data) {
		if line["type"] == nil && line["error_code"] == nil {
			continue
		}
		if err := joblog.Check(line); err != nil {
			t.Errorf("%v: %v", err, line)
		}
		if line["error_code"] == code {
			found = line
		}
	}
	return found
}

// startDaemon runs a daemon on dir until the test ends; it returns the
// daemon (through the test hook) and its log.
func startDaemon(t *testing.T, dir string) (*Daemon, *logBuffer, context.CancelFunc, <-chan error) {
	t.Helper()
	return startDaemonWith(t, Options{JobsDir: dir, MaxParallel: 2, Grace: time.Second})
}

// startDaemonWith is startDaemon with the options given.
func startDaemonWith(t *testing.T, o Options) (*Daemon, *logBuffer, context.CancelFunc, <-chan error) {
	t.Helper()
	got := make(chan *Daemon, 1)
	testHookStarted = func(d *Daemon) { got <- d }
	t.Cleanup(func() { testHookStarted = nil })
	lb := &logBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, o, slog.New(slog.NewJSONHandler(lb, nil)))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done: //nolint:errcheck // the test checked it, or it is not the subject
		case <-time.After(10 * time.Second):
			t.Error("daemon did not stop")
		}
	})
	select {
	case d := <-got:
		return d, lb, cancel, done
	case err := <-done:
		t.Fatalf("daemon stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("daemon did not start")
	}
	return nil, nil, nil, nil
}

func status(dir, id string) string {
	m, err := manifest.ReadFile(filepath.Join(dir, id, "job.json"))
	if err != nil {
		return err.Error()
	}
	return string(m.Status)
}

func dropJob(t *testing.T, dir, id string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte(quick), 0o600); err != nil {
		t.Fatal(err)
	}
}

// verified checks a job's history against the folder's public key.
func verified(t *testing.T, dir, id string) {
	t.Helper()
	pub, err := signing.LoadPublic(filepath.Join(dir, signing.Dir, signing.PublicFile))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := verify.Job(id, filepath.Join(dir, id), verify.Options{Public: pub})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("job %s: history does not verify with the folder's key: %v", id, rep.Problems)
	}
}

// H91: the jobs folder is removed while the daemon runs, then created again.
// The daemon notices (JOBS_DIR_GONE), takes up the new folder — its lock,
// its signing key, a watch — and runs the jobs dropped into it.
func TestJobsFolderRemovedAndRecreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "jobs")
	_, lb, _, done := startDaemon(t, dir)
	dropJob(t, dir, "before")
	waitFor(t, "job before SUCCESS", func() bool { return status(dir, "before") == "SUCCESS" })

	// The job's last files may still be being written: retry until the
	// whole folder is gone.
	waitFor(t, "the jobs folder to be removed", func() bool { return os.RemoveAll(dir) == nil })
	waitFor(t, "JOBS_DIR_GONE logged", func() bool { return lb.has("error_code", "JOBS_DIR_GONE") })
	if l := lb.seedLine(t, codes.JobsDirGone); l == nil || l["level"] != "ERROR" || l["jobs_dir"] != dir {
		t.Errorf("JOBS_DIR_GONE line %v", l)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the daemon to take the new folder up", func() bool { return lb.has("msg", "jobs folder is back; rescanning") })
	dropJob(t, dir, "after")
	waitFor(t, "job after SUCCESS in the new folder", func() bool { return status(dir, "after") == "SUCCESS" })
	verified(t, dir, "after")

	// The new folder is locked: a second daemon is refused there.
	store := jobstore.New(dir)
	if pid := store.DaemonPID(); pid != os.Getpid() {
		t.Errorf("daemon lock of the new folder names pid %d, want %d", pid, os.Getpid())
	}
	err := Run(context.Background(), Options{JobsDir: dir, Once: true, MaxParallel: 1}, discard())
	if err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second daemon on the recreated folder: %v, want refused", err)
	}
	// A job folder dropped later is watched too (steward changes reach it).
	if err := os.Mkdir(filepath.Join(dir, "folder"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "folder", "job.json"), []byte(quick), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "job folder SUCCESS", func() bool { return status(dir, "folder") == "SUCCESS" })
	select {
	case err := <-done:
		t.Fatalf("daemon stopped: %v", err)
	default:
	}
}

// H92: the jobs folder is moved away and a new one made in its place. The
// daemon lets the old folder go and serves the new one.
func TestJobsFolderMovedAwayAndReplaced(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "jobs")
	startDaemon(t, dir)
	dropJob(t, dir, "before")
	waitFor(t, "job before SUCCESS", func() bool { return status(dir, "before") == "SUCCESS" })

	old := filepath.Join(base, "jobs.old")
	if err := os.Rename(dir, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	dropJob(t, dir, "after")
	waitFor(t, "job after SUCCESS in the new folder", func() bool { return status(dir, "after") == "SUCCESS" })
	verified(t, dir, "after")
	// The old folder is no longer served.
	dropJob(t, old, "stray")
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(old, "stray.json")); err != nil {
		t.Errorf("the daemon still serves the moved folder (stray.json was placed): %v", err)
	}
}

// H93: the kernel's event queue overflows and events are lost. The
// overflow makes the daemon rescan the folder, which finds the job whose
// events were lost.
func TestWatcherOverflowRescans(t *testing.T) {
	dir := t.TempDir()
	d, lb, _, _ := startDaemon(t, dir)
	// Lose the events of a job dropped now, as an overflow would.
	if err := d.watcher.Remove(dir); err != nil {
		t.Fatal(err)
	}
	dropJob(t, dir, "missed")
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "missed.json")); err != nil {
		t.Fatalf("the job was seen without its events: %v", err)
	}
	if err := d.watcher.Add(dir); err != nil {
		t.Fatal(err)
	}
	d.watcher.Errors <- fsnotify.ErrEventOverflow
	waitFor(t, "the rescan to run the missed job", func() bool { return status(dir, "missed") == "SUCCESS" })
	if !lb.has("msg", "watcher overflow; rescanning the jobs folder") {
		t.Error("the overflow was not logged")
	}
}

// H95: a signal reaches a --once daemon while a job's agent is still
// running: it shuts down as a serving daemon does (interrupting the call,
// to be asked again at the next start) instead of waiting for the job.
func TestOnceStopsOnSignal(t *testing.T) {
	dir := t.TempDir()
	slow := `{"task_description": "t", "agents": {"worker": {"provider": "command", "command": {"argv": ["sleep", "30"]}}, "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`
	if err := os.MkdirAll(filepath.Join(dir, "slow"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "slow", "job.json"), []byte(slow), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{JobsDir: dir, Once: true, MaxParallel: 1, Grace: 100 * time.Millisecond}, discard())
	}()
	waitFor(t, "the agent to run", func() bool { return status(dir, "slow") == "RUNNING" })
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("--once daemon ignored the signal")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stopping took %s", d)
	}
	if s := status(dir, "slow"); s != "RUNNING" {
		t.Errorf("status %s, want RUNNING (to be re-attempted at the next start)", s)
	}
}

// A dropped manifest's move into its folder is made durable whatever
// becomes of the job: by the first history append of one that runs, by
// the daemon itself for one that does not (invalid, or a draft).
func TestPlacementIsSettled(t *testing.T) {
	dir := t.TempDir()
	_, lb, _, _ := startDaemon(t, dir)
	drops := map[string]string{
		"runs":  quick,
		"bad":   `{"task_description": "t"}`,
		"draft": strings.Replace(quick, `{"task_description"`, `{"status": "DRAFT", "task_description"`, 1),
	}
	for id, body := range drops {
		if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the runnable job to finish", func() bool { return status(dir, "runs") == "SUCCESS" })
	waitFor(t, "the invalid manifest to be reported", func() bool {
		return lb.has("msg", "invalid manifest", "job_id", "bad")
	})
	waitFor(t, "the draft to be placed", func() bool { return lb.has("msg", "placed manifest", "job_id", "draft") })
	if l := lb.seedLine(t, codes.ManifestInvalid); l == nil || l["job_id"] != "bad" || l["status"] != "INVALID" || l["level"] != "ERROR" {
		t.Errorf("MANIFEST_INVALID line %v", l)
	}
	for id := range drops {
		waitFor(t, id+"'s placement settled", func() bool {
			return !atomicfile.Dirty(filepath.Join(dir, id)) && !atomicfile.Dirty(dir)
		})
	}
}

// A rescan (after the watcher lost events) forgets the jobs and invalid
// manifests that left the folder unheard, so the gauges follow the folder.
func TestRescanForgetsWhatIsGone(t *testing.T) {
	dir := t.TempDir()
	d, _, _, _ := startDaemon(t, dir)
	dropJob(t, dir, "a")
	if err := os.MkdirAll(filepath.Join(dir, "bad"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad", "job.json"), []byte(`{"agents": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	counted := func() (jobs []string, invalid int) {
		d.mu.Lock()
		invalid = len(d.invalid)
		d.mu.Unlock()
		return d.metrics.Jobs(), invalid
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		jobs, invalid := counted()
		// The run's end (jobHistory.json) is written after job.json says
		// SUCCESS: wait for the run itself, or the removal below races it.
		if len(jobs) == 1 && invalid == 1 && status(dir, "a") == "SUCCESS" && d.sched.Running() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counted jobs %v, %d invalid", jobs, invalid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Gone while the watcher hears nothing of it.
	for _, p := range []string{dir, filepath.Join(dir, "a"), filepath.Join(dir, "bad")} {
		_ = d.watcher.Remove(p)
	}
	for _, id := range []string{"a", "bad"} {
		if err := os.RemoveAll(filepath.Join(dir, id)); err != nil {
			t.Fatal(err)
		}
	}
	if jobs, invalid := counted(); len(jobs) != 1 || invalid != 1 {
		t.Fatalf("the watcher heard the removal after all: %v, %d", jobs, invalid)
	}
	d.scan()
	if jobs, invalid := counted(); len(jobs) != 0 || invalid != 0 {
		t.Errorf("after a rescan: jobs %v, %d invalid; want none", jobs, invalid)
	}
}

// A job.json past the size logist reads, written into a new folder while
// the daemon runs, is reported as invalid: it was read only up to one
// byte past the limit, which is not JSON yet, and taken for a manifest
// still being written, so nothing was said of it.
func TestOversizedManifestInANewFolderIsReported(t *testing.T) {
	dir := t.TempDir()
	d, lb, _, _ := startDaemon(t, dir)
	if err := os.Mkdir(filepath.Join(dir, "huge"), 0o700); err != nil {
		t.Fatal(err)
	}
	big := `{"task_description": "` + strings.Repeat("x", manifest.MaxSize) + `"}`
	if err := os.WriteFile(filepath.Join(dir, "huge", jobstore.ManifestFile), []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "huge reported as invalid", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		_, ok := d.invalid["huge"]
		return ok
	})
	if n := lb.count("msg", "invalid manifest", "job_id", "huge"); n != 1 {
		t.Errorf("%d invalid manifest lines for huge, want 1", n)
	}
}
