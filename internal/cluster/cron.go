package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/schedule"
	"github.com/logist/logist/internal/steward"
)

// Cron schedules in cluster mode: every node looks at the templates every
// cronEvery, and a node that finds a tick due fires it through
// Store.Fire, whose row per (template, tick) makes the tick fire once
// cluster-wide — the run is inserted in the same transaction — however
// many nodes find it due at once. A tick is due from its time on. Ticks
// missed while no node ran are caught up as file mode does
// (internal/schedule): only the latest fires, and not when it is older
// than the schedule's starting_deadline_seconds (beyond the cronEvery a
// node may take to see it): then it is recorded fired with no run, so
// the schedule waits for its next tick. Ticks while the schedule was
// paused are not caught up. concurrency_policy Forbid fires a tick with no
// run while a run of the template is unfinished; Replace first halts each
// unfinished run through the steering path (Steer, an idempotency key per
// tick and run: once cluster-wide, and the halted run's node is fenced),
// then fires the tick. A run gets its template's folder files (those
// submitted with it: ReadJobFolder), as file mode copies them.

// cronEvery is how often a node looks for due ticks (a run starts at most
// this long after its tick; cron's unit is the minute).
const cronEvery = 5 * time.Second

// cron fires due ticks until ctx ends.
func (n *Node) cron(ctx context.Context) {
	t := time.NewTicker(cronEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := n.fireDue(ctx, time.Now()); err != nil && ctx.Err() == nil {
			n.cronCount("failed", 1)
			joblog.Log(n.Logger, "scheduled run failed: "+err.Error(), joblog.Problem{Code: codes.CronFailed}, "node", n.ID)
		}
	}
}

// fireDue fires every template's tick due at now (once cluster-wide).
func (n *Node) fireDue(ctx context.Context, now time.Time) error {
	js, err := n.Store.Jobs(ctx)
	if err != nil {
		return err
	}
	if n.seen == nil {
		n.seen = map[string]time.Time{}
	}
	for _, j := range js {
		if !j.Template {
			continue
		}
		tpl, err := manifest.Decode(j.ID, j.Manifest)
		if err != nil || tpl.Schedule == nil || tpl.ScheduleState() != manifest.ScheduleActive {
			continue
		}
		spec, err := tpl.Schedule.Spec()
		if err != nil {
			continue
		}
		// Ticks after the last fired one, the schedule's resumption, or
		// (for a template no tick fired yet) when this node first saw it.
		base, err := n.Store.LastTick(ctx, j.ID)
		if err != nil {
			return err
		}
		if first, ok := n.seen[j.ID]; !ok {
			n.seen[j.ID] = now
			if base.IsZero() {
				base = now
			}
		} else if base.IsZero() {
			base = first
		}
		if r, err := time.Parse(time.RFC3339Nano, tpl.Run.ScheduleResumedAt); err == nil && r.After(base) {
			base = r
		}
		tick := spec.Next(base)
		if tick.IsZero() || tick.After(now) {
			continue
		}
		// Due ticks before the latest are caught up by its run, as in
		// file mode (schedule.CatchUp): missed only past the starting
		// deadline (none: never), like the latest itself.
		deadline := time.Duration(-1)
		if dl := tpl.Schedule.StartingDeadlineSeconds; dl != nil {
			deadline = manifest.Duration(*dl, time.Second)
		}
		late := func(t time.Time) bool { return deadline >= 0 && now.Sub(t)-cronEvery > deadline }
		passedLate := 0
		for i := 0; i < 1000; i++ { // the latest due tick
			next := spec.Next(tick)
			if next.IsZero() || next.After(now) {
				break
			}
			if late(tick) {
				passedLate++
			}
			tick = next
		}
		if err := n.fire(ctx, j.ID, tpl, tick, now, js, late(tick), passedLate); err != nil {
			return err
		}
	}
	return nil
}

