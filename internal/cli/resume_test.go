package cli

import (
	"strings"
	"testing"
)

// logist resume names the flag a budget it refuses came from (the rule is
// steward.ResumeOptions.Check), NaN and infinity included, before it
// touches the job.
func TestResumeRefusesABudgetThatIsNone(t *testing.T) {
	env := map[string]string{"LOGIST_JOBS_DIR": t.TempDir()}
	for _, c := range []struct{ args, want string }{
		{"--cost-threshold NaN", "--cost-threshold must be a finite number of cents, at least 0"},
		{"--cost-threshold -5", "--cost-threshold must be a finite number of cents, at least 0"},
		{"--time-threshold-minutes +Inf", "--time-threshold-minutes must be a finite number of minutes, more than 0"},
		{"--max-agent-calls 0", "--max-agent-calls must be at least 1"},
	} {
		code, _, errs := runMain(t, env, append([]string{"resume", "j"}, strings.Fields(c.args)...)...)
		if code != ExitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, stderr %q, want %q", c.args, code, errs, c.want)
		}
	}
}
