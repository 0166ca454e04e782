package cluster

import (
	"context"
	"strings"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/schedule"
)

// Cron schedules in cluster mode: every node looks at the templates every
// cronEvery, and a node that finds a tick due fires it through
// Store.Fire, whose row per (template, tick) makes the tick fire once
// cluster-wide — the run is inserted in the same transaction — however
// many nodes find it due at once. A tick is due from its time on; of the
// ticks missed while no node ran (or the schedule was paused) only the
// latest fires. concurrency_policy Forbid fires a tick with no run while a
// run of the template is unfinished; Replace is refused at submit.

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
		for i := 0; i < 1000; i++ { // the latest due tick
			next := spec.Next(tick)
			if next.IsZero() || next.After(now) {
				break
			}
			tick = next
		}
		if err := n.fire(ctx, j.ID, tpl, tick, now, js); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) fire(ctx context.Context, id string, tpl *manifest.Manifest, tick, now time.Time, js []clusterstore.Job) error {
	t := clusterstore.Tick{Template: id, At: tick, Node: n.ID}
	skip := false
	if tpl.Schedule.ConcurrencyPolicy == schedule.Forbid {
		for _, r := range js {
			if strings.HasPrefix(r.ID, id+"-") && !r.Template && !r.Status.Terminal() {
				if m, err := manifest.Decode(r.ID, r.Manifest); err == nil && m.ScheduledFrom == id {
					skip = true
				}
			}
		}
	}
	if !skip {
		run := schedule.RunManifest(tpl, id, tick, now)
		b, err := run.Encode()
		if err != nil {
			return err
		}
		t.Run, t.Manifest = run.JobID, b
	}
	fired, err := n.Store.Fire(ctx, t)
	if err != nil || !fired {
		return err
	}
	if skip {
		n.Logger.Info("scheduled run skipped: an earlier run is not finished (Forbid)", "job_id", id, "tick", tick.UTC().Format(time.RFC3339), "node", n.ID)
	} else {
		n.Logger.Info("scheduled run created", "job_id", t.Run, "template", id, "tick", tick.UTC().Format(time.RFC3339), "node", n.ID)
	}
	return nil
}
