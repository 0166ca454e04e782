package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/testkit"
	"github.com/logist/logist/internal/textsafe"
)

// fakeSource is an in-memory jobs folder that counts its reads.
type fakeSource struct {
	mu    sync.Mutex
	jobs  map[string]*manifest.Manifest
	loads map[string]int
	lists int
}

func newFakeSource() *fakeSource {
	return &fakeSource{jobs: map[string]*manifest.Manifest{}, loads: map[string]int{}}
}

func (f *fakeSource) set(id string, m *manifest.Manifest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m == nil {
		delete(f.jobs, id)
		return
	}
	c := *m
	c.JobID = id
	f.jobs[id] = &c
}

func (f *fakeSource) List() ([]jobstore.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	var out []jobstore.Entry
	for id, m := range f.jobs {
		c := *m
		out = append(out, jobstore.Entry{ID: id, Manifest: &c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (f *fakeSource) Load(id string) (*manifest.Manifest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads[id]++
	m, ok := f.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %s: %w", id, jobstore.ErrNotFound)
	}
	c := *m
	return &c, nil
}

func (f *fakeSource) counts() (int, map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := map[string]int{}
	for k, v := range f.loads {
		c[k] = v
	}
	return f.lists, c
}

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func fptr(v float64) *float64 { return &v }

func man(status lifecycle.Status, phase string, cost float64, budget *float64, summary string, updated time.Time) *manifest.Manifest {
	m := &manifest.Manifest{Status: status, Metrics: manifest.Metrics{CumulativeCost: cost}, CostThreshold: budget}
	if phase != "" {
		m.SetPhase(phase)
	}
	m.Run.LastSummary = summary
	m.Run.StartedAt = t0.Format(time.RFC3339Nano)
	if !updated.IsZero() {
		m.Run.UpdatedAt = updated.Format(time.RFC3339Nano)
	}
	return m
}

type loopRun struct {
	out    *testkit.SyncBuffer
	events chan string
	cancel context.CancelFunc
	done   chan error
}

func startLoop(t *testing.T, src watchSource, cfg watchConfig) *loopRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &loopRun{out: &testkit.SyncBuffer{}, events: make(chan string, 16), cancel: cancel, done: make(chan error, 1)}
	if cfg.now == nil {
		cfg.now = func() time.Time { return t0.Add(90 * time.Second) }
	}
	go func() { r.done <- watchLoop(ctx, src, r.events, r.out, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done: //nolint:errcheck // the test checked it, or it is not the subject
		case <-time.After(5 * time.Second):
			t.Error("watch loop did not stop on cancel")
		}
	})
	return r
}

func (r *loopRun) lines() []string {
	s := strings.TrimRight(r.out.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func (r *loopRun) waitLines(t *testing.T, n int) []string {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d lines", n), 5*time.Second, func() bool { return len(r.lines()) >= n })
	return r.lines()
}

// stopAndCheck cancels the loop and returns its result.
func (r *loopRun) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("watch loop did not stop")
	}
	return nil
}

func TestWatchLoopPlainLines(t *testing.T) {
	src := newFakeSource()
	src.set("job-a", man(lifecycle.Running, "work", 40, fptr(100), "Wrote the parser.", t0.Add(time.Minute)))
	src.set("job-b", man(lifecycle.Pending, "", 0, nil, "", time.Time{}))
	r := startLoop(t, src, watchConfig{format: "text"})

	got := r.waitLines(t, 2)
	want := []string{
		`2026-11-21T10:01:00Z job-a RUNNING work 1m30s $0.40/$1.00 "Wrote the parser."`,
		`2026-11-21T10:01:30Z job-b PENDING - 1m30s $0.00`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("initial lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// job-a moves on: one line, and only job-a is read again.
	_, before := src.counts()
	src.set("job-a", man(lifecycle.Reviewing, "review", 55, fptr(100), "Parser done; tests pass.", t0.Add(2*time.Minute)))
	r.events <- "job-a"
	got = r.waitLines(t, 3)
	if want := `2026-11-21T10:02:00Z job-a REVIEWING review 1m30s $0.55/$1.00 "Parser done; tests pass."`; got[2] != want {
		t.Fatalf("change line = %q, want %q", got[2], want)
	}
	lists, after := src.counts()
	if after["job-a"] != before["job-a"]+1 || after["job-b"] != before["job-b"] || lists != 1 {
		t.Fatalf("reads: list %d, loads before %v after %v; want one List at start and one Load of job-a", lists, before, after)
	}

	// An event that changes nothing prints nothing; a removal prints one
	// line; a new job appears.
	r.events <- "job-b"
	src.set("job-a", nil)
	r.events <- "job-a"
	src.set("job-c", man(lifecycle.Pending, "", 0, fptr(50), "", t0.Add(3*time.Minute)))
	r.events <- "job-c"
	got = r.waitLines(t, 5)
	if got[3] != "2026-11-21T10:01:30Z job-a REMOVED" {
		t.Fatalf("removal line = %q", got[3])
	}
	if got[4] != "2026-11-21T10:03:00Z job-c PENDING - 1m30s $0.00/$0.50" {
		t.Fatalf("new job line = %q", got[4])
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("watch loop: %v", err)
	}
	if n := len(r.lines()); n != 5 {
		t.Fatalf("%d lines, want 5:\n%s", n, r.out.String())
	}
}

func TestWatchLoopJSONLines(t *testing.T) {
	src := newFakeSource()
	src.set("job-a", man(lifecycle.Running, "work", 40, fptr(100), "s", t0))
	r := startLoop(t, src, watchConfig{format: "json", tty: true}) // json never redraws
	got := r.waitLines(t, 1)
	var obj map[string]any
	if err := json.Unmarshal([]byte(got[0]), &obj); err != nil {
		t.Fatalf("line %q: %v", got[0], err)
	}
	if obj["job_id"] != "job-a" || obj["status"] != "RUNNING" || obj["cost_cents"] != 40.0 || obj["cost_threshold_cents"] != 100.0 || obj["elapsed_seconds"] != 90.0 {
		t.Fatalf("object = %v", obj)
	}
}

var ansiRE = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

func TestWatchLoopTerminalRedraws(t *testing.T) {
	src := newFakeSource()
	src.set("job-a", man(lifecycle.Running, "work", 40, fptr(100), "Wrote the parser.", t0))
	src.set("job-b", man(lifecycle.Pending, "", 0, nil, "", time.Time{}))
	r := startLoop(t, src, watchConfig{format: "text", tty: true, dir: "/srv/jobs"})
	waitFor(t, "first draw", 5*time.Second, func() bool { return strings.Count(r.out.String(), ansiRedraw) == 1 })
	first := r.out.String()
	if !strings.HasPrefix(first, ansiRedraw) {
		t.Fatalf("draw does not start by moving home and clearing: %q", first)
	}
	for _, want := range []string{"JOB", "ELAPSED", "[####------] $0.40/$1.00", "Wrote the parser.", "1m30s"} {
		if !strings.Contains(first, want) {
			t.Errorf("first draw lacks %q:\n%s", want, first)
		}
	}
	// job-b has no budget: no bar on its row.
	for _, l := range strings.Split(first, "\n") {
		if strings.HasPrefix(l, "job-b") && strings.Contains(l, "[") {
			t.Errorf("job-b has a bar without a budget: %q", l)
		}
	}

	src.set("job-a", man(lifecycle.Running, "work", 90, fptr(100), "Almost there.", t0))
	r.events <- "job-a"
	waitFor(t, "redraw", 5*time.Second, func() bool { return strings.Count(r.out.String(), ansiRedraw) == 2 })
	second := r.out.String()[len(first):]
	if !strings.Contains(second, "[#########-] $0.90/$1.00") || !strings.Contains(second, "Almost there.") {
		t.Fatalf("redraw lacks the new bar or summary:\n%s", ansiRE.ReplaceAllString(second, ""))
	}
	if strings.Contains(second, "$0.40") {
		t.Fatalf("redraw still shows the old cost:\n%s", second)
	}
}

func TestWatchLoopExitOnFinish(t *testing.T) {
	src := newFakeSource()
	src.set("job-a", man(lifecycle.Running, "work", 10, fptr(100), "", t0))
	src.set("other", man(lifecycle.Running, "work", 10, nil, "", t0))
	r := startLoop(t, src, watchConfig{format: "text", job: "job-a", exitOnFinish: true})
	r.waitLines(t, 1)
	// Events for other jobs are not even read.
	r.events <- "other"
	src.set("job-a", man(lifecycle.Success, "review", 20, fptr(100), "All done.", t0.Add(time.Minute)))
	r.events <- "job-a"
	select {
	case err := <-r.done:
		r.done <- err
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not exit when the job finished")
	}
	if _, loads := src.counts(); loads["other"] != 0 {
		t.Errorf("other job read %d times while watching job-a", loads["other"])
	}
	got := r.lines()
	if len(got) != 2 || !strings.Contains(got[1], "job-a SUCCESS review") {
		t.Fatalf("lines:\n%s", r.out.String())
	}
}

func TestWatchLoopAlreadyFinishedExitsAtOnce(t *testing.T) {
	src := newFakeSource()
	src.set("job-a", man(lifecycle.InterventionRequired, "work", 10, nil, "need a human", t0))
	r := startLoop(t, src, watchConfig{format: "text", job: "job-a", exitOnFinish: true})
	select {
	case err := <-r.done:
		r.done <- err
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not exit for a job that has stopped")
	}
}

func TestWatchLoopRescanOnLostEvents(t *testing.T) {
	src := newFakeSource()
	src.set("job-a", man(lifecycle.Pending, "", 0, nil, "", t0))
	r := startLoop(t, src, watchConfig{format: "text"})
	r.waitLines(t, 1)
	src.set("job-b", man(lifecycle.Pending, "", 0, nil, "", t0))
	r.events <- "" // the watcher lost events: read everything again
	got := r.waitLines(t, 2)
	if !strings.Contains(got[1], "job-b PENDING") {
		t.Fatalf("lines:\n%s", r.out.String())
	}
}

func TestWatchLoopUnknownJob(t *testing.T) {
	err := watchLoop(context.Background(), newFakeSource(), nil, &testkit.SyncBuffer{}, watchConfig{job: "nope"})
	if !errors.Is(err, jobstore.ErrNotFound) {
		t.Fatalf("err = %v, want not found", err)
	}
}

func TestProgressBar(t *testing.T) {
	for _, c := range []struct {
		cost   float64
		budget *float64
		want   string
	}{
		{40, fptr(100), "[####------]"},
		{0, fptr(100), "[----------]"},
		{100, fptr(100), "[##########]"},
		{250, fptr(100), "[##########]"},
		{5, fptr(0), "[##########]"},
		{5, nil, ""},
	} {
		if got := progressBar(c.cost, c.budget, 10); got != c.want {
			t.Errorf("progressBar(%v, %v) = %q, want %q", c.cost, c.budget, got, c.want)
		}
	}
}

func TestElapsedUntilFinished(t *testing.T) {
	m := man(lifecycle.Success, "review", 0, nil, "", t0)
	m.Run.FinishedAt = t0.Add(42 * time.Second).Format(time.RFC3339Nano)
	v := viewOf("j", m, nil)
	if got := v.elapsedText(t0.Add(time.Hour)); got != "42s" {
		t.Fatalf("elapsed = %q, want 42s (until finished_at)", got)
	}
	if got := viewOf("j", &manifest.Manifest{Status: lifecycle.Pending}, nil).elapsedText(t0); got != "-" {
		t.Fatalf("elapsed of a job not started = %q, want -", got)
	}
}

// The real thing: fsnotify on a jobs folder, jobs written as logistd
// writes them (atomic rename), one line per change.
func TestWatchFolderEvents(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	writeJob(t, jobs, "job-a", jobJSON("PENDING", `"cost_threshold": 100`))
	store := jobstore.New(jobs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fw, err := newFolderWatch(store.Dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer fw.close()
	go fw.run(ctx)
	out := &testkit.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- watchLoop(ctx, store, fw.out, out, watchConfig{format: "text", now: time.Now}) }()
	has := func(re string) func() bool {
		return func() bool { return regexp.MustCompile(re).MatchString(out.String()) }
	}
	waitFor(t, "job-a PENDING", 5*time.Second, has(`(?m)^\S+ job-a PENDING - - \$0\.00/\$1\.00$`))

	writeJob(t, jobs, "job-a", jobJSON("RUNNING", `"current_phase": "work", "cost_threshold": 100, "metrics": {"cumulative_cost": 40}, "run": {"last_summary": "halfway", "started_at": "2026-11-21T10:00:00Z", "updated_at": "2026-11-21T10:05:00Z"}`))
	waitFor(t, "job-a RUNNING", 5*time.Second, has(`(?m)^2026-11-21T10:05:00Z job-a RUNNING work \S+ \$0\.40/\$1\.00 "halfway"$`))

	writeJob(t, jobs, "job-b", jobJSON("PENDING", ""))
	waitFor(t, "new job-b", 5*time.Second, has(`(?m)^\S+ job-b PENDING - - \$0\.00$`))

	if err := os.RemoveAll(filepath.Join(jobs, "job-b")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "job-b removed", 5*time.Second, has(`(?m)^\S+ job-b REMOVED$`))

	// A manifest broken in place shows as INVALID, with why.
	if err := os.WriteFile(filepath.Join(jobs, "job-a", "job.json"), []byte(`{"task_description": 5}`), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "job-a INVALID", 5*time.Second, has(`(?m)^\S+ job-a INVALID - - \$0\.00 ".+"$`))

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not stop")
	}
	// Each state once: no line repeats.
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		rest := l[strings.IndexByte(l, ' '):]
		if seen[rest] {
			t.Errorf("line printed twice: %q\n%s", l, out.String())
		}
		seen[rest] = true
	}
}

func TestWatchOnceThroughMain(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	writeJob(t, jobs, "job-a", jobJSON("RUNNING", `"current_phase": "work", "cost_threshold": 100, "metrics": {"cumulative_cost": 40}, "run": {"last_summary": "halfway"}`))
	writeJob(t, jobs, "job-b", jobJSON("PENDING", ""))
	code, out, errs := runMain(t, nil, "watch", "--once", "--jobs-dir", jobs)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, errs, out)
	}
	if !regexp.MustCompile(`(?m)^job-a +RUNNING +work +- +\[####------\] \$0\.40/\$1\.00 +halfway$`).MatchString(out) {
		t.Fatalf("table:\n%s", out)
	}
	code, out, _ = runMain(t, nil, "watch", "job-b", "--once", "--jobs-dir", jobs, "--format", "json")
	if code != 0 || !strings.Contains(out, `"job_id": "job-b"`) || strings.Contains(out, "job-a") {
		t.Fatalf("exit %d, json:\n%s", code, out)
	}
	code, _, errs = runMain(t, nil, "watch", "nope", "--once", "--jobs-dir", jobs)
	if code != ExitNotFound || !strings.Contains(errs, "job nope not found in "+jobs+"; logist list shows the jobs") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	code, out, _ = runMain(t, nil, "watch", "--jobs-dir", jobs, "--format", "markdown") // errors go to stdout in markdown
	if code != ExitUsage || !strings.Contains(out, "## Status: Error") || !strings.Contains(out, "--once") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// At 80 columns no line wraps, whatever the jobs hold (long ids, long and
// wide summaries, the longest status, budgets with bars), the header stays
// on top, and rows that do not fit the 24 rows are counted, not scrolled.
func TestWatchScreenFitsTheTerminal(t *testing.T) {
	views := map[string]jobView{}
	for i := range 40 {
		m := man(lifecycle.InterventionRequired, "implementation", 1234.5, fptr(5000), "", t0)
		m.Run.Reason = strings.Repeat("worker answered STUCK: 漢字 and a very long explanation ", 4)
		if i%2 == 0 {
			m.Status = lifecycle.Success
			m.Run.LastSummary = "done"
		}
		id := fmt.Sprintf("a-rather-long-job-identifier-%02d", i)
		views[id] = viewOf(id, m, nil)
	}
	screen := watchScreen([]string{"logist watch: all jobs in /a/very/long/path/to/the/jobs/folder/of/this/steward, 10:01:30 (Ctrl-C to quit)", "logistd running (pid 42)"},
		views, t0.Add(90*time.Second), 80, 24)
	lines := strings.Split(strings.TrimSuffix(screen, "\n"), "\n")
	if len(lines) > 23 {
		t.Fatalf("%d lines on a 24-row terminal (the last row stays empty):\n%s", len(lines), screen)
	}
	for _, l := range lines {
		if w := textsafe.Width(l); w >= 80 {
			t.Errorf("line %d columns wide on an 80-column terminal: %q", w, l)
		}
	}
	if !strings.HasPrefix(lines[0], "logist watch: all jobs in ") || lines[1] != "logistd running (pid 42)" {
		t.Fatalf("header:\n%s", screen)
	}
	if !strings.HasPrefix(lines[3], "JOB") {
		t.Fatalf("column header not below the header:\n%s", screen)
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "… and 22 more jobs") {
		t.Fatalf("last line %q, want the count of the jobs left out:\n%s", last, screen)
	}
	// The jobs not finished come first when not all fit.
	for _, l := range lines[4 : len(lines)-1] {
		if !strings.Contains(l, "INTERVENTION_REQUIRED") {
			t.Errorf("a finished job shown while waiting ones are left out: %q", l)
		}
	}
	// Cut cells end with "…".
	if !strings.Contains(screen, "…") {
		t.Errorf("nothing cut:\n%s", screen)
	}

	// A wide terminal shows everything whole.
	few := map[string]jobView{"a-rather-long-job-identifier-00": views["a-rather-long-job-identifier-00"]}
	wide := watchScreen([]string{"head"}, few, t0, 300, 24)
	if strings.Contains(wide, "…") || !strings.Contains(wide, "[##--------] $12.35/$50.00") {
		t.Fatalf("wide terminal:\n%s", wide)
	}
}

// After a rollback (or a resume) the job shows what the steward did, not
// the summary of an answer it has gone back from.
func TestWatchNoteAfterRollback(t *testing.T) {
	m := man(lifecycle.Success, "review", 20, nil, "Reviewed: good.", t0)
	if got := viewOf("j", m, nil).note(); got != "Reviewed: good." {
		t.Fatalf("note = %q", got)
	}
	m.Status = lifecycle.Pending
	m.SetPhase("work")
	m.Audit(t0, "Steward", "ROLLBACK", "cp-0000-work: review was too lenient", nil)
	if got := viewOf("j", m, nil).note(); got != "steward rollback: cp-0000-work: review was too lenient" {
		t.Fatalf("note after rollback = %q", got)
	}
	// Then the agent answers: its summary again.
	m.Status = lifecycle.Running
	m.Audit(t0, "Worker", "COMPLETED", "Tests first.", nil)
	m.Run.LastSummary = "Tests first."
	if got := viewOf("j", m, nil).note(); got != "Tests first." {
		t.Fatalf("note after the next answer = %q", got)
	}
	// A job waiting for a steward shows why.
	m.Status = lifecycle.HaltedCost
	m.Run.Reason = "cost 60.00 cents reached the budget of 50.00 cents"
	if got := viewOf("j", m, nil).note(); got != m.Run.Reason {
		t.Fatalf("note of a halted job = %q", got)
	}
}

// watch says when the folder's logistd goes away and when it comes back:
// a line (or a JSON object) each time, and in the terminal view's header.
func TestWatchLoopDaemonGoesAndComes(t *testing.T) {
	src := newFakeSource()
	src.set("job-a", man(lifecycle.Running, "work", 0, nil, "s", t0))
	var pid atomic.Int64
	pid.Store(42)
	daemon := func() int { return int(pid.Load()) }
	r := startLoop(t, src, watchConfig{format: "text", dir: "/srv/jobs", daemon: daemon, daemonPoll: 5 * time.Millisecond})
	r.waitLines(t, 1) // a daemon runs at the start: nothing said
	pid.Store(0)
	got := r.waitLines(t, 2)
	if !strings.HasSuffix(got[1], " logistd stopped: no logistd is running on /srv/jobs (start one: logistd --jobs-dir /srv/jobs); jobs do not move until one does") {
		t.Fatalf("line when the daemon went: %q", got[1])
	}
	pid.Store(43)
	got = r.waitLines(t, 3)
	if !strings.HasSuffix(got[2], " logistd running (pid 43)") {
		t.Fatalf("line when it came back: %q", got[2])
	}
	time.Sleep(30 * time.Millisecond)
	if n := len(r.lines()); n != 3 {
		t.Fatalf("%d lines, want 3 (a daemon that stays is not repeated):\n%s", n, r.out.String())
	}

	// JSON: an object with the daemon's state; at the start if none runs.
	pid.Store(0)
	rj := startLoop(t, src, watchConfig{format: "json", daemon: daemon, daemonPoll: 5 * time.Millisecond})
	first := rj.waitLines(t, 2)
	var obj map[string]any
	if err := json.Unmarshal([]byte(first[0]), &obj); err != nil || fmt.Sprint(obj["daemon"]) != "map[running:false]" {
		t.Fatalf("first json line %q (%v)", first[0], err)
	}

	// The terminal view says it in its header.
	pid.Store(0)
	rt := startLoop(t, src, watchConfig{format: "text", tty: true, dir: "/srv/jobs", daemon: daemon, daemonPoll: 5 * time.Millisecond})
	waitFor(t, "first draw", 5*time.Second, func() bool { return strings.Contains(rt.out.String(), "logistd stopped") })
	pid.Store(44)
	waitFor(t, "redraw with the daemon back", 5*time.Second, func() bool { return strings.Contains(rt.out.String(), "logistd running (pid 44)") })
}

// A resized terminal is redrawn to its new size.
func TestWatchLoopRedrawsOnResize(t *testing.T) {
	src := newFakeSource()
	src.set("job-a", man(lifecycle.Running, "work", 40, fptr(100), strings.Repeat("a long summary ", 6), t0))
	var width atomic.Int64
	width.Store(200)
	resize := make(chan os.Signal, 1)
	r := startLoop(t, src, watchConfig{format: "text", tty: true, dir: "/srv", resize: resize,
		size: func() (int, int) { return int(width.Load()), 24 }})
	waitFor(t, "first draw", 5*time.Second, func() bool { return strings.Count(r.out.String(), ansiRedraw) == 1 })
	if strings.Contains(r.out.String(), "…") {
		t.Fatalf("cut at 200 columns:\n%s", r.out.String())
	}
	width.Store(60)
	resize <- syscall.SIGWINCH
	waitFor(t, "redraw", 5*time.Second, func() bool { return strings.Count(r.out.String(), ansiRedraw) == 2 })
	second := r.out.String()[strings.LastIndex(r.out.String(), ansiRedraw)+len(ansiRedraw):]
	for _, l := range strings.Split(second, "\n") {
		if textsafe.Width(l) >= 60 {
			t.Errorf("line %d wide after resizing to 60: %q", textsafe.Width(l), l)
		}
	}
}

// A tiny terminal (20 columns and 5 rows, and smaller) gets no line wider
// than its width less its last column, by display cells (wide characters
// count two), and no more lines than its height less its last row; what
// was left out is counted on the last line.
func TestWatchScreenFitsATinyTerminal(t *testing.T) {
	views := map[string]jobView{}
	for i := range 3 {
		m := man(lifecycle.Running, "実装フェーズ", 1234.5, fptr(1e20), "漢字の要約 "+strings.Repeat("長い", 20), t0)
		id := fmt.Sprintf("job-%d", i)
		views[id] = viewOf(id, m, nil)
	}
	head := []string{"logist watch: all jobs in /srv/jobs/漢字, 10:01:30 (Ctrl-C to quit)", "logistd running (pid 42)"}
	check := func(screen string, width, height int) []string {
		t.Helper()
		lines := strings.Split(strings.TrimSuffix(screen, "\n"), "\n")
		if len(lines) > max(height-1, 1) {
			t.Errorf("%dx%d: %d lines:\n%s", width, height, len(lines), screen)
		}
		for _, l := range lines {
			if w := textsafe.Width(l); w > max(width-1, 1) {
				t.Errorf("%dx%d: a line %d cells wide: %q", width, height, w, l)
			}
		}
		return lines
	}
	for _, size := range [][2]int{{20, 5}, {20, 6}, {20, 7}, {10, 3}, {1, 1}, {2, 2}, {40, 4}, {5, 24}} {
		for _, vs := range []map[string]jobView{views, {}} {
			check(watchScreen(head, vs, t0.Add(90*time.Second), size[0], size[1]), size[0], size[1])
		}
	}
	// 20x5: the head lines, cut, and the count of the jobs no row had
	// room for.
	lines := check(watchScreen(head, views, t0.Add(90*time.Second), 20, 5), 20, 5)
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "logist watch") || !strings.HasPrefix(lines[2], "… 3 jobs") {
		t.Errorf("20x5:\n%s", strings.Join(lines, "\n"))
	}
	// 20x7: the table with one row, and the others counted.
	lines = check(watchScreen(head, views, t0.Add(90*time.Second), 20, 7), 20, 7)
	if len(lines) != 6 || !strings.Contains(lines[3], "STATUS") || !strings.Contains(lines[4], "RUNNING") || !strings.HasPrefix(lines[5], "… and 2 more") {
		t.Errorf("20x7:\n%s", strings.Join(lines, "\n"))
	}
	// 20x2: one line, and that the others were left out.
	lines = check(watchScreen(head, views, t0.Add(90*time.Second), 20, 2), 20, 2)
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "… 3 more lines") {
		t.Errorf("20x2:\n%s", strings.Join(lines, "\n"))
	}
}

// The watch loop draws to the terminal's size as it reports it: a fake
// 20x5 terminal gets a screen that fits it.
func TestWatchLoopFitsATinyTerminal(t *testing.T) {
	src := newFakeSource()
	src.set("job-a", man(lifecycle.Running, "work", 40, fptr(1e20), "漢字 "+strings.Repeat("a long summary ", 6), t0))
	src.set("job-b", man(lifecycle.Running, "work", 40, fptr(100), "short", t0))
	r := startLoop(t, src, watchConfig{format: "text", tty: true, dir: "/srv/a/long/jobs/folder",
		size: func() (int, int) { return 20, 5 }})
	waitFor(t, "first draw", 5*time.Second, func() bool { return strings.Contains(r.out.String(), "\n") })
	screen := strings.TrimPrefix(r.out.String(), ansiRedraw)
	lines := strings.Split(strings.TrimSuffix(screen, "\n"), "\n")
	if len(lines) > 4 {
		t.Errorf("%d lines on a 5-row terminal:\n%s", len(lines), screen)
	}
	for _, l := range lines {
		if w := textsafe.Width(l); w >= 20 {
			t.Errorf("a line %d cells wide on a 20-column terminal: %q", w, l)
		}
	}
}
