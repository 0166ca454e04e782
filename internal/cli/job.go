package cli

import "github.com/logist/logist/internal/manifest"

// oneJob is the JOB argument of a command about one job.
func oneJob(args []string) (string, error) {
	if len(args) != 1 {
		return "", usagef("expected one JOB argument, got %d", len(args))
	}
	if err := manifest.ValidID(args[0]); err != nil {
		return "", usagef("%v", err)
	}
	return args[0], nil
}

// changed is the result of a command that changed job m: its status and
// phase, and a note when no logistd serves the folder to carry it on.
func changed(e *env, m *manifest.Manifest, msg string) *Result {
	note := ""
	if e.store.DaemonPID() == 0 && m.Status.Active() {
		note = "logistd is not running on this folder; the job continues when it starts"
	}
	return &Result{Message: msg, Fields: []Field{
		{"job_id", "Job", m.JobID}, {"status", "Status", string(m.Status)}, {"current_phase", "Phase", m.Phase()}, {"note", "Note", note},
	}}
}
