package cli

import (
	"fmt"
	"time"

	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/schedule"
)

var cmdSchedules = &command{
	name: "schedules", args: "", summary: "list schedules (template jobs) with their next run, last run and unfinished runs",
	example: "  logist schedules\n  logist schedules --format json\n",
	run: func(e *env, args []string) (*Result, error) {
		if len(args) != 0 {
			return nil, usagef("schedules takes no arguments")
		}
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
			next := "-"
			if spec, err := sch.Spec(); err == nil && !sch.Suspend {
				next = spec.Next(now).UTC().Format(time.RFC3339)
			} else if sch.Suspend {
				next = "suspended"
			}
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
				"next_run": next, "last_run": en.Manifest.Run.LastScheduledAt, "runs": len(runs), "unfinished": unfinished, "suspend": sch.Suspend})
		}
		r.Items = items
		return r, nil
	},
}
