// Package schedule runs recurring jobs: a manifest with a `schedule` is a
// template, and each tick of its cron expression (robfig/cron/v3) creates a
// new job from it, <template>-<YYYYMMDD-HHMMSS>, that the daemon then runs
// like any other. Concurrency policies, a starting deadline for ticks missed
// while the daemon was down, and history limits follow Kubernetes CronJob.
//
// A steward steers a template, not the scheduler: pause, resume and halt
// are recorded commands on the template (internal/steward), and the
// scheduler obeys the template as it finds it at each tick
// (manifest.ScheduleState), so no command depends on the daemon hearing of
// it, or running at all.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/effect"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/steward"
)

// Policies.
const (
	Allow   = "Allow"
	Forbid  = "Forbid"
	Replace = "Replace"
)

// Defaults of a schedule's history limits.
const (
	DefaultSuccessfulLimit = 3
	DefaultFailedLimit     = 1
	// maxMissed bounds how many missed ticks are counted after downtime.
	maxMissed = 100
)

// Observer counts outcomes: created, skipped, replaced, missed, failed.
type Observer interface{ Cron(outcome string) }

// Clock is time, injectable for tests.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Scheduler fires the templates of one jobs folder.
type Scheduler struct {
	Env     *jobtx.Env
	Logger  *slog.Logger
	Obs     Observer
	Clock   Clock
	Created func(id string) // the daemon starts the new job
	Changed func(id string) // a job this scheduler changed (halted by Replace)
	// Effects are the workflows' effects, for the halts of Replace
	// (steward.Steward.Effects).
	Effects effect.Registry

	mu        sync.Mutex
	templates map[string]*entry
	wake      chan struct{}
}

type entry struct {
	id   string
	next time.Time
	// paused: the template fires nothing until resumed (next is zero).
	paused bool
}

// New returns a scheduler.
func New(env *jobtx.Env, logger *slog.Logger, obs Observer, effects effect.Registry) *Scheduler {
	return &Scheduler{Env: env, Logger: logger, Obs: obs, Effects: effects, Clock: realClock{}, templates: map[string]*entry{}, wake: make(chan struct{}, 1)}
}

// Sync adds, updates or (m nil, without schedule, or stopped) removes
// template id. A template seen for the first time catches up (CatchUp):
// the latest tick due since its last run or, if later, since a steward
// resumed it runs now, unless it is past its starting deadline. A paused
// template is kept, firing nothing; resumed, it fires at its next tick:
// ticks while it was paused are never caught up. A schedule with no next
// tick (nothing matches) fires nothing.
func (s *Scheduler) Sync(id string, m *manifest.Manifest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m == nil || m.Schedule == nil || m.ScheduleState() == manifest.ScheduleStopped {
		delete(s.templates, id)
		s.poke()
		return
	}
	spec, err := m.Schedule.Spec()
	if err != nil {
		delete(s.templates, id) // intake already reported it
		return
	}
	now := s.Clock.Now()
	e, known := s.templates[id]
	switch {
	case m.ScheduleState() == manifest.SchedulePaused:
		if !known {
			e = &entry{id: id}
			s.templates[id] = e
		}
		e.paused, e.next = true, time.Time{}
	case !known:
		e = &entry{id: id}
		s.templates[id] = e
		c := CatchUp(m, spec, now)
		e.next = c.Next
		if !c.Due.IsZero() {
			e.next = c.Due // due now
		}
		s.logCatchUp(id, c)
	case e.paused:
		// Resumed while this scheduler watched it: the next tick, no
		// catch-up.
		e.paused, e.next = false, spec.Next(now)
	default:
		// The expression may have changed; keep a due tick due.
		if n := Next(spec, Since(m), now); !n.IsZero() && (n.Before(e.next) || e.next.IsZero()) {
			e.next = n
		}
	}
	s.poke()
}

// Since is when template m's schedule last fired, or a steward last
// resumed it, whichever is later (zero: neither).
func Since(m *manifest.Manifest) time.Time {
	since, err := time.Parse(time.RFC3339Nano, m.Run.LastScheduledAt)
	if err != nil {
		since = time.Time{}
	}
	if resumed, err := time.Parse(time.RFC3339Nano, m.Run.ScheduleResumedAt); err == nil && resumed.After(since) {
		since = resumed
	}
	return since
}

