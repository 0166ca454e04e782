package cli

import (
	"strings"
	"testing"
)

// logist play on a job whose workflow plays no game is out of order (exit
// 2), not a usage error: the command line is fine, the job is not a game.
// The message names the job and its workflow, whatever its status (a
// PENDING one said only "in no phase", a running one "not waiting for a
// reply"), and prints no usage line.
func TestPlayRefusesAJobThatPlaysNoGame(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	writeJob(t, jobs, "p", jobJSON("PENDING", ""))
	writeJob(t, jobs, "r", jobJSON("INTERVENTION_REQUIRED", `"current_phase": "work"`))
	for _, args := range [][]string{
		{"play", "p", "--as", "estoria"},
		{"play", "p", "--as", "estoria", "--skip"},
		{"play", "r", "--as", "estoria"},
		{"play", "r", "--as", "estoria", "--say", "hello"},
	} {
		code, _, errb := runMain(t, nil, append(args, "--jobs-dir", jobs)...)
		if code != ExitOutOfOrder || !strings.Contains(errb, "job "+args[1]+" is ") ||
			!strings.Contains(errb, "it plays no game: its workflow supervised has no game") || strings.Contains(errb, "usage:") {
			t.Errorf("logist %q: exit %d, want %d:\n%s", args, code, ExitOutOfOrder, errb)
		}
	}
}
