package console

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/steward"
)

// statuses are those a filter takes, in the order the jobs list offers
// them: every status a job is shown with (the lifecycle's, and for a job
// whose manifest could not be loaded jobview.LoadStatus's) and NEEDS_YOU.
// openapi.json's Status schema lists the same (TestOpenAPIStatusesAreTheFilters).
var statuses = []string{
	"NEEDS_YOU",
	string(lifecycle.Pending), string(lifecycle.Running), string(lifecycle.Reviewing),
	string(lifecycle.InterventionRequired), string(lifecycle.HaltedCost), string(lifecycle.HaltedTime),
	string(lifecycle.Success), string(lifecycle.Canceled), string(lifecycle.Draft),
	jobview.StatusInvalid, jobview.StatusUnreadable,
}

// Filter selects jobs: a listing's query, and a bulk action's body.
type Filter struct {
	// Status is any of these statuses (INVALID for invalid manifests,
	// UNREADABLE for jobs whose files the reader may not read, NEEDS_YOU
	// for those waiting for a steward: needsYou).
	Status []string `json:"status,omitempty"`
	// Workflow is the job's workflow's name.
	Workflow string `json:"workflow,omitempty"`
	// Text is found (any case) in the id, description, task or reason.
	Text string `json:"text,omitempty"`
	// Since and Until bound the job's last update (RFC 3339).
	Since string `json:"since,omitempty"`
	Until string `json:"until,omitempty"`
}

// empty is a filter that selects every job.
func (f Filter) empty() bool {
	return len(f.Status) == 0 && f.Workflow == "" && f.Text == "" && f.Since == "" && f.Until == ""
}

// check refuses a status a filter does not take and a time that is not
// RFC 3339, naming the field (the query's values are checked the same
// way: listQuery).
func (f Filter) check() error {
	for _, s := range f.Status {
		if err := checkStatus(s); err != nil {
			return fmt.Errorf("status: %w", err)
		}
	}
	for _, t := range [][2]string{{"since", f.Since}, {"until", f.Until}} {
		if t[1] == "" {
			continue
		}
		if err := checkTime(t[1]); err != nil {
			return fmt.Errorf("%s: %w", t[0], err)
		}
	}
	return nil
}

// needsYou says whether a job waits for a steward: the "Needs you" queue
// (a human's reply, a steward's decision, an intervention, a halted
// budget). Schedule templates never do.
func needsYou(m *manifest.Manifest) bool {
	if m.Schedule != nil {
		return false
	}
	return m.Status.Waiting()
}

// workflowName is the name of m's workflow ("" when it does not resolve).
func workflowName(m *manifest.Manifest) string {
	if wf, err := m.ResolveWorkflow(); err == nil {
		return wf.Name
	}
	return ""
}

func (f Filter) match(en jobstore.Entry) bool {
	if en.Err != nil {
		return (len(f.Status) == 0 || slices.Contains(f.Status, jobview.LoadStatus(en.Err))) && f.Workflow == "" &&
			(f.Text == "" || strings.Contains(strings.ToLower(en.ID), strings.ToLower(f.Text))) && f.Since == "" && f.Until == ""
	}
	m := en.View() // a Partial entry holds only its Summary
	if len(f.Status) > 0 && !slices.Contains(f.Status, string(m.Status)) && !(slices.Contains(f.Status, "NEEDS_YOU") && needsYou(m)) {
		return false
	}
	if f.Workflow != "" && workflowName(m) != f.Workflow {
		return false
	}
	if f.Text != "" {
		hay := strings.ToLower(strings.Join([]string{en.ID, m.Description, m.TaskDescription, m.Run.Reason}, "\n"))
		if !strings.Contains(hay, strings.ToLower(f.Text)) {
			return false
		}
	}
	return updatedWithin(m.Run.UpdatedAt, f.Since, f.Until)
}

// updatedWithin says whether a job's last update (RFC 3339, as jobtx
// writes it) is at or after since and at or before until (RFC 3339, as
// check holds them; "" bounds nothing), compared as times: as text, a
// fractional second sorted before "Z" and an offset was not one. A job
// never updated is before every time.
func updatedWithin(updated, since, until string) bool {
	if since == "" && until == "" {
		return true
	}
	if updated == "" {
		// Never updated (a job not yet run, a template): before any
		// time, as it sorted as text.
		return since == ""
	}
	u, err := time.Parse(time.RFC3339Nano, updated)
	if err != nil {
		return false
	}
	if s, err := time.Parse(time.RFC3339, since); since != "" && (err != nil || u.Before(s)) {
		return false
	}
	if e, err := time.Parse(time.RFC3339, until); until != "" && (err != nil || u.After(e)) {
		return false
	}
	return true
}

// jobs are the entries f selects, sorted by id. Only a filter on what a
// summary lacks (workflow, text) reads every manifest whole.
func (c *Console) jobs(f Filter) ([]jobstore.Entry, error) {
	var all []jobstore.Entry
	var err error
	if f.Workflow != "" || f.Text != "" || slices.Contains(f.Status, "NEEDS_YOU") {
		all, err = c.o.Store.List()
	} else {
		all, err = c.o.Store.ListSummaries(true)
	}
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, en := range all {
		if f.match(en) {
			out = append(out, en)
		}
	}
	return out, nil
}

