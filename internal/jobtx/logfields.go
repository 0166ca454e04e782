package jobtx

import "github.com/logist/logist/internal/history"

// TransitionFields are a transition's log fields (seed 004 §7.1: type,
// job_id, from, to, event, actor, checkpoint_id; plus the phases and the
// reason). One function for every transition line: the ones a transaction
// logs as it makes the change, and the ones the daemon logs for changes
// another process recorded (internal/daemon's relay), so both read alike.
func TransitionFields(id string, tr *history.Transition, reason string) []any {
	return []any{"type", "transition", "job_id", id, "from", tr.From, "to", tr.To, "event", tr.Event, "actor", tr.Actor,
		"checkpoint_id", tr.CheckpointID, "phase", tr.ToPhase, "from_phase", tr.FromPhase, "to_phase", tr.ToPhase, "reason", reason}
}

// ErrorFields are an error's log fields (seed 004 §7.2: type, job_id,
// status, actor, error_code, attempt, checkpoint_id; plus the phase), for
// every error line about a job, whoever recorded it.
func ErrorFields(id, status, actor, code string, attempt int, checkpoint, phase string) []any {
	return []any{"type", "error", "job_id", id, "status", status, "actor", actor, "error_code", code, "attempt", attempt,
		"checkpoint_id", checkpoint, "phase", phase}
}
