package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/steward"
)

// The steering commands are steward.Commands, the list the daemon's
// metrics count: each names a command of the registry, the registry marks
// exactly those, and each records its outcome for the metrics when it
// runs (reply and pm too).
func TestSteeringCommandsAreTheStewardsList(t *testing.T) {
	var steering []string
	for _, c := range commands {
		if c.steers {
			steering = append(steering, c.name)
		}
	}
	// The schedules' pause and resume are verbs of logist schedules, whose
	// events carry their history record's name.
	verbs := []string{history.CommandSchedulePause, history.CommandScheduleResume}
	for _, name := range steward.Commands {
		if find(name) == nil && !slices.Contains(verbs, name) {
			t.Errorf("steward.Commands names %q, which is no logist command", name)
		}
	}
	if want := slices.DeleteFunc(slices.Clone(steward.Commands), func(n string) bool { return slices.Contains(verbs, n) }); !slices.Equal(slices.Sorted(slices.Values(steering)), slices.Sorted(slices.Values(want))) {
		t.Errorf("commands marked as steering %v, steward.Commands %v", steering, steward.Commands)
	}

	jobs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(jobs, signing.Dir), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"reply", "nojob", "--as", "a", "--answer", "{}"}, {"pm", "nojob", "approve"}, {"schedules", "pause", "nojob"}} {
		runMain(t, map[string]string{"LOGIST_JOBS_DIR": jobs}, args...)
	}
	evs, _ := steward.ReadEvents(filepath.Join(jobs, signing.Dir, steward.EventsFile), 0)
	var seen []string
	for _, e := range evs {
		seen = append(seen, e.Command+":"+e.Result)
	}
	if !slices.Equal(seen, []string{"reply:not_found", "pm:not_found", "schedule_pause:not_found"}) {
		t.Errorf("events recorded %v, want reply, pm and schedule_pause, each not_found", seen)
	}
	for _, e := range evs {
		if !slices.Contains(steward.Commands, e.Command) {
			t.Errorf("event %q is not one of steward.Commands", e.Command)
		}
	}
}

// logist help codes prints the catalogue.
func TestHelpCodes(t *testing.T) {
	code, out, _ := runMain(t, nil, "help", "codes")
	if code != ExitOK || out != codes.Text() || !strings.Contains(out, "EVIDENCE_MISSING") {
		t.Errorf("logist help codes: exit %d\n%s", code, out)
	}
}

// TestEveryCommandHasAClusterForm: with a database URL set, no command
// falls back to a local folder the cluster does not use, and none is left
// refusing (docs/cluster.md, "Every command in cluster mode").
func TestEveryCommandHasAClusterForm(t *testing.T) {
	for _, c := range commands {
		if c.cluster == nil {
			t.Errorf("logist %s has no cluster form", c.name)
		}
	}
}