// fire fires template id's tick: a run of it, or none when the tick was
// missed (past its starting deadline) or Forbid skips it. passed due
// ticks before it were missed (past the deadline too); the node that
// fires the tick counts them, so each is counted once cluster-wide.
func (n *Node) fire(ctx context.Context, id string, tpl *manifest.Manifest, tick, now time.Time, js []clusterstore.Job, missed bool, passed int) error {
	t := clusterstore.Tick{Template: id, At: tick, Node: n.ID}
	var unfinished []string
	for _, r := range js {
		if strings.HasPrefix(r.ID, id+"-") && !r.Template && !r.Status.Terminal() {
			if m, err := manifest.Decode(r.ID, r.Manifest); err == nil && m.ScheduledFrom == id {
				unfinished = append(unfinished, r.ID)
			}
		}
	}
	policy := tpl.Schedule.ConcurrencyPolicy
	skip := missed || (policy == schedule.Forbid && len(unfinished) > 0)
	if !skip && policy == schedule.Replace {
		for _, r := range unfinished {
			if err := n.replace(ctx, id, r, tick); err != nil {
				return err
			}
		}
	}
	if !skip {
		run := schedule.RunManifest(tpl, id, tick, now)
		b, err := run.Encode()
		if err != nil {
			return err
		}
		files, err := n.Store.Files(ctx, id) // the template folder's (ReadJobFolder)
		if err != nil {
			return err
		}
		t.Run, t.Manifest, t.Files = run.JobID, b, files
	}
	fired, err := n.Store.Fire(ctx, t)
	if err != nil || !fired {
		return err
	}
	at := tick.UTC().Format(time.RFC3339)
	if passed > 0 {
		n.cronCount("missed", passed)
		joblog.Log(n.Logger, fmt.Sprintf("scheduled ticks missed while no node ran: %d past the starting deadline, no run for them", passed),
			joblog.Problem{Job: id, Code: codes.CronMissed}, "template", id, "missed", passed, "tick", at, "node", n.ID)
	}
	switch {
	case missed:
		n.cronCount("missed", 1)
		n.Logger.Warn("scheduled run missed: past its starting deadline", "job_id", id, "tick", at, "node", n.ID)
	case skip:
		n.cronCount("skipped", 1)
		n.Logger.Info("scheduled run skipped: an earlier run is not finished (Forbid)", "job_id", id, "tick", at, "node", n.ID)
	default:
		n.cronCount("created", 1)
		n.Logger.Info("scheduled run created", "job_id", t.Run, "template", id, "tick", at, "node", n.ID)
	}
	return nil
}

// cronCount counts k scheduled-run outcomes of this node's.
func (n *Node) cronCount(outcome string, k int) {
	if n.Cron == nil {
		return
	}
	for range k {
		n.Cron.Cron(outcome)
	}
}

// replace halts run, an unfinished run of template id, for tick's run
// (Replace): a steward's halt signed by this node, through Steer under a
// key of the tick and the run, so that nodes replacing at once halt it
// once, and the node running it is fenced and kills its agent. A run
// finished or halted meanwhile is left as it is.
func (n *Node) replace(ctx context.Context, id, run string, tick time.Time) error {
	at := tick.UTC().Format(time.RFC3339)
	reason := "replaced by the run of " + at + " (Replace)"
	out, err := Steer(ctx, n.Store, Steering{Job: run, Key: "schedule-replace " + id + " " + at + " " + run,
		Command: "schedule replace " + run + " at " + at,
		Apply: func(jobsDir string) error {
			env := &jobtx.Env{Store: jobstore.New(jobsDir), Logger: n.Logger,
				History: history.Options{Signer: n.key, MaxBytes: -1}}
			st := &steward.Steward{Env: env, User: "schedule", Effects: n.Effects}
			_, err := st.Halt(run, reason)
			return err
		}})
	if jobtx.IsOutOfOrder(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("replace %s: %w", run, err)
	}
	if out.Repeat {
		return nil // another node replaced it (and counted it)
	}
	n.cronCount("replaced", 1)
	n.Logger.Info("scheduled run replaced", "job_id", run, "template", id, "tick", at, "node", n.ID)
	return nil
}
