package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/manifest"
)

var cmdStatus = &command{
	name: "status", args: "JOB", summary: "show a job: status, phase, budgets, why it stopped, the last answer's warnings and what to do next",
	example: "  logist status fix-login\n  logist status fix-login --format json | jq -r .job.status\n",
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		m, err := e.store.Load(id)
		if err != nil {
			if errors.Is(err, jobstore.ErrNotFound) || jobview.LoadStatus(err) == jobview.StatusUnreadable {
				// Not there, or not this user's to read (exit 3, as
				// resume, halt and verify): nothing says the manifest is
				// invalid.
				return nil, err
			}
			// Invalid manifest: show why, as status INVALID.
			next := "fix " + filepath.Join(e.store.JobDir(id), jobstore.ManifestFile) + "; logistd picks it up when saved"
			return &Result{Message: fmt.Sprintf("Job %s has an invalid manifest", id), Fields: []Field{
				{"job_id", "Job", id}, {"status", "Status", jobview.StatusInvalid}, {"error", "Error", err.Error()}, {"next", "Next", next},
			}, Data: map[string]any{"job": map[string]any{"job_id": id, "status": jobview.StatusInvalid, "error": err.Error()}, "next": next}}, nil
		}
		m = e.opened(m)
		wfName := manifest.DefaultWorkflow
		if wf, err := m.ResolveWorkflow(); err == nil {
			wfName = wf.Name
		}
		pid := e.store.DaemonPID()
		next := nextStep(e, m, id, pid)
		warnings, warnText := lastWarnings(e.store.JobDir(id))
		r := &Result{Message: fmt.Sprintf("Job %s is %s", id, m.Status), Fields: []Field{
			{"job_id", "Job", id},
			{"status", "Status", string(m.Status)},
			{"current_phase", "Phase", m.Phase()},
			{"workflow", "Workflow", wfName},
			{"workflow_state", "Workflow state", orDash(m.Run.WorkflowState)},
			{"sandbox", "Sandbox", sandboxText(m)},
			{"description", "Description", m.Description},
			{"cost", "Cost", budgetText(m, manifest.BudgetCost, dollars(m.Metrics.CumulativeCost))},
			{"time", "Time", budgetText(m, manifest.BudgetTime, fmt.Sprintf("%.3fs", m.Metrics.CumulativeTimeSeconds))},
			{"agent_calls", "Agent calls", budgetText(m, manifest.BudgetCalls, fmt.Sprint(m.Metrics.AgentCalls))},
			{"reason", "Reason", m.Run.Reason},
			{"error_code", "Error code", m.Run.ErrorCode},
			{"last_summary", "Last summary", m.Run.LastSummary},
		}}
		if m.Run.SnapshotError != "" {
			r.Fields = append(r.Fields, Field{"snapshot_error", "Snapshot", "none at the last recovery point: " + m.Run.SnapshotError})
		}
		if m.Run.GitError != "" {
			r.Fields = append(r.Fields, Field{"git_error", "Job branch", "no commit at the last recovery point: " + m.Run.GitError})
		}
		stall, stalled := e.store.ReadStall(id)
		switch {
		case stalled && stall.Refused:
			// The daemon refused to run it and will not try by itself (a
			// cut or corrupt history): the manifest still shows it
			// RUNNING, so the reason is only here.
			r.Fields = append(r.Fields, Field{"refused", "Refused", fmt.Sprintf("%s since %s, not run until it is repaired: %s",
				stall.Code, stall.Since, stall.Reason)})
		case stalled:
			// The daemon retries it: its storage refused it (the manifest
			// may be the file it cannot write, so the reason is not there).
			r.Fields = append(r.Fields, Field{"stalled", "Stalled", fmt.Sprintf("%s since %s (attempt %d, next try %s): %s",
				stall.Code, stall.Since, stall.Attempt, stall.RetryAt, stall.Reason)})
		}
		if warnText != "" {
			r.Fields = append(r.Fields, Field{"warnings", "Warnings", warnText})
		}
		r.Fields = append(r.Fields, []Field{
			{"guidance", "Pending guidance", m.Run.Guidance},
			{"checkpoint_id", "Checkpoint", m.Run.CheckpointID},
			{"updated_at", "Updated", m.Run.UpdatedAt},
			{"daemon", "Daemon", daemonText(pid)},
			{"next", "Next", next},
		}...)
		costWarning := agent.CostWarning(m)
		if costWarning != "" {
			// Right under the cost it qualifies.
			i := slices.IndexFunc(r.Fields, func(f Field) bool { return f.Key == "cost" }) + 1
			r.Fields = slices.Insert(r.Fields, i, Field{"cost_warning", "Cost warning", costWarning})
		}
		r.Data = map[string]any{"job": m, "workflow": wfName, "daemon": daemonInfo(pid), "next": next, "warnings": warnings,
			"cost_warning": costWarning, "budgets": budgetsData(m)}
		switch {
		case stalled && stall.Refused:
			r.Data["refused"] = stall
		case stalled:
			r.Data["stalled"] = stall
		}
		return r, nil
	},
}

