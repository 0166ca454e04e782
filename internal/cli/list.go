package cli

import (
	"fmt"
	"github.com/logist/logist/internal/agent"
	"path/filepath"
	"strings"
	"time"

	"github.com/logist/logist/internal/jobview"
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
			// The item's shape is the console API's too (jobview.ListItem).
			items = append(items, jobview.ListItem(e.store.Dir, en))
			if en.Err != nil {
				// The folder already names the job; keep the note to the point.
				note := jobview.InvalidNote(e.store.Dir, en)
				status := "INVALID"
				if en.Unplaced != "" {
					status = "INVALID (unplaced)"
				}
				r.Rows = append(r.Rows, []string{en.ID, status, "-", "-", "-", firstLine(note, 120)})
				continue
			}
			m := e.opened(en.View()) // one at a time: the listing holds summaries
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
			}
			if m.Run.Sandbox == agent.LayerNone {
				// An opt-out is never silent: it shows where the job is listed.
				note = strings.TrimSuffix(uncontainedNote+"; "+note, "; ")
			}
			r.Rows = append(r.Rows, []string{en.ID, status, orDash(m.Phase()), costText(m), timeText(m), firstLine(note, 100)})
		}
		r.Items = items
		r.Message = fmt.Sprintf("%d jobs in %s", len(entries), e.store.Dir)
		if e.format == "text" {
			r.Message = ""
		}
		return r, nil
	},
}

// uncontainedNote is how a listing marks a job that opted out of
// containment (its manifest's run.sandbox none), in file and cluster mode.
const uncontainedNote = "uncontained (sandbox none)"
