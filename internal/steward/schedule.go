package steward

import (
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/manifest"
)

// A schedule (a template: a manifest with `schedule`) is steered like a
// job, with three commands: PauseSchedule and ResumeSchedule toggle its
// schedule.suspend (a change of configuration, recorded with its hash),
// and Halt stops it for good (CANCELED is final). None of them touches
// the runs the schedule already created: they are jobs of their own,
// halted one by one if need be. internal/schedule obeys the template as it
// finds it on disk at each tick (schedule.State).

// PauseSchedule pauses template id: no tick creates a run until
// ResumeSchedule.
func (s *Steward) PauseSchedule(id, reason string) (*manifest.Manifest, error) {
	return s.pause(id, true, reason)
}

// ResumeSchedule resumes template id's paused schedule at its next tick:
// the ticks it missed while paused are not caught up (run.
// schedule_resumed_at tells the scheduler, after a restart too).
func (s *Steward) ResumeSchedule(id, reason string) (*manifest.Manifest, error) {
	return s.pause(id, false, reason)
}

func (s *Steward) pause(id string, pause bool, reason string) (*manifest.Manifest, error) {
	if err := CheckText("reason", reason); err != nil {
		return nil, err
	}
	tx, err := jobtx.Begin(s.Env, id, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Close()
	m := tx.M
	verb := "pause"
	if !pause {
		verb = "resume"
	}
	switch {
	case m.Schedule == nil:
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "it is not a schedule (a manifest without schedule); there is no schedule to " + verb,
			Hint: "logist schedules lists the schedules"}
	case m.Status.Terminal():
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "a halted schedule is stopped for good",
			Hint: "submit its manifest again, under another job_id, to schedule it anew"}
	case pause && m.Schedule.Suspend:
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "its schedule is paused already", Hint: "logist schedules resume " + id}
	case !pause && !m.Schedule.Suspend:
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "its schedule is not paused", Hint: "logist schedules pause " + id}
	}
	before := m.Clone()
	m.Schedule.Suspend = pause
	cmd, action := history.CommandSchedulePause, "PAUSE_SCHEDULE"
	if !pause {
		cmd, action = history.CommandScheduleResume, "RESUME_SCHEDULE"
		m.Run.ScheduleResumedAt = tx.Now().UTC().Format(time.RFC3339Nano)
	}
	changes, err := configDiff(before, m)
	if err != nil {
		return nil, err
	}
	m.Audit(tx.Now(), "Steward", action, reason, nil)
	if err := s.recordChange(tx, cmd, "", reason, changesRecord(changes)); err != nil {
		return nil, err
	}
	return m, tx.Commit()
}