// item is a listing's item: the CLI's (jobview.ListItem), plus what the
// console shows beside it.
func (c *Console) item(en jobstore.Entry) map[string]any {
	it := jobview.ListItem(c.o.Store.Dir, en)
	if en.Err == nil {
		m := en.View() // a Partial entry holds only its Summary
		if m.EncryptHistory {
			it["reason"] = c.opener().Text(en.ID, m.Run.Reason)
		}
		it["updated_at"] = m.Run.UpdatedAt
		it["error_code"] = m.Run.ErrorCode
		if !en.Partial {
			it["description"], it["workflow"] = m.Description, workflowName(m)
		}
		if m.Schedule != nil {
			it["schedule_state"] = m.ScheduleState()
		}
	}
	return it
}

// phaseCost is the cost and time of one phase, and of each attempt at it.
type phaseCost struct {
	Phase    string        `json:"phase"`
	Calls    int           `json:"calls"`
	CostUSD  float64       `json:"cost_usd"`
	Seconds  float64       `json:"seconds"`
	Attempts []attemptCost `json:"attempts"`
}

type attemptCost struct {
	Attempt int     `json:"attempt"`
	Role    string  `json:"role"`
	Status  string  `json:"status"`
	CostUSD float64 `json:"cost_usd"`
	Seconds float64 `json:"seconds"`
}

// phaseCosts adds up a history's answers per phase, in the order the
// phases first ran.
func phaseCosts(h *history.JobHistory) []phaseCost {
	var out []phaseCost
	at := map[string]int{}
	for _, in := range h.Interactions {
		i, seen := at[in.Phase]
		if !seen {
			i = len(out)
			at[in.Phase] = i
			out = append(out, phaseCost{Phase: in.Phase, Attempts: []attemptCost{}})
		}
		p := &out[i]
		p.Calls++
		a := attemptCost{Attempt: in.Attempt, Role: in.Role, Status: "IN FLIGHT"}
		if rs := in.Response; rs != nil {
			a.Status, a.CostUSD, a.Seconds = rs.Status, rs.CostUSD, rs.ExecutionTimeSeconds
		}
		p.CostUSD += a.CostUSD
		p.Seconds += a.Seconds
		p.Attempts = append(p.Attempts, a)
	}
	return out
}

// jobDetail is GET /api/v1/jobs/{id}'s data and the job page's: the job
// (the manifest, under "job" as logist status puts it), its workflow,
// the steward's next step, the last answer's warnings, the checkpoints,
// cost and time per phase, and what a steward may do now.
func (c *Console) jobDetail(id string) (map[string]any, error) {
	m, err := c.o.Store.Load(id)
	if err != nil {
		if !errorsIsNotFound(err) {
			// An invalid (or unreadable) manifest: shown as status INVALID
			// (UNREADABLE), as logist list shows it.
			return map[string]any{"job": map[string]any{"job_id": id, "status": jobview.LoadStatus(err), "error": err.Error()}}, nil
		}
		return nil, err
	}
	dir := c.o.Store.JobDir(id)
	recs, err := history.ReadAll(dir)
	if err != nil {
		return nil, err
	}
	op := c.opener()
	op.Manifest(m)
	op.Records(id, recs)
	h := history.Materialise(id, m.CreatedAt, c.o.Store.Workspace(id), recs)
	warnings := []string{}
	if rec, found := history.LastWarned(dir); found {
		warnings = rec.Response.Warnings
	}
	return map[string]any{
		"job": m, "workflow": workflowName(m), "next": steward.HintFor(m, id), "warnings": warnings,
		"checkpoints": jobview.Checkpoints(recs), "phases": phaseCosts(h), "actions": c.allowed(m),
		"needs_you": needsYou(m), "awaiting": awaitedOf(m, recs),
	}, nil
}

// allowed are the actions the job's state admits (and the server has
// not switched off): what the page offers.
func (c *Console) allowed(m *manifest.Manifest) []string {
	out := []string{}
	add := func(a string, when bool) {
		if when && !c.disabled(a) {
			out = append(out, a)
		}
	}
	awaiting := m.Status == lifecycle.InterventionRequired && m.Run.ErrorCode == codes.AwaitingReply
	deciding := m.Status == lifecycle.InterventionRequired && m.Run.ErrorCode == codes.AwaitingSteward
	add("halt", lifecycle.Allows(m.Status, lifecycle.EvHalt))
	add("resume", lifecycle.Allows(m.Status, lifecycle.EvResume) && !awaiting && !deciding && m.Schedule == nil)
	add("rollback", lifecycle.Allows(m.Status, lifecycle.EvRollback) && m.Schedule == nil)
	add("reply", awaiting)
	add("pm", deciding)
	add("play", awaiting && isPlayGame(workflowName(m)))
	return out
}

func atoiDefault(s string, def, max int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a count", s)
	}
	return min(n, max), nil
}

// awaitedOf are the turns job m waits a reply for (none unless it does).
func awaitedOf(m *manifest.Manifest, recs []history.Record) []awaited {
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.AwaitingReply {
		return []awaited{}
	}
	return awaitedTurns(recs)
}
