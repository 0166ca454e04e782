package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/manifest"
)

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

// jobDir is job id's folder, for a command that reads its files without
// loading its manifest (history, logs, verify): a job is there when its
// manifest is. A manifest or folder this user may not look at is the
// permission error itself (exit 3; helpful says the job could not be read
// and whom to run logist as), never "not found": the job may well be
// there, readable by the user that runs logistd.
func (e *env) jobDir(id string) (string, error) {
	dir := e.store.JobDir(id)
	_, err := os.Stat(filepath.Join(dir, jobstore.ManifestFile))
	switch {
	case err == nil:
		return dir, nil
	case errors.Is(err, fs.ErrPermission):
		return "", err
	}
	return "", fmt.Errorf("job %s: %w", id, jobstore.ErrNotFound)
}

// changed is the result of a command that changed job m: its status and
// phase, and a note when no logistd serves the folder to carry it on (none
// otherwise). JSON: the whole job, as logist status shows it.
func changed(e *env, m *manifest.Manifest, msg string) *Result {
	note := waitsForDaemon(e, m)
	r := &Result{Message: msg, Fields: []Field{
		{"job_id", "Job", m.JobID}, {"status", "Status", string(m.Status)}, {"current_phase", "Phase", m.Phase()},
	}, Data: jobview.Changed(m, note)}
	if note != "" {
		r.Fields = append(r.Fields, Field{"note", "Note", note})
	}
	return r
}

// waitsForDaemon is a note for a job that would run now, in a folder no
// logistd serves; "" otherwise.
func waitsForDaemon(e *env, m *manifest.Manifest) string {
	if !m.Status.Active() || e.cluster || e.store.DaemonPID() != 0 {
		return ""
	}
	switch m.ScheduleState() {
	case manifest.ScheduleActive:
		return noDaemon(e.store.Dir) + "; the schedule fires only while one runs"
	case "":
		return noDaemon(e.store.Dir) + "; the job runs once one does"
	}
	return "" // a paused or stopped schedule
}
