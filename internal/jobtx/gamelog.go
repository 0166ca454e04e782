package jobtx

import "github.com/logist/logist/internal/joblog"

// LogGameTransition logs a transition of the job's game (seed 004 §7.1)
// with the job's checkpoint in force (records not yet committed included)
// and its phase.
func (t *Tx) LogGameTransition(game, from, to, event, actor string) {
	joblog.LogGameTransition(t.env.Logger, joblog.GameTransition{Job: t.ID, Game: game, From: from, To: to, Event: event,
		Actor: actor, Checkpoint: t.Checkpoint(), Phase: t.M.Phase()})
}