// Next is spec's first tick after now, counted from since (the template's
// last run or resume; zero: none) where the schedule is an interval:
// @every 1h that last ran at 10:20 next fires at 11:20, whenever the
// daemon started, not an hour after its start. A cron expression's ticks
// are fixed times. Zero: never (nothing matches).
func Next(spec cron.Schedule, since, now time.Time) time.Time {
	d, ok := spec.(cron.ConstantDelaySchedule)
	if !ok || since.IsZero() || d.Delay <= 0 {
		return spec.Next(now)
	}
	if since.After(now) {
		return spec.Next(since)
	}
	// Whole intervals from since, without walking each.
	t := since.Add(now.Sub(since) / d.Delay * d.Delay)
	for !t.After(now) {
		t = spec.Next(t)
	}
	return t
}

// Catch is what a template owes after time the scheduler did not watch
// it (the daemon down): one rule, the file-mode scheduler's.
type Catch struct {
	// Due is the tick to run now: the latest tick due since the last run
	// (or resume), within the starting deadline. Zero: none.
	Due time.Time
	// CaughtUp counts the due ticks before Due, within the deadline: Due's
	// run does their work (one run for the downtime), they are not missed.
	CaughtUp int
	// Missed counts the due ticks past the starting deadline: no run is
	// made for them. Without a deadline no tick is missed.
	Missed int
	// First and Last are the earliest and latest due ticks (zero: none).
	First, Last time.Time
	// Capped: there were more due ticks than maxMissed; the counts stop
	// there.
	Capped bool
	// Next is the tick after now (zero: never).
	Next time.Time
}

// CatchUp is what template m (schedule spec) owes at now for the ticks due
// since it last fired or was resumed (none if neither: a new template
// starts at its next tick).
func CatchUp(m *manifest.Manifest, spec cron.Schedule, now time.Time) Catch {
	since := Since(m)
	c := Catch{Next: Next(spec, since, now)}
	if since.IsZero() {
		return c
	}
	var deadline time.Duration = -1
	if dl := m.Schedule.StartingDeadlineSeconds; dl != nil {
		deadline = manifest.Duration(*dl, time.Second)
	}
	late := func(t time.Time) bool { return deadline >= 0 && now.Sub(t) > deadline }
	n := 0
	for t := spec.Next(since); !t.IsZero() && !t.After(now); t = spec.Next(t) {
		if n == maxMissed {
			c.Capped = true
			break
		}
		if n == 0 {
			c.First = t
		}
		c.Last = t
		n++
		if late(t) {
			c.Missed++
		} else {
			c.CaughtUp++
		}
	}
	if n == 0 {
		return c
	}
	if c.Capped {
		// The latest due tick, found back from now rather than walked to
		// (not counted: the counts stop at maxMissed).
		c.Last = latestDue(spec, c.Last, now)
	}
	if !late(c.Last) {
		c.Due = c.Last
		if !c.Capped {
			c.CaughtUp-- // Due itself
		}
	}
	return c
}

// latestDue is spec's latest tick in (after, now], given there is one:
// searched in windows back from now that double.
func latestDue(spec cron.Schedule, after, now time.Time) time.Time {
	for w := time.Minute; ; w *= 2 {
		from := now.Add(-w)
		if !from.After(after) {
			from = after
		}
		if t := spec.Next(from); !t.IsZero() && !t.After(now) {
			for n := spec.Next(t); !n.IsZero() && !n.After(now); n = spec.Next(n) {
				t = n
			}
			return t
		}
		if from.Equal(after) {
			return after
		}
	}
}

