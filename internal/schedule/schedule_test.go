package schedule

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) Cron(o string) { c.mu.Lock(); c.n[o]++; c.mu.Unlock() }
func (c *counts) get(o string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[o]
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	return make(chan time.Time) // tests drive fire() directly
}
func (f *fakeClock) set(t time.Time) { f.mu.Lock(); f.now = t; f.mu.Unlock() }

const tplBody = `{"job_id": "nightly", "task_description": "t", "schedule": %s,
 "agents": {"worker": {"provider": "command", "command": {"argv": ["sh", "../agent.sh"]}}, "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`

func setup(t *testing.T, schedule string) (*Scheduler, *fakeClock, *counts, *jobstore.Store) {
	t.Helper()
	dir := t.TempDir()
	store := jobstore.New(dir)
	if err := os.MkdirAll(store.JobDir("nightly"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store.JobDir("nightly"), "job.json"), []byte(strings.Replace(tplBody, "%s", schedule, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store.JobDir("nightly"), "agent.sh"), []byte("echo hi"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := &jobtx.Env{Store: store, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	c := &counts{n: map[string]int{}}
	s := New(env, env.Logger, c, builtins.Effects())
	clk := &fakeClock{now: time.Date(2026, 11, 21, 10, 0, 30, 0, time.UTC)}
	s.Clock = clk
	return s, clk, c, store
}

func load(t *testing.T, store *jobstore.Store, id string) *manifest.Manifest {
	t.Helper()
	m, err := store.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func setStatus(t *testing.T, store *jobstore.Store, id string, st lifecycle.Status) {
	m := load(t, store, id)
	m.Status = st
	if st.Terminal() {
		m.Run.FinishedAt = time.Now().UTC().Format(time.RFC3339Nano)
	}
	if err := store.Save(m); err != nil {
		t.Fatal(err)
	}
}

func TestIntakeRefusesBadExpressions(t *testing.T) {
	for _, c := range []struct{ sched, ptr string }{
		{`{"cron": "61 * * * *"}`, "/schedule/cron"},
		{`{"cron": "every day"}`, "/schedule/cron"},
		{`{"cron": "0 3 * * *", "timezone": "Mars/Olympus"}`, "/schedule/timezone"},
		{`{"cron": "0 3 * * *", "concurrency_policy": "Sometimes"}`, "/schedule/concurrency_policy"},
	} {
		_, err := manifest.Decode("t.json", []byte(strings.Replace(tplBody, "%s", c.sched, 1)))
		var es manifest.Errors
		if !errors.As(err, &es) || es[0].Pointer != c.ptr {
			t.Errorf("%s: err = %v, want pointer %s", c.sched, err, c.ptr)
		}
	}
	if _, err := manifest.Decode("t.json", []byte(strings.Replace(tplBody, "%s", `{"cron": "@every 10m", "timezone": "Europe/Berlin"}`, 1))); err != nil {
		t.Fatal(err)
	}
}

func TestTickCreatesRunFromTemplate(t *testing.T) {
	t.Parallel()
	s, clk, c, store := setup(t, `{"cron": "*/5 * * * *"}`)
	var created []string
	s.Created = func(id string) { created = append(created, id) }
	s.Sync("nightly", load(t, store, "nightly"))
	e := s.templates["nightly"]
	if want := time.Date(2026, 11, 21, 10, 5, 0, 0, time.UTC); !e.next.Equal(want) {
		t.Fatalf("next = %v, want %v", e.next, want)
	}
	clk.set(e.next)
	s.fire("nightly")
	id := "nightly-20261121-100500Z" // the tick in UTC, and the name says so
	if len(created) != 1 || created[0] != id || c.get("created") != 1 {
		t.Fatalf("created %v, counts %v", created, c.n)
	}
	run := load(t, store, id)
	if run.Status != lifecycle.Pending || run.Schedule != nil || run.ScheduledFrom != "nightly" || run.ScheduledAt != "2026-11-21T10:05:00Z" {
		t.Fatalf("run %+v", run)
	}
	if _, err := os.Stat(filepath.Join(store.JobDir(id), "agent.sh")); err != nil {
		t.Error("template files not copied:", err)
	}
	if load(t, store, "nightly").Run.LastScheduledAt == "" {
		t.Error("tick not recorded in the template")
	}
	if !s.templates["nightly"].next.Equal(time.Date(2026, 11, 21, 10, 10, 0, 0, time.UTC)) {
		t.Errorf("next after fire = %v", s.templates["nightly"].next)
	}
}

func TestConcurrencyPolicies(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{Allow, Forbid, Replace} {
		t.Run(policy, func(t *testing.T) {
			s, clk, c, store := setup(t, `{"cron": "*/5 * * * *", "concurrency_policy": "`+policy+`"}`)
			s.Sync("nightly", load(t, store, "nightly"))
			clk.set(s.templates["nightly"].next)
			s.fire("nightly") // 10:05, stays PENDING (unfinished)
			clk.set(s.templates["nightly"].next)
			s.fire("nightly") // 10:10
			first, second := "nightly-20261121-100500Z", "nightly-20261121-101000Z"
			_, err := store.Load(second)
			switch policy {
			case Allow:
				if err != nil || c.get("created") != 2 || load(t, store, first).Status != lifecycle.Pending {
					t.Fatalf("Allow: %v %v", err, c.n)
				}
			case Forbid:
				if err == nil || c.get("skipped") != 1 || c.get("created") != 1 {
					t.Fatalf("Forbid: %v %v", err, c.n)
				}
			case Replace:
				if err != nil || c.get("replaced") != 1 || load(t, store, first).Status != lifecycle.Canceled {
					t.Fatalf("Replace: %v %v %s", err, c.n, load(t, store, first).Status)
				}
			}
		})
	}
}

func TestCatchUpAfterDowntime(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		deadline    string
		wantCreated int
		wantMissed  int
	}{
		// Missed is a tick past the starting deadline (docs/runbook.md):
		// without one, the latest tick's run catches the others up.
		{"no deadline: latest due tick runs", ``, 1, 0},
		{"deadline covers the latest", `, "starting_deadline_seconds": 120`, 1, 2},
		{"deadline passed", `, "starting_deadline_seconds": 10`, 0, 3},
		// Longer than a duration holds: no deadline, not one always passed.
		{"deadline of 1e10 s", `, "starting_deadline_seconds": 1e10`, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _, cnt, store := setup(t, `{"cron": "*/5 * * * *"`+c.deadline+`}`)
			m := load(t, store, "nightly")
			// Last run 09:45; down through the 09:50, 09:55 and 10:00 ticks; now 10:00:30.
			m.Run.LastScheduledAt = "2026-11-21T09:45:00Z"
			if err := store.Save(m); err != nil {
				t.Fatal(err)
			}
			s.Sync("nightly", load(t, store, "nightly"))
			if c.wantCreated == 1 {
				s.fire("nightly")
				if _, err := store.Load("nightly-20261121-100000Z"); err != nil {
					t.Fatal("the latest missed tick did not run:", err)
				}
			} else if s.templates["nightly"].next.Before(s.Clock.Now()) {
				t.Fatal("a tick past its deadline is due")
			}
			if cnt.get("created") != c.wantCreated || cnt.get("missed") != c.wantMissed {
				t.Fatalf("counts %v", cnt.n)
			}
		})
	}
}

func TestHistoryLimitsAndRetention(t *testing.T) {
	t.Parallel()
	s, clk, _, store := setup(t, `{"cron": "*/5 * * * *", "successful_runs_history_limit": 2, "failed_runs_history_limit": 1}`)
	s.Sync("nightly", load(t, store, "nightly"))
	var ids []string
	for i := 0; i < 6; i++ {
		clk.set(s.templates["nightly"].next)
		s.fire("nightly")
		runs, _ := Runs(store, "nightly")
		last := runs[len(runs)-1].ID
		ids = append(ids, last)
		if i == 1 {
			setStatus(t, store, last, lifecycle.Canceled)
		} else if i < 5 {
			setStatus(t, store, last, lifecycle.Success)
		}
	}
	runs, _ := Runs(store, "nightly")
	var got []string
	for _, r := range runs {
		got = append(got, r.ID+":"+string(r.Manifest.Status))
	}
	// Kept: the canceled run (limit 1), the 2 newest successes, the new pending run.
	want := []string{ids[1] + ":CANCELED", ids[3] + ":SUCCESS", ids[4] + ":SUCCESS", ids[5] + ":PENDING"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("runs kept:\n%v\nwant\n%v", got, want)
	}
	// Retention deletes finished jobs older than the setting, never
	// unfinished ones or templates.
	if n := Prune(store, time.Hour, time.Now().Add(2*time.Hour), s.Logger); n != 3 {
		t.Fatalf("pruned %d", n)
	}
	runs, _ = Runs(store, "nightly")
	if len(runs) != 1 || runs[0].ID != ids[5] {
		t.Fatalf("after retention: %v", runs)
	}
	if _, err := store.Load("nightly"); err != nil {
		t.Fatal("template deleted")
	}
}

// A run copies the template's definition, never its run: not the
// manifest (the run gets its own), not the history in any of its files
// (history.IsFile decides which), not requests, snapshots or the lock.
func TestCopyTemplateLeavesTheRunBehind(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	l, _, err := history.OpenWith(src, history.Options{MaxBytes: 300})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := l.Append(&history.Record{Type: history.TypeError, Error: &history.ErrorInfo{Code: "X", Message: strings.Repeat("m", 200)}}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	if err := history.WriteJobHistory(src, "nightly", "", ""); err != nil {
		t.Fatal(err)
	}
	hist, err := history.Files(src)
	if err != nil || len(hist) < 4 { // active file, index, archives, jobHistory.json
		t.Fatalf("the template has history files %v (%v); the test wants them all", hist, err)
	}
	for name, body := range map[string]string{jobstore.ManifestFile: "{}", ".lock": "", "agent.sh": "echo hi", "notes.gz": "z",
		"history-notes.md": "mine", "requests/000001.json": "{}", "snapshots/s/x": "x", "prompts/worker.md": "do it"} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := copyTemplate(src, dst); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dst, p)
			got = append(got, rel)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"agent.sh", "history-notes.md", "notes.gz", "prompts/worker.md"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("copied %v, want %v", got, want)
	}
}

// A scheduled run that cannot be created is counted as failed and logged
// as seed 004's error line.
func TestFailedRunIsLoggedWithTheSeedsFields(t *testing.T) {
	s, clk, c, store := setup(t, `{"cron": "*/5 * * * *"}`)
	var logs bytes.Buffer
	s.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	s.Sync("nightly", load(t, store, "nightly"))
	clk.set(s.templates["nightly"].next)
	// The run's folder is taken already.
	if err := os.Mkdir(store.JobDir("nightly-20261121-100500Z"), 0o700); err != nil {
		t.Fatal(err)
	}
	s.fire("nightly")
	if c.get("failed") != 1 {
		t.Fatalf("counts %v", c.n)
	}
	var found bool
	for _, l := range joblog.Lines(logs.Bytes()) {
		if l["error_code"] != codes.CronFailed {
			continue
		}
		found = true
		if err := joblog.Check(l); err != nil || l["job_id"] != "nightly" || l["level"] != "ERROR" {
			t.Errorf("%v: %v", err, l)
		}
	}
	if !found {
		t.Errorf("no CRON_FAILED line:\n%s", logs.String())
	}
}

// A schedule whose next tick robfig/cron cannot find (its Next gives the
// zero time: February 29th seen from 2097, 2100 being no leap year) is
// never due: it made run nightly-00010101-000000Z at once, counted 99
// ticks missed, and failed on "run exists already" at every start.
func TestNoNextTickNeverFires(t *testing.T) {
	s, clk, c, store := setup(t, `{"cron": "0 0 29 2 *"}`)
	clk.set(time.Date(2097, 3, 1, 0, 0, 0, 0, time.UTC))
	m := load(t, store, "nightly")
	m.Run.LastScheduledAt = "2096-02-29T00:00:00Z"
	if err := store.Save(m); err != nil {
		t.Fatal(err)
	}
	s.Sync("nightly", load(t, store, "nightly"))
	if due, soonest := s.dueAt(clk.Now()); len(due) != 0 || !soonest.IsZero() {
		t.Fatalf("due %v, soonest %s: want nothing", due, soonest)
	}
	s.Sync("nightly", load(t, store, "nightly")) // a change heard: still nothing
	if due, _ := s.dueAt(clk.Now()); len(due) != 0 {
		t.Fatalf("due %v after a second sync", due)
	}
	if len(c.n) != 0 {
		t.Fatalf("counted %v", c.n)
	}
	if runs, _ := Runs(store, "nightly"); len(runs) != 0 {
		t.Fatalf("runs %v", runs)
	}
}

// An @every schedule's interval counts from its last run, not from the
// daemon's start: @every 1h last run 10:20 is next due at 11:20 whenever
// the daemon starts; after downtime the next tick is a whole number of
// intervals from it.
func TestEveryCountsFromTheLastRun(t *testing.T) {
	spec, err := (&manifest.Schedule{Cron: "@every 1h"}).Spec()
	if err != nil {
		t.Fatal(err)
	}
	last := time.Date(2026, 11, 21, 10, 20, 0, 0, time.UTC)
	for _, c := range []struct{ now, want string }{
		{"10:50:00", "11:20:00"},
		{"11:20:00", "12:20:00"},
		{"13:05:30", "13:20:00"},
	} {
		now, _ := time.Parse(time.DateTime, "2026-11-21 "+c.now)
		if got := Next(spec, last, now).Format(time.TimeOnly); got != c.want {
			t.Errorf("last 10:20, now %s: next %s, want %s", c.now, got, c.want)
		}
	}
	if got := Next(spec, time.Time{}, last); !got.Equal(last.Add(time.Hour)) {
		t.Errorf("never ran: next %s, want an hour from now", got)
	}

	s, clk, _, store := setup(t, `{"cron": "@every 1h"}`)
	clk.set(time.Date(2026, 11, 21, 10, 50, 0, 0, time.UTC))
	m := load(t, store, "nightly")
	m.Run.LastScheduledAt = last.Format(time.RFC3339Nano)
	if err := store.Save(m); err != nil {
		t.Fatal(err)
	}
	s.Sync("nightly", load(t, store, "nightly"))
	if got := s.templates["nightly"].next; !got.Equal(last.Add(time.Hour)) {
		t.Errorf("the daemon's next tick %s, want 11:20 (an hour after the last run)", got)
	}
}

// After downtime longer than maxMissed ticks, the latest due tick runs
// once and the next tick is after now: the catch-up is one run, not one
// per tick walked from where the count stopped.
func TestLongDowntimeCatchesUpOnce(t *testing.T) {
	s, clk, c, store := setup(t, `{"cron": "* * * * *"}`)
	now := time.Date(2026, 11, 21, 10, 0, 30, 0, time.UTC)
	clk.set(now)
	m := load(t, store, "nightly")
	m.Run.LastScheduledAt = now.Add(-24 * time.Hour).Format(time.RFC3339Nano)
	if err := store.Save(m); err != nil {
		t.Fatal(err)
	}
	s.Sync("nightly", load(t, store, "nightly"))
	for range 5 {
		due, _ := s.dueAt(clk.Now())
		if len(due) == 0 {
			break
		}
		s.fire("nightly")
	}
	runs, _ := Runs(store, "nightly")
	if len(runs) != 1 || runs[0].ID != "nightly-20261121-100000Z" {
		t.Fatalf("runs %v, want the 10:00 tick's only", runs)
	}
	if next := s.templates["nightly"].next; !next.Equal(now.Add(30 * time.Second)) {
		t.Errorf("next %s, want 10:01", next)
	}
	if c.get("missed") != 0 || c.get("created") != 1 {
		t.Errorf("counts %v", c.n)
	}
}

// Ticks past the starting deadline are logged once per schedule, a
// warning with seed 004's fields naming how many and the first and last,
// and counted; without a deadline the ticks the latest run catches up are
// logged at INFO and not counted as missed.
func TestMissedTicksAreLoggedOnce(t *testing.T) {
	for _, c := range []struct {
		deadline string
		missed   int
		level    string
	}{
		{`, "starting_deadline_seconds": 120`, 2, "WARN"},
		{``, 0, "INFO"},
	} {
		s, _, cnt, store := setup(t, `{"cron": "*/5 * * * *"`+c.deadline+`}`)
		var logs bytes.Buffer
		s.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		m := load(t, store, "nightly")
		m.Run.LastScheduledAt = "2026-11-21T09:45:00Z" // down through 09:50, 09:55, 10:00; now 10:00:30
		if err := store.Save(m); err != nil {
			t.Fatal(err)
		}
		s.Sync("nightly", load(t, store, "nightly"))
		lines := joblog.Lines(logs.Bytes())
		if len(lines) != 1 {
			t.Fatalf("%s: %d lines:\n%s", c.deadline, len(lines), logs.String())
		}
		l := lines[0]
		if l["level"] != c.level || l["first_tick"] != "2026-11-21T09:50:00Z" || l["last_tick"] != "2026-11-21T10:00:00Z" ||
			l["tick"] != "2026-11-21T10:00:00Z" || l["missed"] != float64(c.missed) {
			t.Errorf("%s: %v", c.deadline, l)
		}
		if c.missed > 0 {
			if err := joblog.Check(l); err != nil || l["error_code"] != codes.CronMissed || l["job_id"] != "nightly" {
				t.Errorf("%v: %v", err, l)
			}
		}
		if cnt.get("missed") != c.missed {
			t.Errorf("%s: counts %v", c.deadline, cnt.n)
		}
	}
}
