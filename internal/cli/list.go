package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/jobstore"
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
		// JSON prints the items, text and markdown the rows: each is
		// built only for the format that prints it (50,000 jobs).
		if e.format == "json" {
			items := make([]map[string]any, 0, len(entries))
			for _, en := range entries {
				// The item's shape is the console API's too (jobview.ListItem).
				items = append(items, jobview.ListItem(e.store.Dir, en))
			}
			r.Items = items
		} else {
			r.table = listTable(e, r.Columns, entries)
		}
		r.Message = fmt.Sprintf("%d jobs in %s", len(entries), e.store.Dir)
		if e.format == "text" {
			r.Message = ""
		}
		return r, nil
	},
}

// listTable is the table of entries, each row built straight into it.
// Each valid entry is viewed in one manifest reused from row to row, and
// sealed reasons are opened with one key for the listing.
func listTable(e *env, columns []string, entries []jobstore.Entry) *cellTable {
	t := newCellTable(columns, len(entries))
	var view manifest.Manifest
	var opener *jobview.Opener
	now := time.Now()
	for i := range entries {
		en := &entries[i]
		t.add(en.ID)
		if en.Err != nil {
			// The folder already names the job; keep the note to the point.
			note := jobview.InvalidNote(e.store.Dir, *en)
			status := "INVALID"
			if en.Unplaced != "" {
				status = "INVALID (unplaced)"
			}
			t.add(status)
			t.add("-")
			t.add("-")
			t.add("-")
			t.add(firstLine(note, 120))
			continue
		}
		m := en.ViewInto(&view) // the listing holds summaries
		if m.EncryptHistory {
			if opener == nil {
				opener = e.opener()
			}
			m = opener.Manifest(m)
		}
		note := m.Run.Reason
		if en.Unplaced != "" {
			note = "not yet placed by logistd: " + filepath.Base(en.Unplaced)
		}
		status := string(m.Status)
		if m.Schedule != nil {
			// A template never runs itself: show what it does instead.
			status = "SCHEDULE"
			note = "cron " + m.Schedule.Cron + ", next " + nextRun(m, now)
			if st := m.ScheduleState(); st != manifest.ScheduleActive {
				note = "cron " + m.Schedule.Cron + ", " + st
			}
		}
		if m.Run.Sandbox == agent.LayerNone {
			// An opt-out is never silent: it shows where the job is listed.
			note = strings.TrimSuffix(uncontainedNote+"; "+note, "; ")
		}
		t.add(status)
		t.add(orDash(m.Phase()))
		t.buf = appendCost(t.buf, m)
		t.end()
		t.buf = appendTime(t.buf, m)
		t.end()
		t.add(firstLine(note, 100))
	}
	return t
}

// uncontainedNote is how a listing marks a job that opted out of
// containment (its manifest's run.sandbox none), in file and cluster mode.
const uncontainedNote = "uncontained (sandbox none)"
