package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/textsafe"
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
		r.Message = fmt.Sprintf("%d jobs in %s", len(entries), e.store.Dir)
		if err := noneReadable(entries); err != nil {
			// Every job refused this user: list them (UNREADABLE), and
			// fail as permission denied, as status does for one.
			r.Message = err.Error()
			items := make([]map[string]any, 0, len(entries))
			for _, en := range entries {
				items = append(items, jobview.ListItem(e.store.Dir, en))
			}
			r.Items = items
			if e.format != "json" {
				r.table = listTable(e, r.Columns, entries)
			}
			return nil, &failedWith{r, err}
		}
		// JSON prints the items, text and markdown the rows: each is
		// built only for the format that prints it (50,000 jobs).
		switch e.format {
		case "json":
			var ok bool
			if r.encoded, ok = listJSON(e, r.Message, entries); !ok {
				items := make([]map[string]any, 0, len(entries))
				for _, en := range entries {
					// The item's shape is the console API's too (jobview.ListItem).
					items = append(items, jobview.ListItem(e.store.Dir, en))
				}
				r.Items = items
			}
		case "text":
			r.Message = ""
			fallthrough
		default:
			r.table = listTable(e, r.Columns, entries)
		}
		return r, nil
	},
}

// noneReadable is the error of a listing none of whose jobs this user
// may read (each UNREADABLE: jobview.LoadStatus), nil when any job was
// read, or refused for another reason, or there are none. A listing with
// some jobs unreadable lists the others and succeeds.
func noneReadable(entries []jobstore.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	for i := range entries {
		if entries[i].Err == nil || jobview.LoadStatus(entries[i].Err) != jobview.StatusUnreadable {
			return nil
		}
	}
	return fmt.Errorf("none of the %d jobs could be read (run logist as the user that runs logistd): %w", len(entries), entries[0].Err)
}

// listJSON is the listing's JSON document as render prints a Result of
// message and the entries' items (jobview.ListItem), each item encoded
// straight into one buffer (jobview.AppendListItem) rather than built as
// a map and encoded by reflection. False if an item is one only
// encoding/json can say what to do with (the caller then builds the
// items).
func listJSON(e *env, message string, entries []jobstore.Entry) ([]byte, bool) {
	const itemSize = 512 // about what an item takes, indented
	b := make([]byte, 0, 256+len(entries)*itemSize)
	b = append(b, "{\n  \"items\": ["...)
	var view manifest.Manifest
	for i := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = jobview.AppendListItem(append(b, "\n    "...), e.store.Dir, &entries[i], &view, "    "); !ok {
			return nil, false
		}
	}
	if len(entries) > 0 {
		b = append(b, "\n  "...)
	}
	msg, err := json.Marshal(message)
	if err != nil {
		return nil, false
	}
	b = append(append(append(b, "],\n  \"message\": "...), msg...), ",\n  \"ok\": true\n}"...)
	return append(textsafe.EscapeJSON(b), '\n'), true
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
			status := jobview.LoadStatus(en.Err)
			if en.Unplaced != "" {
				status += " (unplaced)"
			}
			t.add(status)
			t.add("-")
			t.add("-")
			t.add("-")
			t.add(oneLine(note, 120))
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
			note = jobview.UnplacedNote(e.store.Dir, *en)
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
		t.add(oneLine(note, 100))
	}
	return t
}

// uncontainedNote is how a listing marks a job that opted out of
// containment (its manifest's run.sandbox none), in file and cluster mode.
const uncontainedNote = "uncontained (sandbox none)"
