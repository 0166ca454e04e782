package cli

import (
	"fmt"

	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/steward"
)

// Whether a logistd serves the jobs folder, as commands tell the steward:
// a job that is queued, or resumed, does nothing until one does. The
// daemon's lock (jobstore.Store.DaemonPID, read without taking it) tells.

// daemonInfo is the JSON form of the daemon's state (pid as DaemonPID
// returns it).
func daemonInfo(pid int) map[string]any {
	switch {
	case pid > 0:
		return map[string]any{"running": true, "pid": pid}
	case pid < 0:
		return map[string]any{"running": true}
	}
	return map[string]any{"running": false}
}

// daemonText is the daemon's state for a text field.
func daemonText(pid int) string {
	switch {
	case pid > 0:
		return fmt.Sprintf("running (pid %d)", pid)
	case pid < 0:
		return "running"
	}
	return "not running"
}

// noDaemon says that no logistd serves dir, and how to start one.
func noDaemon(dir string) string {
	return "no logistd is running on " + dir + " (start one: logistd --jobs-dir " + dir + ")"
}

// nextStep is what to do next with job m: the steward's hint, and, when no
// logistd serves the folder, that a job to run needs one.
func nextStep(e *env, m *manifest.Manifest, id string, pid int) string {
	hint := steward.HintFor(m, id)
	if pid != 0 {
		if st, ok := e.store.ReadStall(id); ok && m.Status.Active() {
			// Not queued nor running: the daemon cannot go on with it.
			if st.Refused {
				return "logistd does not run it until what Refused names is repaired (" + st.Code + ")"
			}
			return "logistd retries it by itself once its storage lets it: repair what Stalled names (" + st.Code + ")"
		}
		return hint
	}
	switch {
	case m.ScheduleState() == manifest.ScheduleActive:
		return hint + "; it fires only while a logistd runs (none runs on " + e.store.Dir + ": logistd --jobs-dir " + e.store.Dir + ")"
	case m.Schedule != nil:
		return hint // paused or stopped: nothing to run
	case m.Status.Active():
		return noDaemon(e.store.Dir) + "; nothing runs the job until one does"
	case m.Status.Waiting():
		return hint + "; then start a logistd (none runs on " + e.store.Dir + ": logistd --jobs-dir " + e.store.Dir + ")"
	}
	return hint
}