// logCatchUp logs template id's ticks due while the scheduler did not
// watch it: one line for them all, bounded whatever the downtime.
func (s *Scheduler) logCatchUp(id string, c Catch) {
	for range c.Missed {
		s.Obs.Cron("missed")
	}
	if c.First.IsZero() {
		return
	}
	attrs := []any{"template", id, "first_tick", c.First.UTC().Format(time.RFC3339), "last_tick", c.Last.UTC().Format(time.RFC3339),
		"missed", c.Missed, "caught_up", c.CaughtUp, "capped", c.Capped}
	if !c.Due.IsZero() {
		attrs = append(attrs, "tick", c.Due.UTC().Format(time.RFC3339))
	}
	if c.Missed > 0 {
		msg := fmt.Sprintf("scheduled ticks missed while logistd was down: %d past the starting deadline, no run for them", c.Missed)
		if !c.Due.IsZero() {
			msg += "; the latest runs now"
		}
		joblog.Log(s.Logger, msg, joblog.Problem{Job: id, Code: codes.CronMissed}, attrs...)
		return
	}
	if c.CaughtUp > 0 {
		s.Logger.Info(fmt.Sprintf("scheduled ticks due while logistd was down: the latest runs now for them and %d before it", c.CaughtUp),
			append([]any{"job_id", id}, attrs...)...)
	}
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run fires due templates until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	for {
		now := s.Clock.Now()
		due, soonest := s.dueAt(now)
		for _, id := range due {
			s.fire(id)
		}
		if len(due) > 0 {
			continue
		}
		var timer <-chan time.Time
		if !soonest.IsZero() {
			timer = s.Clock.After(soonest.Sub(now))
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-timer:
		}
	}
}

// dueAt lists the templates due at now, sorted, and the soonest tick of
// the others (zero: none). A paused template, or one with no next tick
// (robfig/cron's zero time: nothing matches), is never due.
func (s *Scheduler) dueAt(now time.Time) (due []string, soonest time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, e := range s.templates {
		if e.paused || e.next.IsZero() {
			continue
		}
		if !e.next.After(now) {
			due = append(due, id)
		} else if soonest.IsZero() || e.next.Before(soonest) {
			soonest = e.next
		}
	}
	sort.Strings(due)
	return due, soonest
}

// fire creates the run for template id's due tick and schedules the next.
func (s *Scheduler) fire(id string) {
	s.mu.Lock()
	e, ok := s.templates[id]
	if !ok {
		s.mu.Unlock()
		return
	}
	tick := e.next
	s.mu.Unlock()

	next, err := s.fireAt(id, tick)
	s.mu.Lock()
	if e, ok := s.templates[id]; ok && !e.paused {
		if err != nil {
			// Do not spin on a broken template: try again at the next tick.
			if m, lerr := s.Env.Store.Load(id); lerr == nil && m.Schedule != nil && m.ScheduleState() != manifest.ScheduleStopped {
				if spec, perr := m.Schedule.Spec(); perr == nil {
					next = Next(spec, tick, s.Clock.Now())
				}
			}
		}
		if next.IsZero() {
			delete(s.templates, id)
		} else {
			e.next = next
		}
	}
	s.mu.Unlock()
}

