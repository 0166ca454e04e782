package schedule

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/steward"
)

// steered is a jobs folder with a template firing every minute, a
// steward, and "daemons": schedulers running on the real clock (synctest's
// fake one) that learn of the template as logistd does, from the folder.
type steered struct {
	t     *testing.T
	store *jobstore.Store
	env   *jobtx.Env
	st    *steward.Steward
	s     *Scheduler
	cnt   *counts
	stop  func()
}

func newSteered(t *testing.T) *steered {
	dir := t.TempDir()
	store := jobstore.New(dir)
	if err := os.MkdirAll(store.JobDir("nightly"), 0o700); err != nil {
		t.Fatal(err)
	}
	body := strings.Replace(tplBody, "%s", `{"cron": "* * * * *"}`, 1)
	if err := os.WriteFile(filepath.Join(store.JobDir("nightly"), "job.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := &jobtx.Env{Store: store, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	return &steered{t: t, store: store, env: env, st: steward.New(env, builtins.Effects())}
}

// start starts a daemon's scheduler (stopping the previous one: a
// restart).
func (d *steered) start() {
	if d.stop != nil {
		d.stop()
	}
	d.cnt = &counts{n: map[string]int{}}
	d.s = New(d.env, d.env.Logger, d.cnt, builtins.Effects())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.s.Run(ctx); close(done) }()
	d.sync()
	d.stop = func() { cancel(); <-done }
}

// sync tells the scheduler the template changed (logistd's watcher).
func (d *steered) sync() { d.s.Sync("nightly", load(d.t, d.store, "nightly")) }

// runs lists the template's runs after time has run on by d.
func (d *steered) runs(after time.Duration) []string {
	d.t.Helper()
	time.Sleep(after)
	synctest.Wait()
	rs, err := Runs(d.store, "nightly")
	if err != nil {
		d.t.Fatal(err)
	}
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

func (d *steered) want(after time.Duration, n int, what string) []string {
	d.t.Helper()
	ids := d.runs(after)
	if len(ids) != n {
		d.t.Fatalf("%s (now %s): runs %v, want %d", what, time.Now().UTC().Format("15:04:05"), ids, n)
	}
	return ids
}

// A halted schedule never fires again, a paused one fires nothing until
// resumed, and a resumed one fires at its next tick without catching up
// the ticks it was paused for; all of it across a daemon restart, and
// whether or not the daemon has heard of the change yet (each tick reads
// the template).
func TestStewardPausesResumesAndHaltsASchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newSteered(t)
		d.start()
		d.want(3*time.Minute+30*time.Second, 3, "active") // 00:01, 00:02, 00:03

		if _, err := d.st.PauseSchedule("nightly", "maintenance"); err != nil {
			t.Fatal(err)
		}
		d.want(3*time.Minute, 3, "paused, the daemon not yet told")
		d.sync()
		d.want(2*time.Minute, 3, "paused")
		if _, err := d.st.PauseSchedule("nightly", ""); !jobtx.IsOutOfOrder(err) {
			t.Errorf("pausing twice: %v, want out of order", err)
		}
		d.start()
		d.want(2*time.Minute, 3, "paused, after a restart") // now 00:10:30

		if _, err := d.st.ResumeSchedule("nightly", ""); err != nil {
			t.Fatal(err)
		}
		d.sync()
		d.want(20*time.Second, 3, "resumed at 00:10:30: no catch-up of 00:04..00:10")
		ids := d.want(20*time.Second, 4, "resumed, at the next tick")
		if ids[3] != "nightly-20000101-001100Z" {
			t.Errorf("run after resume %s, want the 00:11 tick", ids[3])
		}
		if d.cnt.get("missed") != 0 {
			t.Errorf("ticks while paused counted as missed: %v", d.cnt.n)
		}

		if _, err := d.st.Halt("nightly", "no longer needed"); err != nil {
			t.Fatal(err)
		}
		d.want(3*time.Minute, 4, "halted, the daemon not yet told")
		d.sync()
		d.want(2*time.Minute, 4, "halted")
		d.start()
		d.want(3*time.Minute, 4, "halted, after a restart")
		if _, err := d.st.ResumeSchedule("nightly", ""); !jobtx.IsOutOfOrder(err) {
			t.Errorf("resuming a halted schedule: %v, want out of order", err)
		}
		if m := load(t, d.store, "nightly"); m.Status != lifecycle.Canceled || m.ScheduleState() != manifest.ScheduleStopped {
			t.Errorf("template %s, state %s", m.Status, m.ScheduleState())
		}
		d.stop()
	})
}

// A schedule resumed while no daemon runs: ticks after the resume were
// due like any during downtime (the latest runs at start, as the
// catch-up policy says, for them all); ticks while it was paused were not.
func TestResumedWhileTheDaemonWasDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newSteered(t)
		d.start()
		d.want(90*time.Second, 1, "active") // 00:01
		if _, err := d.st.PauseSchedule("nightly", ""); err != nil {
			t.Fatal(err)
		}
		d.stop()
		time.Sleep(5 * time.Minute) // 00:06:30, down and paused
		if _, err := d.st.ResumeSchedule("nightly", ""); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Minute) // 00:09:30, down: 00:07, 00:08, 00:09 missed
		d.stop = nil
		d.start()
		ids := d.want(10*time.Second, 2, "caught up once at start")
		if ids[1] != "nightly-20000101-000900Z" {
			t.Errorf("caught up %s, want the latest tick since the resume (00:09)", ids[1])
		}
		if d.cnt.get("missed") != 0 {
			t.Errorf("missed %d, want 0 (00:07, 00:08 caught up by 00:09's run, no deadline; the paused 00:02..00:06 never due)", d.cnt.get("missed"))
		}
		d.stop()
	})
}
