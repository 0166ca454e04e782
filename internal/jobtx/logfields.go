package jobtx

import (
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
)

// TransitionLine is a recorded transition as its log line says it
// (joblog.LogTransition). One function for every transition line: the ones
// a transaction logs as it makes the change, and the ones the daemon logs
// for changes another process recorded (internal/daemon's relay), so both
// read alike.
func TransitionLine(id string, tr *history.Transition, reason string) joblog.Transition {
	return joblog.Transition{Job: id, From: tr.From, To: tr.To, Event: tr.Event, Actor: tr.Actor, Checkpoint: tr.CheckpointID,
		FromPhase: tr.FromPhase, ToPhase: tr.ToPhase, Reason: reason}
}

// ErrorLine is a recorded error event (rec.Error set) as its log line says
// it (joblog.Log), for the daemon's lines about errors another process
// recorded: they read like the line the recording transaction logged.
func ErrorLine(id string, rec *history.Record) joblog.Problem {
	e := rec.Error
	return joblog.Problem{Job: id, Status: rec.StateBefore, Actor: rec.Role, Code: e.Code, Attempt: rec.Attempt,
		Checkpoint: e.CheckpointID, Phase: rec.Phase}
}