// fireAt creates the run of template id for tick, applying its concurrency
// policy, records the tick in the template, prunes old runs, and returns
// the template's next tick (zero: it fires no more). The template is read
// as it is now, so a halt or pause the watcher has not yet reported is
// obeyed all the same.
func (s *Scheduler) fireAt(id string, tick time.Time) (time.Time, error) {
	tpl, err := s.Env.Store.Load(id)
	if err != nil || tpl.Schedule == nil || tpl.ScheduleState() == manifest.ScheduleStopped {
		return time.Time{}, err
	}
	spec, err := tpl.Schedule.Spec()
	if err != nil {
		return time.Time{}, err
	}
	// The tick after this one and after now: a tick caught up late is not
	// followed by the ones it caught up.
	next := Next(spec, tick, s.Clock.Now())
	if tick.IsZero() {
		return time.Time{}, nil // nothing matches: it never fires
	}
	if tpl.ScheduleState() == manifest.SchedulePaused {
		return next, nil
	}
	runs, err := Runs(s.Env.Store, id)
	if err != nil {
		s.fail(id, err)
		return next, err
	}
	var unfinished []string
	for _, r := range runs {
		if !r.Manifest.Status.Terminal() {
			unfinished = append(unfinished, r.ID)
		}
	}
	switch tpl.Schedule.ConcurrencyPolicy {
	case Forbid:
		if len(unfinished) > 0 {
			s.Obs.Cron("skipped")
			s.Logger.Info("scheduled run skipped: an earlier run is not finished (Forbid)", "job_id", id, "tick", tick.UTC().Format(time.RFC3339), "unfinished", unfinished)
			return next, s.markTick(id, tick)
		}
	case Replace:
		st := &steward.Steward{Env: s.Env, User: "schedule", Effects: s.Effects}
		for _, r := range unfinished {
			if _, err := st.Halt(r, "replaced by the run of "+tick.UTC().Format(time.RFC3339)+" (Replace)"); err != nil && !jobtx.IsOutOfOrder(err) {
				s.fail(id, fmt.Errorf("replace %s: %w", r, err))
				return next, err
			}
			s.Obs.Cron("replaced")
			if s.Changed != nil {
				s.Changed(r)
			}
		}
	}
	runID, err := s.create(id, tpl, tick)
	if err != nil {
		s.fail(id, err)
		return next, err
	}
	s.Obs.Cron("created")
	s.Logger.Info("scheduled run created", "job_id", runID, "template", id, "tick", tick.UTC().Format(time.RFC3339))
	if err := s.markTick(id, tick); err != nil {
		s.fail(id, err)
	}
	s.prune(id, tpl.Schedule)
	if s.Created != nil {
		s.Created(runID)
	}
	return next, nil
}

func (s *Scheduler) fail(id string, err error) {
	s.Obs.Cron("failed")
	joblog.Log(s.Logger, "scheduled run failed: "+err.Error(), joblog.Problem{Job: id, Code: codes.CronFailed})
}

// RunID is the id of template id's run for tick: the tick in UTC, which
// the name says with a Z (nightly-20261121-030000Z), whatever time zone
// the schedule's cron expression is read in.
func RunID(id string, tick time.Time) string {
	return id + "-" + tick.UTC().Format("20060102-150405") + "Z"
}

// create makes the run's folder: the template folder's files (scripts,
// prompts, an initial workspace) and, last, its manifest, so the daemon
// never sees a half-made job.
func (s *Scheduler) create(id string, tpl *manifest.Manifest, tick time.Time) (string, error) {
	runID := RunID(id, tick)
	if err := manifest.ValidID(runID); err != nil {
		return "", err
	}
	dst := s.Env.Store.JobDir(runID)
	if err := os.Mkdir(dst, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("run %s exists already", runID)
		}
		return "", err
	}
	if err := copyTemplate(s.Env.Store.JobDir(id), dst); err != nil {
		_ = os.RemoveAll(dst) // a half copy; without a manifest it is no job
		return "", fmt.Errorf("copy template: %w", err)
	}
	run := RunManifest(tpl, id, tick, s.Clock.Now())
	if err := atomicfile.SyncDir(s.Env.Store.Dir); err != nil {
		return "", err
	}
	if err := s.Env.Store.EnsureWorkspace(runID); err != nil {
		return "", err
	}
	return runID, s.Env.Store.Save(run)
}

// RunManifest is the manifest of template id's run for tick, created at
// now: the template's, without its schedule, PENDING at no phase, with
// nothing run yet (cluster mode's scheduler makes runs with it too).
func RunManifest(tpl *manifest.Manifest, id string, tick, now time.Time) *manifest.Manifest {
	run := *tpl
	run.JobID, run.Schedule, run.Status, run.CurrentPhase = RunID(id, tick), nil, lifecycle.Pending, nil
	run.ScheduledFrom, run.ScheduledAt = id, tick.UTC().Format(time.RFC3339)
	run.CreatedAt = now.UTC().Format(time.RFC3339Nano)
	run.Metrics, run.History, run.Run = manifest.Metrics{}, []manifest.AuditEntry{}, manifest.RunState{}
	return &run
}

// Files of a job folder that belong to the job's run, not its definition
// (and the history's files: history.IsFile).
var runtimeNames = map[string]bool{
	jobstore.ManifestFile: true, ".lock": true, "requests": true, "snapshots": true,
}

