package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
)

var cmdList = &command{
	name: "list", args: "", summary: "list jobs with status, phase, cost and time (invalid manifests too)",
	example: "  logist list\n  logist list --jobs-dir /srv/jobs --format json\n",
	run: func(e *env, args []string) (*Result, error) {
		if len(args) != 0 {
			return nil, usagef("list takes no arguments")
		}
		// Summaries: the columns below are all a Summary holds.
		entries, err := e.store.ListSummaries(true)
		if err != nil {
			return nil, err
		}
		r := &Result{Columns: []string{"JOB", "STATUS", "PHASE", "COST", "TIME", "NOTE"}}
		items := []map[string]any{}
		for _, en := range entries {
			item := map[string]any{"job_id": en.ID}
			if en.Err != nil {
				// The folder already names the job; keep the note to the point.
				note := strings.ReplaceAll(en.Err.Error(), filepath.Join(e.store.Dir, en.ID, jobstore.ManifestFile)+": ", "")
				if en.Unplaced != "" {
					note = strings.ReplaceAll(note, en.Unplaced+": ", "")
				}
				status := "INVALID"
				if en.Unplaced != "" {
					status = "INVALID (unplaced)"
				}
				r.Rows = append(r.Rows, []string{en.ID, status, "-", "-", "-", firstLine(note, 120)})
				item["status"], item["error"] = "INVALID", note
				items = append(items, item)
				continue
			}
			m := en.View() // one at a time: the listing holds summaries
			note := m.Run.Reason
			if en.Unplaced != "" {
				note = "not yet placed by logistd: " + filepath.Base(en.Unplaced)
			}
			status := string(m.Status)
			if m.Schedule != nil {
				// A template never runs itself: show what it does instead.
				status = "SCHEDULE"
				note = "cron " + m.Schedule.Cron + ", next " + nextRun(m, time.Now())
				if st := m.ScheduleState(); st != manifest.ScheduleActive {
					note = "cron " + m.Schedule.Cron + ", " + st
				}
				item["schedule"] = m.Schedule
			}
			r.Rows = append(r.Rows, []string{en.ID, status, orDash(m.Phase()), costText(m), timeText(m), firstLine(note, 100)})
			item["status"], item["current_phase"], item["metrics"] = m.Status, m.CurrentPhase, m.Metrics
			item["cost_threshold"], item["time_threshold_minutes"], item["reason"] = m.CostThreshold, m.TimeThresholdMinutes, m.Run.Reason
			items = append(items, item)
		}
		r.Items = items
		r.Message = fmt.Sprintf("%d jobs in %s", len(entries), e.store.Dir)
		if e.format == "text" {
			r.Message = ""
		}
		return r, nil
	},
}
