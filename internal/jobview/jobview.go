// Package jobview is what the steward's two interfaces, the CLI and the
// console's JSON API, show of the jobs folder, in one shape each: a job
// listing's item, a changed job, an error (its exit code and name: one
// mapping from a Go error), and the workspace diff between two recovery
// points. Both import it, so `logist --format json` and /api/v1 cannot
// drift apart.
package jobview

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/steward"
)

// Exit codes (seed 001), and the error codes of the JSON envelope.
const (
	ExitOK         = 0
	ExitUsage      = 1 // invalid arguments or invalid input
	ExitOutOfOrder = 2 // not allowed in the job's current state
	ExitPermission = 3
	ExitNotFound   = 4
)

// outcomeNames names each exit code: the code of a JSON error, the result
// of a steward command in the daemon's metrics.
var outcomeNames = map[int]string{
	ExitOK:         "ok",
	ExitUsage:      "invalid",
	ExitOutOfOrder: "out_of_order",
	ExitPermission: "permission_denied",
	ExitNotFound:   "not_found",
}

// ExitCode maps an error to its exit code; the only place that does.
func ExitCode(err error) int {
	var ooo *jobtx.OutOfOrderError
	var exists *steward.ExistsError
	var illegal *lifecycle.IllegalTransition
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ooo), errors.As(err, &exists), errors.As(err, &illegal):
		return ExitOutOfOrder
	case errors.Is(err, fs.ErrPermission):
		return ExitPermission
	case errors.Is(err, jobstore.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return ExitNotFound
	}
	return ExitUsage
}

// OutcomeName is an exit code's name ("error" for one not listed).
func OutcomeName(code int) string {
	if n, ok := outcomeNames[code]; ok {
		return n
	}
	return "error"
}

// ErrorBody is the "error" object of a failed command's JSON envelope.
func ErrorBody(err error) map[string]any {
	code := ExitCode(err)
	return map[string]any{"code": OutcomeName(code), "exit_code": code, "message": err.Error()}
}

// ListItem is one job of a listing (logist list, GET /api/v1/jobs): an
// invalid manifest as status INVALID with its error, a schedule template
// with its schedule.
func ListItem(dir string, en jobstore.Entry) map[string]any {
	item := map[string]any{"job_id": en.ID}
	if en.Err != nil {
		item["status"], item["error"] = LoadStatus(en.Err), InvalidNote(dir, en)
		return item
	}
	m := en.View() // a Partial entry holds only its Summary
	if m.Schedule != nil {
		item["schedule"] = m.Schedule
	}
	item["status"], item["current_phase"], item["metrics"] = m.Status, m.CurrentPhase, m.Metrics
	item["cost_threshold"], item["time_threshold_minutes"], item["reason"] = m.CostThreshold, m.TimeThresholdMinutes, m.Run.Reason
	item["sandbox"] = m.Run.Sandbox // the containment it last started under ("none": opted out)
	return item
}

// A job whose manifest cannot be used is listed with one of these
// statuses: UNREADABLE when its files refuse the reader (fs.ErrPermission:
// logist run by another user than logistd's), which says nothing of the
// manifest; INVALID when the manifest was read and is not a valid one.
const (
	StatusInvalid    = "INVALID"
	StatusUnreadable = "UNREADABLE"
)

// LoadStatus is the status shown for a job whose manifest could not be
// loaded with err (StatusInvalid or StatusUnreadable): the one decision,
// for logist list, status and watch and the console.
func LoadStatus(err error) string {
	if errors.Is(err, fs.ErrPermission) {
		return StatusUnreadable
	}
	return StatusInvalid
}

// InvalidNote is why an entry could not be listed, without the paths its
// folder already names: why its manifest is invalid, or which of its
// files could not be read (LoadStatus).
func InvalidNote(dir string, en jobstore.Entry) string {
	if LoadStatus(en.Err) == StatusUnreadable {
		what := jobstore.ManifestFile
		var pe *fs.PathError
		if errors.As(en.Err, &pe) {
			if rel, err := filepath.Rel(filepath.Join(dir, en.ID), pe.Path); err == nil && filepath.IsLocal(rel) {
				what = rel
			} else {
				what = pe.Path
			}
		}
		return "could not be read: permission denied on " + what + " (run logist as the user that runs logistd)"
	}
	if en.Unplaced != "" {
		return UnplacedNote(dir, en)
	}
	if manifest.ValidID(en.ID) != nil {
		// The folder's name is the job's id: nothing in it can fix it.
		return fmt.Sprintf("folder name is not a valid job id: rename the folder (a job id uses %s)", manifest.IDRule)
	}
	return strings.ReplaceAll(en.Err.Error(), filepath.Join(dir, en.ID, jobstore.ManifestFile)+": ", "")
}

// UnplacedNote is what a listing says of a bare manifest in the jobs
// folder dir that logistd has not placed in its folder (en.Unplaced): its
// file, named from the jobs folder (jobs/x.json), and whether it waits
// for logistd to place it, as which job, or why it cannot be placed
// (jobstore's Placement: Place's own rule) and what to do; and when its
// manifest is invalid, why (it is placed all the same, and listed
// INVALID in its folder).
func UnplacedNote(dir string, en jobstore.Entry) string {
	file := filepath.Join(filepath.Base(dir), filepath.Base(en.Unplaced))
	id, err := jobstore.New(dir).Placement(en.Unplaced)
	var note string
	switch {
	case errors.Is(err, jobstore.ErrIncomplete):
		note = file + ": invalid JSON, cut short: logistd places it once its writer finishes it; if nothing is writing it, complete or remove it"
	case err != nil:
		note = file + ": " + strings.ReplaceAll(err.Error(), en.Unplaced+": ", "")
	default:
		note = file + ": waiting for logistd to place it as job " + id
	}
	if en.Err != nil && err == nil {
		note += "; its manifest is invalid: " + strings.ReplaceAll(en.Err.Error(), en.Unplaced+": ", "")
	}
	return note
}

// Changed is the data of a steward command that changed job m: the job,
// and note when it is not "" (why nothing runs it yet).
func Changed(m *manifest.Manifest, note string) map[string]any {
	d := map[string]any{"job": m}
	if note != "" {
		d["note"] = note
	}
	return d
}

// PMDecisions are the Prime Minister's (the steward's) decisions on a
// parliament's bill.
var PMDecisions = []string{"approve", "veto", "amend_and_approve", "opening_guidance"}

// PMDecision is the ledger input of a Prime Minister's decision (logist
// pm, POST /api/v1/jobs/{id}/pm), or why the decision is not one.
func PMDecision(decision, reason, guidance string) (deliberation.Input, error) {
	if !slices.Contains(PMDecisions, decision) {
		return deliberation.Input{}, fmt.Errorf("decision %q: use approve, veto, amend_and_approve or opening_guidance", decision)
	}
	return deliberation.Input{Kind: "pm_decision", From: "prime_minister",
		Content: map[string]any{"decision": decision, "reason": reason, "guidance": guidance}}, nil
}
