package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// What logist watch shows of a job: its view, and the view's forms (a
// plain line, a JSON object, a table row).

// jobView is what watch shows of one job.
type jobView struct {
	ID       string
	Status   string
	Phase    string
	Started  time.Time
	Finished time.Time // only for a final status
	Cost     float64   // cents
	Budget   *float64  // cents
	Summary  string
	Reason   string // why it stopped
	Note     string // the line shown for it (watchNote)
	Error    string // an invalid manifest
	Updated  time.Time
	done     bool // stopped: final, or waiting for a steward
	final    bool // SUCCESS or CANCELED
}

func viewOf(id string, m *manifest.Manifest, err error) jobView {
	if err != nil {
		return jobView{ID: id, Status: jobview.LoadStatus(err), Error: err.Error()}
	}
	v := jobView{ID: id, Status: string(m.Status), Phase: m.Phase(), Cost: m.Metrics.CumulativeCost,
		Budget: m.CostThreshold, Summary: m.Run.LastSummary, Reason: m.Run.Reason, Note: watchNote(m), done: finished(m.Status), final: m.Status.Terminal()}
	v.Started, _ = time.Parse(time.RFC3339Nano, m.Run.StartedAt)
	if m.Status.Terminal() {
		v.Finished, _ = time.Parse(time.RFC3339Nano, m.Run.FinishedAt)
	}
	v.Updated, _ = time.Parse(time.RFC3339Nano, m.Run.UpdatedAt)
	return v
}

// key is what a change is: everything shown but the elapsed time.
func (v jobView) key() string {
	b := "-"
	if v.Budget != nil {
		b = fmt.Sprint(*v.Budget)
	}
	return strings.Join([]string{v.Status, v.Phase, fmt.Sprint(v.Cost), b, v.Summary, v.Reason, v.Note, v.Error}, "\x00")
}

func (v jobView) elapsed(now time.Time) time.Duration {
	if v.Started.IsZero() {
		return -1
	}
	end := now
	if !v.Finished.IsZero() {
		end = v.Finished
	}
	if end.Before(v.Started) {
		return 0
	}
	return end.Sub(v.Started)
}

func (v jobView) elapsedText(now time.Time) string {
	d := v.elapsed(now)
	if d < 0 {
		return "-"
	}
	return d.Round(time.Second).String()
}

// costText is "$0.40/$1.00", or "$0.40" without a budget, "$0.40/no
// limit" with one past what Logist counts.
func (v jobView) costText() string {
	s := dollars(v.Cost)
	switch {
	case v.Budget == nil:
	case manifest.CostUnbounded(*v.Budget):
		s += "/no limit"
	default:
		s += "/" + dollars(*v.Budget)
	}
	return s
}

// progressBar is "[#####-----]" for the share of the budget spent, or ""
// without a budget.
func progressBar(cost float64, budget *float64, width int) string {
	if budget == nil || manifest.CostUnbounded(*budget) {
		return ""
	}
	filled := width
	if *budget > 0 {
		r := cost / *budget
		if r < 0 {
			r = 0
		}
		filled = int(r*float64(width) + 0.5)
		if filled > width {
			filled = width
		}
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat("-", width-filled) + "]"
}

// watchNote is the one line watch shows for a job: why it stopped while
// it waits for a steward or was canceled; after a steward's command set it
// going again (a resume, a rollback), that command, not the summary of an
// answer the job has gone back from; else the last answer's summary (or,
// with none, the reason: an invalid answer has no summary).
func watchNote(m *manifest.Manifest) string {
	switch {
	case (m.Status.Waiting() || m.Status == lifecycle.Canceled) && m.Run.Reason != "":
		return m.Run.Reason
	case m.Status.Active():
		if n := len(m.History); n > 0 && m.History[n-1].Role == "Steward" {
			a := m.History[n-1]
			s := "steward " + strings.ToLower(a.Action)
			if note := strings.TrimSuffix(a.Note, ": "); note != "" {
				s += ": " + note
			}
			return s
		}
	}
	if m.Run.LastSummary != "" {
		return m.Run.LastSummary
	}
	return m.Run.Reason
}

func (v jobView) note() string {
	if v.Error != "" {
		return oneLine(v.Error, 100)
	}
	return oneLine(v.Note, 100)
}

// line is the plain one-line form: time id status phase elapsed cost
// "note" (the note quoted, so neutralised).
func (v jobView) line(now time.Time) string {
	ts := v.Updated
	if ts.IsZero() {
		ts = now
	}
	s := fmt.Sprintf("%s %s %s %s %s %s", ts.UTC().Format(time.RFC3339), v.ID, v.Status, orDash(v.Phase), v.elapsedText(now), v.costText())
	if n := v.note(); n != "" {
		s += " " + quoted(n)
	}
	return s
}

func (v jobView) object(now time.Time) map[string]any {
	o := map[string]any{"job_id": v.ID, "status": v.Status, "current_phase": v.Phase, "cost_cents": v.Cost,
		"cost_threshold_cents": v.Budget, "last_summary": v.Summary, "reason": v.Reason, "note": v.Note}
	if d := v.elapsed(now); d >= 0 {
		o["elapsed_seconds"] = d.Round(time.Millisecond).Seconds()
	}
	if v.Error != "" {
		o["error"] = v.Error
	}
	if !v.Updated.IsZero() {
		o["updated_at"] = v.Updated.UTC().Format(time.RFC3339Nano)
	}
	return o
}

var watchColumns = []string{"JOB", "STATUS", "PHASE", "ELAPSED", "COST", "SUMMARY"}

// row is the job's table row; bar adds the budget's progress bar to the
// cost.
func (v jobView) row(now time.Time, bar bool) []string {
	cost := v.costText()
	if b := progressBar(v.Cost, v.Budget, 10); b != "" && bar {
		cost = b + " " + cost
	}
	return []string{v.ID, v.Status, orDash(v.Phase), v.elapsedText(now), cost, v.note()}
}

// viewsResult is the view as a table (--once, any format).
func viewsResult(views map[string]jobView, now time.Time) *Result {
	r := &Result{Columns: watchColumns}
	items := []map[string]any{}
	for _, id := range sortedIDs(views) {
		v := views[id]
		r.Rows = append(r.Rows, v.row(now, true))
		items = append(items, v.object(now))
	}
	r.Items = items
	return r
}
