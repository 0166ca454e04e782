package cli

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/schedule"
	"github.com/logist/logist/internal/steward"
)

var cmdSchedules = &command{
	name: "schedules", args: "[pause|resume NAME [--reason TEXT]]",
	summary: "list schedules (template jobs) with their state, next run, last run and unfinished runs; pause or resume one",
	example: "  logist schedules\n  logist schedules --format json\n  logist schedules pause nightly --reason 'database maintenance'\n" +
		"  logist schedules resume nightly\n  logist halt nightly          # stop a schedule for good\n",
	flags: func(fs *pflag.FlagSet) {
		fs.String("reason", "", "pause, resume: why, recorded in the template's history")
	},
	run: func(e *env, args []string) (*Result, error) {
		if len(args) == 0 {
			return listSchedules(e)
		}
		if verb := args[0]; verb == "pause" || verb == "resume" {
			if len(args) != 2 {
				return nil, usagef("schedules %s takes one NAME (a schedule's job id)", verb)
			}
			res, err := pauseSchedule(e, verb, args[1])
			// A steering command: counted in the daemon's metrics, named as
			// its history record is (one of steward.Commands).
			event := history.CommandSchedulePause
			if verb == "resume" {
				event = history.CommandScheduleResume
			}
			steward.RecordEvent(e.store.Dir, event, eventResult(err))
			return res, err
		}
		return nil, usagef("schedules takes no arguments, or pause|resume NAME; got %q", args[0])
	},
}

func pauseSchedule(e *env, verb, id string) (*Result, error) {
	if _, err := oneJob([]string{id}); err != nil {
		return nil, err
	}
	reason, _ := e.fs.GetString("reason")
	if err := steward.CheckText("reason", reason); err != nil {
		return nil, flagError(err)
	}
	st, err := e.steward()
	if err != nil {
		return nil, err
	}
	pause := st.PauseSchedule
	if verb == "resume" {
		pause = st.ResumeSchedule
	}
	m, err := pause(id, reason)
	if err != nil {
		return nil, err
	}
	next := nextRun(m, time.Now())
	msg := fmt.Sprintf("Schedule %s paused: it creates no run until logist schedules resume %s; its unfinished runs go on", id, id)
	if verb == "resume" {
		msg = fmt.Sprintf("Schedule %s resumed: next run %s (the ticks it missed while paused are not caught up)", id, next)
	}
	return &Result{Message: msg, Fields: []Field{{"job_id", "Schedule", id}, {"state", "State", m.ScheduleState()}, {"next_run", "Next run", next}},
		Data: map[string]any{"job": m, "state": m.ScheduleState(), "next_run": next}}, nil
}

// nextRun is when template m fires next (as the daemon's scheduler counts
// it: schedule.Next), its state if it does not, or "never" when nothing
// matches its expression.
func nextRun(m *manifest.Manifest, now time.Time) string {
	if st := m.ScheduleState(); st != manifest.ScheduleActive {
		return st
	}
	spec, err := m.Schedule.Spec()
	if err != nil {
		return "-"
	}
	next := schedule.Next(spec, schedule.Since(m), now)
	if next.IsZero() {
		return "never"
	}
	return next.UTC().Format(time.RFC3339)
}

func listSchedules(e *env) (*Result, error) {
	entries, err := e.store.List()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	r := &Result{Columns: []string{"SCHEDULE", "CRON", "TIMEZONE", "POLICY", "NEXT RUN", "LAST RUN", "RUNS", "UNFINISHED"}}
	items := []map[string]any{}
	for _, en := range entries {
		if en.Err != nil || en.Manifest == nil || en.Unplaced != "" || en.Manifest.Schedule == nil {
			continue
		}
		sch := en.Manifest.Schedule
		tz, policy := sch.Timezone, sch.ConcurrencyPolicy
		if tz == "" {
			tz = "UTC"
		}
		if policy == "" {
			policy = schedule.Allow
		}
		next := nextRun(en.Manifest, now)
		runs, _ := schedule.Runs(e.store, en.ID)
		unfinished := 0
		for _, run := range runs {
			if run.Manifest.Status != lifecycle.Success && run.Manifest.Status != lifecycle.Canceled {
				unfinished++
			}
		}
		last := orDash(en.Manifest.Run.LastScheduledAt)
		r.Rows = append(r.Rows, []string{en.ID, sch.Cron, tz, policy, next, last, fmt.Sprint(len(runs)), fmt.Sprint(unfinished)})
		items = append(items, map[string]any{"job_id": en.ID, "cron": sch.Cron, "timezone": tz, "concurrency_policy": policy,
			"state": en.Manifest.ScheduleState(), "next_run": next, "last_run": en.Manifest.Run.LastScheduledAt, "runs": len(runs), "unfinished": unfinished, "suspend": sch.Suspend})
	}
	r.Items = items
	return r, nil
}