func copyTemplate(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		if runtimeNames[name] || history.IsFile(name) {
			continue
		}
		switch {
		case e.IsDir():
			if err := os.CopyFS(filepath.Join(dst, name), os.DirFS(filepath.Join(src, name))); err != nil {
				return err
			}
		case e.Type().IsRegular():
			b, err := os.ReadFile(filepath.Join(src, name))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dst, name), b, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Scheduler) markTick(id string, tick time.Time) error {
	lk, err := s.Env.Store.LockJob(id)
	if err != nil {
		return err
	}
	defer lk.Unlock() //nolint:errcheck // closing the descriptor releases it anyway
	m, err := s.Env.Store.Load(id)
	if err != nil {
		return err
	}
	m.Run.LastScheduledAt = tick.UTC().Format(time.RFC3339Nano)
	return s.Env.Store.Save(m)
}

// Runs lists template id's runs, oldest first.
func Runs(store *jobstore.Store, id string) ([]jobstore.Entry, error) {
	ents, err := store.List()
	if err != nil {
		return nil, err
	}
	var out []jobstore.Entry
	for _, e := range ents {
		if e.Err == nil && e.Manifest != nil && e.Unplaced == "" && e.Manifest.ScheduledFrom == id {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Manifest.ScheduledAt < out[j].Manifest.ScheduledAt })
	return out, nil
}

// prune deletes finished runs beyond the history limits, oldest first.
func (s *Scheduler) prune(id string, sch *manifest.Schedule) {
	okLimit, failLimit := DefaultSuccessfulLimit, DefaultFailedLimit
	if sch.SuccessfulRunsHistoryLimit != nil {
		okLimit = *sch.SuccessfulRunsHistoryLimit
	}
	if sch.FailedRunsHistoryLimit != nil {
		failLimit = *sch.FailedRunsHistoryLimit
	}
	runs, err := Runs(s.Env.Store, id)
	if err != nil {
		return
	}
	var ok, failed []string
	for _, r := range runs {
		switch r.Manifest.Status {
		case lifecycle.Success:
			ok = append(ok, r.ID)
		case lifecycle.Canceled:
			failed = append(failed, r.ID)
		}
	}
	for _, group := range []struct {
		ids   []string
		limit int
	}{{ok, okLimit}, {failed, failLimit}} {
		for i := 0; i < len(group.ids)-group.limit; i++ {
			if err := Delete(s.Env.Store, group.ids[i]); err != nil {
				s.Logger.Warn("could not delete an old scheduled run", "job_id", group.ids[i], "err", err.Error())
				continue
			}
			s.Logger.Info("deleted an old scheduled run (history limit)", "job_id", group.ids[i], "template", id)
		}
	}
}

// Delete removes a finished job's folder, under its lock.
func Delete(store *jobstore.Store, id string) error {
	lk, err := store.LockJob(id)
	if err != nil {
		return err
	}
	defer lk.Unlock() //nolint:errcheck // closing the descriptor releases it anyway
	m, err := store.Load(id)
	if err != nil {
		return err
	}
	if !m.Status.Terminal() {
		return fmt.Errorf("job %s is %s, not finished", id, m.Status)
	}
	if err := os.RemoveAll(store.JobDir(id)); err != nil {
		return err
	}
	return atomicfile.SyncDir(store.Dir)
}

// Prune deletes finished jobs (SUCCESS, CANCELED) that finished more than
// retention ago: the daemon's optional maintenance.
func Prune(store *jobstore.Store, retention time.Duration, now time.Time, logger *slog.Logger) int {
	ents, err := store.List()
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if e.Err != nil || e.Manifest == nil || !e.Manifest.Status.Terminal() || e.Manifest.Schedule != nil {
			continue
		}
		fin, err := time.Parse(time.RFC3339Nano, e.Manifest.Run.FinishedAt)
		if err != nil || now.Sub(fin) < retention {
			continue
		}
		if err := Delete(store, e.ID); err != nil {
			logger.Warn("retention: could not delete a finished job", "job_id", e.ID, "err", err.Error())
			continue
		}
		logger.Info("retention: deleted a finished job", "job_id", e.ID, "finished_at", e.Manifest.Run.FinishedAt)
		n++
	}
	return n
}