// lastWarnings are the warnings of the newest answer that had any (an
// accepted answer whose evidence file is missing, ...), as far back as the
// end of the history that status reads (history.LastWarned): the list,
// never nil, and a line for the text listing ("" when there are none).
func lastWarnings(dir string) ([]string, string) {
	rec, ok := history.LastWarned(dir)
	if !ok {
		return []string{}, ""
	}
	ws := rec.Response.Warnings
	where := rec.Role
	if rec.Phase != "" {
		where += " in phase " + rec.Phase
	}
	if rec.Interaction != nil {
		where += fmt.Sprintf(", interaction %d", *rec.Interaction)
	}
	last := "the last answer with warnings"
	if newest, ok := history.LastResponse(dir); ok && newest.Seq == rec.Seq {
		last = "the last answer"
	}
	return ws, fmt.Sprintf("%d on %s (%s): %s", len(ws), last, where, strings.Join(ws, "; "))
}

// sandboxText is the containment of the job's processes: the layer it
// last started under, else what it asks for.
func sandboxText(m *manifest.Manifest) string {
	switch {
	case m.Run.Sandbox == agent.LayerNone:
		return "none (uncontained: its processes run with logistd's rights)"
	case m.Run.Sandbox != "":
		return m.Run.Sandbox
	case m.Sandbox != "":
		return m.Sandbox + " (not started yet)"
	}
	return "logistd's default (not started yet)"
}

// budgetText is what a job has used (used, as shown) and the budget it runs
// under, with where that comes from: the manifest's own (" of $5.00", as
// before), or logistd's default as the engine last applied it. A job that
// has not run since it lost or never had one says the default applies when
// it runs.
func budgetText(m *manifest.Manifest, kind manifest.BudgetKind, used string) string {
	for _, b := range m.Budgets(m.Run.DefaultBudgets) {
		if b.Kind != kind {
			continue
		}
		if kind == manifest.BudgetCost && manifest.CostUnbounded(b.Limit) {
			return used + " (" + noCostLimit + ")"
		}
		limit := fmt.Sprintf("%.0f", b.Limit)
		switch kind {
		case manifest.BudgetCost:
			limit = dollars(b.Limit)
		case manifest.BudgetTime:
			limit = minutesText(b.Limit)
		}
		if b.Default {
			return used + " of " + limit + " (logistd's default: the manifest sets none)"
		}
		return used + " of " + limit
	}
	if m.Status.Terminal() {
		return used
	}
	return used + " (the manifest sets no budget: logistd's default applies when it runs)"
}

// budgetsData is the budgets a job runs under, for --format json: kind,
// limit and used in its unit (cents, minutes, calls), and origin
// ("manifest" or "logistd default").
func budgetsData(m *manifest.Manifest) []map[string]any {
	out := []map[string]any{}
	for _, b := range m.Budgets(m.Run.DefaultBudgets) {
		origin := "manifest"
		if b.Default {
			origin = "logistd default"
		}
		out = append(out, map[string]any{"kind": b.Kind, "limit": b.Limit, "used": b.Used, "origin": origin})
	}
	return out
}
