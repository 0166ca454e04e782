package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/steward"
)

const quick = `{"task_description": "t", "agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "done"}]}, "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`

func discard() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func get(t *testing.T, url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if f() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestDaemonServesMetricsAndHealth(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "one.json"), []byte(quick), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{JobsDir: dir, MaxParallel: 2, Listen: addr, Grace: time.Second}, discard())
	}()

	waitFor(t, "readyz", func() bool { code, _ := get(t, "http://"+addr+"/readyz"); return code == 200 })
	if code, body := get(t, "http://"+addr+"/healthz"); code != 200 || !strings.Contains(body, "ok") {
		t.Fatalf("healthz = %d %q", code, body)
	}
	waitFor(t, "job one SUCCESS", func() bool {
		m, err := manifest.ReadFile(filepath.Join(dir, "one", "job.json"))
		return err == nil && m.Status == "SUCCESS"
	})
	// The calls are counted just after their unit's commit (AfterCommit):
	// job.json reads SUCCESS a moment before the supervisor's is.
	var body string
	waitFor(t, "both agent calls counted in /metrics", func() bool {
		_, body = get(t, "http://"+addr+"/metrics")
		w, _ := sample(body, `logistd_agent_calls_total{outcome="ok",provider="script",role="worker"}`)
		s, _ := sample(body, `logistd_agent_calls_total{outcome="ok",provider="script",role="supervisor"}`)
		return w > 0 && s > 0
	})
	for _, want := range []string{
		`logistd_jobs{status="SUCCESS"} 1`,
		`logistd_jobs{status="RUNNING"} 0`,
		`logistd_agent_calls_total{outcome="ok",provider="script",role="worker"} 1`,
		`logistd_agent_calls_total{outcome="ok",provider="script",role="supervisor"} 1`,
		`logistd_build_info{revision=`,
		`go_goroutines`,
		`process_open_fds`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, re := range []string{`logistd_history_appended_bytes_total [1-9]`, `logistd_history_fsync_duration_seconds_count [1-9]`,
		`logistd_jobs_finished_total\{outcome="success"\} 1`, `logistd_jobs_started_total 1`} {
		if !regexp.MustCompile(re).MatchString(body) {
			t.Errorf("/metrics lacks %s", re)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("daemon did not stop after cancel")
	}
}

func TestSecondDaemonIsRefused(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{JobsDir: dir, MaxParallel: 1, Grace: time.Second}, discard()) }()
	store := jobstore.New(dir)
	waitFor(t, "daemon lock", func() bool {
		select {
		case err := <-done:
			// Say why the first daemon never took the lock.
			t.Fatalf("first daemon stopped before taking the lock: %v", err)
		default:
		}
		return store.DaemonPID() == os.Getpid()
	})

	err := Run(context.Background(), Options{JobsDir: dir, Once: true, MaxParallel: 1}, discard())
	var locked *jobstore.DaemonLockedError
	if !errors.As(err, &locked) || locked.PID != os.Getpid() {
		t.Fatalf("second daemon: err = %v, want DaemonLockedError naming pid %d", err, os.Getpid())
	}
	if !strings.Contains(err.Error(), "already running on "+store.Dir) {
		t.Fatalf("message %q does not say what is wrong", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The lock dies with its holder: a new daemon may start now.
	if err := Run(context.Background(), Options{JobsDir: dir, Once: true, MaxParallel: 1}, discard()); err != nil {
		t.Fatalf("daemon after the first stopped: %v", err)
	}
}

func TestMainFlags(t *testing.T) {
	var out, errb strings.Builder
	env := func(k string) string { return "" }
	if code := Main(context.Background(), []string{"logistd", "--log-format", "xml"}, env, &out, &errb); code != 1 || !strings.Contains(errb.String(), "--log-format") {
		t.Fatalf("bad --log-format: code %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := Main(context.Background(), []string{"logistd", "--log-level", "loud"}, env, &out, &errb); code != 1 || !strings.Contains(errb.String(), "--log-level") {
		t.Fatalf("bad --log-level: code %d, stderr %q", code, errb.String())
	}
	// A flag the parser refuses is named, with the reason, not exited on
	// in silence.
	errb.Reset()
	if code := Main(context.Background(), []string{"logistd", "--max-parallle", "4"}, env, &out, &errb); code != 1 || !strings.Contains(errb.String(), "did you mean --max-parallel?") {
		t.Fatalf("--max-parallle: code %d, stderr %q", code, errb.String())
	}
	// Values of the right type that make no sense are refused, each
	// named with where it came from, before anything starts.
	for _, c := range []struct {
		args []string
		env  map[string]string
		want []string
	}{
		{[]string{"--max-parallel", "0"}, nil, []string{"--max-parallel 0: must be at least 1"}},
		{nil, map[string]string{"LOGISTD_MAX_PARALLEL": "-2"}, []string{"--max-parallel -2 (env LOGISTD_MAX_PARALLEL): must be at least 1"}},
		{[]string{"--grace", "-5s", "--retention", "-1h"}, nil, []string{"--grace -5s: must not be negative", "--retention -1h0m0s: must not be negative"}},
		{[]string{"--database-url", "postgres://127.0.0.1:1/none", "--lease", "300ms"}, nil, []string{"--lease 300ms: must be at least 1s"}},
		{[]string{"--output-ceiling-bytes", "-1"}, nil, []string{"--output-ceiling-bytes -1: must be at least 1024 (bytes; 0: the default)"}},
		{nil, map[string]string{"LOGISTD_OUTPUT_CEILING_BYTES": "100"}, []string{"--output-ceiling-bytes 100 (env LOGISTD_OUTPUT_CEILING_BYTES): must be at least 1024"}},
	} {
		errb.Reset()
		getenv := func(k string) string { return c.env[k] }
		code := Main(context.Background(), append([]string{"logistd", "--jobs-dir", t.TempDir()}, c.args...), getenv, &out, &errb)
		for _, w := range c.want {
			if code != 1 || !strings.Contains(errb.String(), w) {
				t.Fatalf("%q %v: code %d, stderr %q, want %q", c.args, c.env, code, errb.String(), w)
			}
		}
	}
	for _, bad := range [][]string{{"--bogus"}, {"--max-parallel", "many"}, {"--max-parallel"}} {
		errb.Reset()
		code := Main(context.Background(), append([]string{"logistd"}, bad...), env, &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), strings.TrimPrefix(bad[0], "--")) || !strings.Contains(errb.String(), "logistd --help") {
			t.Fatalf("%q: code %d, stderr %q", bad, code, errb.String())
		}
	}
	if code := Main(context.Background(), []string{"logistd", "--version"}, env, &out, &errb); code != 0 || !strings.Contains(out.String(), "logistd ") {
		t.Fatalf("--version: code %d, out %q", code, out.String())
	}
	dir := t.TempDir()
	errb.Reset()
	env2 := func(k string) string {
		if k == "LOGIST_JOBS_DIR" {
			return dir
		}
		return ""
	}
	if err := os.WriteFile(filepath.Join(dir, "x.json"), []byte(quick), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := Main(context.Background(), []string{"logistd", "--once", "--log-format", "text"}, env2, &out, &errb); code != 0 {
		t.Fatalf("--once with LOGIST_JOBS_DIR: code %d, stderr %s", code, errb.String())
	}
	m, err := manifest.ReadFile(filepath.Join(dir, "x", "job.json"))
	if err != nil || m.Status != "SUCCESS" {
		t.Fatalf("job x after --once: %v %v", m, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "x.json")); err == nil {
		t.Fatal("--once left the placement's bare name x.json")
	}
	if !strings.Contains(errb.String(), "msg=transition") {
		t.Fatalf("text log lacks transitions: %s", errb.String())
	}
}

// Everything Logist creates in the jobs folder is private to the daemon's
// user (0700 folders, 0600 files), even when the manifest was dropped with
// wider permissions.
func TestFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "jobs")
	if err := Run(context.Background(), Options{JobsDir: dir, Once: true, MaxParallel: 1}, discard()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "open.json"), []byte(`{"task_description": "t", "encrypt_history": true, "agents": {"worker": {"provider": "command", "command": {"argv": ["sh", "-c", "echo hi > out.txt; echo '{\"action\":\"COMPLETED\",\"evidence_files\":[\"out.txt\"],\"summary_for_supervisor\":\"ok\"}'"]}}, "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), Options{JobsDir: dir, Once: true, MaxParallel: 1}, discard()); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.ReadFile(filepath.Join(dir, "open", "job.json"))
	if err != nil || m.Status != "SUCCESS" {
		t.Fatalf("job: %v %v", m, err)
	}
	n := 0
	if err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		// What the agent wrote into its workspace is the agent's business.
		if strings.HasPrefix(rel, filepath.Join("open", "workspace")+string(filepath.Separator)) || fi.Mode()&os.ModeSymlink != 0 {
			return nil
		}
		n++
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v", rel, fi.Mode().Perm())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".logist/signing.key", ".logist/content.key", history.Path("open"), "open/requests", "open/snapshots"} {
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Errorf("expected %s: %v", want, err)
		}
	}
	if n < 12 {
		t.Fatalf("walked only %d paths", n)
	}
}

func TestScheduleCreatesRunsAndMetrics(t *testing.T) {
	dir := t.TempDir()
	tpl := `{"task_description": "t", "schedule": {"cron": "@every 1m", "concurrency_policy": "Forbid"},
	  "agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "done"}]}, "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`
	if err := os.WriteFile(filepath.Join(dir, "tick.json"), []byte(tpl), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{JobsDir: dir, MaxParallel: 2, Listen: addr, Grace: time.Second, cronClock: newFastClock()}, discard())
	}()
	store := jobstore.New(dir)
	var run string
	waitFor(t, "a scheduled run to succeed", func() bool {
		ents, _ := store.List()
		for _, e := range ents {
			if e.Manifest != nil && e.Manifest.ScheduledFrom == "tick" && e.Manifest.Status == "SUCCESS" {
				run = e.ID
				return true
			}
		}
		return false
	})
	if !strings.HasPrefix(run, "tick-") {
		t.Fatalf("run id %q", run)
	}
	tplM, err := store.Load("tick")
	if err != nil || tplM.Status != "PENDING" || tplM.Run.LastScheduledAt == "" {
		t.Fatalf("template: %+v %v", tplM, err)
	}
	if _, err := os.Stat(history.Path(filepath.Join(dir, "tick"))); err == nil {
		t.Error("the template itself ran")
	}
	// A steward command counted through the events file.
	steward.RecordEvent(dir, "resume", "out_of_order")
	waitFor(t, "metrics", func() bool {
		_, body := get(t, "http://"+addr+"/metrics")
		for _, want := range []string{
			`logistd_steward_commands_total{command="resume",result="out_of_order"} 1`,
			`logistd_jobs_finished_total{outcome="success"}`,
			`logistd_pickup_latency_seconds_count`,
			`logistd_phase_duration_seconds_count{role="worker"}`,
		} {
			if !strings.Contains(body, want) {
				return false
			}
		}
		return regexp.MustCompile(`logistd_cron_runs_total\{outcome="created"\} [1-9]`).MatchString(body) &&
			!strings.Contains(body, "logistd_pickup_latency_seconds_count 0") &&
			!strings.Contains(body, "logistd_jobs_started_total 0")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A schedule a steward pauses creates no runs, across a restart of
// logistd, until resumed; one a steward halts never fires again, across a
// restart too. The schedules' time moves only when the test steps it, a
// minute (a tick of @every 1m) at a time; a witness, a schedule nobody
// steers, shows that the scheduler has looked at each step's time: it
// fires the templates due at one time in order of name, tick before
// witness, so once the witness has its run, tick's tick came and was
// fired or skipped.
func TestStewardPausesAndHaltsAScheduleAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	tpl := `{"task_description": "t", "schedule": {"cron": "@every 1m"},
	  "agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "done"}]}, "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`
	for _, name := range []string{"tick.json", "witness.json"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(tpl), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	store := jobstore.New(dir)
	runs := func() int {
		ents, _ := store.List()
		n := 0
		for _, e := range ents {
			if e.Manifest != nil && e.Manifest.ScheduledFrom == "tick" {
				n++
			}
		}
		return n
	}
	clock := newStepClock() // one, across the restarts
	// settled: the scheduler has fired what was due at the schedules'
	// time (the witness has its run for it).
	settled := func() bool {
		clock.wake()
		m, err := store.Load("witness")
		if err != nil {
			return false
		}
		last, err := time.Parse(time.RFC3339Nano, m.Run.LastScheduledAt)
		return err == nil && last.After(clock.Now().Add(-time.Minute))
	}
	// step moves the schedules' time a minute on and returns once the
	// scheduler has fired what was due by then.
	step := func() {
		t.Helper()
		clock.step(time.Minute)
		waitFor(t, "the witness's run at "+clock.Now().Format(time.RFC3339), settled)
	}
	start := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, Options{JobsDir: dir, MaxParallel: 2, Grace: time.Second, cronClock: clock}, discard())
		}()
		waitFor(t, "the daemon lock", func() bool { return store.DaemonPID() > 0 })
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}
	// Steering needs the folder's signing key, which the daemon makes.
	stop := start()
	// A template the daemon has not seen yet starts at its next tick
	// after the time it is first seen at: a step taken before the daemon
	// saw both makes no run of the one it had not, and the next one does.
	for i := 0; ; i++ {
		clock.step(time.Minute)
		deadline := time.Now().Add(time.Second)
		for !settled() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if settled() && runs() > 0 {
			break
		}
		if i == 10 {
			t.Fatal("no first runs of the schedules")
		}
	}
	key, err := signing.LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := steward.New(&jobtx.Env{Store: store, Logger: discard(), History: history.Options{Signer: key}}, builtins.Effects())
	still := func(what string) {
		t.Helper()
		n := runs()
		for range 2 {
			step()
			if m := runs(); m != n {
				t.Fatalf("%s: %d runs became %d", what, n, m)
			}
		}
	}
	if _, err := st.PauseSchedule("tick", ""); err != nil {
		t.Fatal(err)
	}
	still("paused")
	stop()
	stop = start()
	still("paused, after a restart")
	n := runs()
	if _, err := st.ResumeSchedule("tick", ""); err != nil {
		t.Fatal(err)
	}
	// The resume takes at the next tick the daemon sees it by.
	for i := 0; runs() == n; i++ {
		if i == 3 {
			t.Fatalf("no run in %d ticks after the resume", i)
		}
		step()
	}
	if _, err := st.Halt("tick", ""); err != nil {
		t.Fatal(err)
	}
	still("halted")
	stop()
	stop = start()
	still("halted, after a restart")
	stop()
}

// stepClock is the schedules' time, moved only by step. The scheduler
// waits (After) for a wake, however long it asked to wait, and then looks
// at the time again: a wake before its tick finds nothing due.
type stepClock struct {
	mu      sync.Mutex
	now     time.Time
	waiting []chan time.Time
}

func newStepClock() *stepClock { return &stepClock{now: time.Now()} }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) After(time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiting = append(c.waiting, ch)
	return ch
}

func (c *stepClock) step(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// wake ends every wait begun so far.
func (c *stepClock) wake() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.waiting {
		ch <- c.now
	}
	c.waiting = nil
}

// fastClock is the schedules' time running 60 times faster than real
// time: an @every 1m schedule (the shortest there is) fires every second.
type fastClock struct{ base time.Time }

func newFastClock() fastClock { return fastClock{base: time.Now()} }

func (c fastClock) Now() time.Time { return c.base.Add(60 * time.Since(c.base)) }
func (c fastClock) After(d time.Duration) <-chan time.Time {
	return time.After(d / 60)
}
