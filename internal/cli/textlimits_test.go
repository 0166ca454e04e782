package cli

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
)

// TestStewardTextLimits: logist refuses a --reason or --guidance over its
// limit (characters, steward.TextLimits) with exit 1, naming the flag, its
// length and the limit, before it touches the job; one of the limit is
// taken. Before, any length was taken, and a long one failed as "manifest
// too large" after the command had begun. A play vote's --reason has the
// game's limit, its schema's (steward.MaxVoteReasonChars): before, it had
// a steward's 4000, and one over the schema's 2000 was refused late.
func TestStewardTextLimits(t *testing.T) {
	k := testkit.New(t)
	k.Runner = runner.NewEngine(k.Env, builtins.Effects())
	k.WriteJob("stuck", map[string]any{"agents": map[string]any{
		"worker":     testkit.Script(testkit.Step("STUCK", "needs a human"), testkit.Step("COMPLETED", "done")),
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "ok")),
	}})
	k.Run("stuck")
	k.WriteJob("w", map[string]any{})
	k.WriteJob("tpl", map[string]any{"schedule": map[string]any{"cron": "@daily"}})
	env := map[string]string{"LOGIST_JOBS_DIR": k.Dir}
	text := func(field string, n int) string { return strings.Repeat("<", steward.TextLimits[field]+n) }
	for _, c := range []struct {
		id, field string
		args      []string
	}{
		{"w", "reason", []string{"halt", "w"}},
		{"stuck", "guidance", []string{"resume", "stuck"}},
		{"stuck", "reason", []string{"rollback", "stuck", "--to", "cp-start"}},
		{"stuck", "guidance", []string{"rollback", "stuck", "--to", "cp-start"}},
		{"w", "reason", []string{"pm", "w", "approve"}},
		{"w", "guidance", []string{"pm", "w", "veto"}},
		{"tpl", "reason", []string{"schedules", "pause", "tpl"}},
		{"stuck", "reason", []string{"set", "stuck", "limits.max_retries=5"}},
		// A vote's reason: the game's limit (its schema's), not a steward's.
		{"w", "vote reason", []string{"play", "w", "--as", "estoria", "--vote", "YES"}},
	} {
		m, n := k.Load(c.id), len(k.Records(c.id))
		field, limit := c.field, steward.TextLimits[c.field]
		if c.field == "vote reason" {
			field, limit = "reason", steward.MaxVoteReasonChars
		}
		args := append(slices.Clone(c.args), "--"+field, strings.Repeat("<", limit+1))
		code, _, errs := runMain(t, env, args...)
		want := fmt.Sprintf("--%s is %d characters long, more than the limit of %d", field, limit+1, limit)
		if code != ExitUsage || !strings.Contains(errs, want) {
			t.Errorf("%s --%s over the limit: exit %d, stderr %q, want %q", c.args[0], c.field, code, errs, want)
		}
		if after := k.Load(c.id); after.Status != m.Status || after.ScheduleState() != m.ScheduleState() || len(k.Records(c.id)) != n {
			t.Errorf("%s --%s over the limit changed %s", c.args[0], c.field, c.id)
		}
	}
	for _, args := range [][]string{
		{"resume", "stuck", "--guidance", text("guidance", 0)},
		{"halt", "w", "--reason", text("reason", 0)},
		{"schedules", "pause", "tpl", "--reason", text("reason", 0)},
	} {
		if code, _, errs := runMain(t, env, args...); code != 0 {
			t.Errorf("%s with text of the limit: exit %d, stderr %q", args[0], code, errs)
		}
	}
	if m := k.Load("w"); m.Status != "CANCELED" || m.Run.Reason != text("reason", 0) {
		t.Errorf("halt of the limit: %s, reason of %d bytes", m.Status, len(m.Run.Reason))
	}
}
