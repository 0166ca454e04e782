package cli

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/steward"
)

var cmdStatus = &command{
	name: "status", args: "JOB", summary: "show a job: status, phase, budgets, why it stopped and what to do next",
	example: "  logist status fix-login\n  logist status fix-login --format json\n",
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		m, err := e.store.Load(id)
		if err != nil {
			if errors.Is(err, jobstore.ErrNotFound) {
				return nil, err
			}
			// Invalid manifest: show why, as status INVALID.
			return &Result{Message: fmt.Sprintf("Job %s has an invalid manifest", id), Fields: []Field{
				{"job_id", "Job", id}, {"status", "Status", "INVALID"}, {"error", "Error", err.Error()},
				{"next", "Next", "fix " + filepath.Join(e.store.JobDir(id), jobstore.ManifestFile) + "; logistd picks it up when saved"},
			}}, nil
		}
		wfName := manifest.DefaultWorkflow
		if wf, err := m.ResolveWorkflow(); err == nil {
			wfName = wf.Name
		}
		daemon := "not running"
		if pid := e.store.DaemonPID(); pid > 0 {
			daemon = fmt.Sprintf("running (pid %d)", pid)
		}
		r := &Result{Message: fmt.Sprintf("Job %s is %s", id, m.Status), Fields: []Field{
			{"job_id", "Job", id},
			{"status", "Status", string(m.Status)},
			{"current_phase", "Phase", m.Phase()},
			{"workflow", "Workflow", wfName},
			{"workflow_state", "Workflow state", orDash(m.Run.WorkflowState)},
			{"description", "Description", m.Description},
			{"cost", "Cost", costText(m)},
			{"time", "Time", timeText(m)},
			{"agent_calls", "Agent calls", m.Metrics.AgentCalls},
			{"reason", "Reason", m.Run.Reason},
			{"error_code", "Error code", m.Run.ErrorCode},
			{"last_summary", "Last summary", m.Run.LastSummary},
			{"guidance", "Pending guidance", m.Run.Guidance},
			{"checkpoint_id", "Checkpoint", m.Run.CheckpointID},
			{"updated_at", "Updated", m.Run.UpdatedAt},
			{"daemon", "Daemon", daemon},
			{"next", "Next", steward.HintFor(m, id)},
		}}
		if e.format == "json" {
			r.JSON = map[string]any{"status": "success", "job": m, "workflow": wfName, "daemon": daemon, "next": steward.HintFor(m, id)}
		}
		return r, nil
	},
}
