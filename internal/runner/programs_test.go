package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/testkit"
)

// A command agent whose program the daemon cannot start stops the job at
// intake: INTERVENTION_REQUIRED with AGENT_CONFIG and a reason naming the
// field, before any request is recorded or any agent called (not an
// AGENT_START after a recorded intent and automatic retries).
func TestIntakeRefusesAProgramTheDaemonCannotStart(t *testing.T) {
	for _, c := range []struct {
		name, prog, pointer, reason string
		file                        string // written next to job.json, mode 0600
	}{
		{"not on PATH", "logist-no-such-agent", "/agents/worker/command/argv/0", `program "logist-no-such-agent" not found on logistd's PATH`, ""},
		{"absent path", "/nonexistent/agent", "/agents/worker/command/argv/0", `program "/nonexistent/agent" does not exist`, ""},
		{"relative, not executable", "../agent.sh", "/agents/worker/command/argv/0", `program "../agent.sh" is not executable`, "agent.sh"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.WriteJob("j", job(command(0, c.prog, "{request_file}"), okSupervisor()))
			if c.file != "" {
				if err := os.WriteFile(filepath.Join(f.Dir, "j", c.file), []byte("echo hi\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			f.Run("j")
			m := f.Load("j")
			if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.AgentConfig {
				t.Fatalf("status %s code %s (%s), want INTERVENTION_REQUIRED AGENT_CONFIG", m.Status, m.Run.ErrorCode, m.Run.Reason)
			}
			if !strings.Contains(m.Run.Reason, c.pointer+": "+c.reason) {
				t.Errorf("reason %q does not name %s and %q", m.Run.Reason, c.pointer, c.reason)
			}
			recs := f.Records("j")
			if n := len(testkit.OfType(recs, history.TypeIntent)); n != 0 || m.Metrics.AgentCalls != 0 {
				t.Errorf("%d intents, %d agent calls: the agent must not be asked", n, m.Metrics.AgentCalls)
			}
			trs := testkit.OfType(recs, history.TypeTransition)
			if len(trs) != 1 || trs[0].Transition.From != string(lifecycle.Pending) || trs[0].Transition.Event != string(lifecycle.EvAgentFailed) {
				t.Errorf("transitions %+v, want one PENDING -agent_failed-> INTERVENTION_REQUIRED", trs)
			}
			if errs := testkit.OfType(recs, history.TypeError); len(errs) != 1 || errs[0].Error.Code != codes.AgentConfig {
				t.Errorf("error records %+v, want one AGENT_CONFIG", errs)
			}
		})
	}
}

// The daemon's PATH decides, through the engine's LookPath.
func TestIntakeLooksOnTheDaemonsPath(t *testing.T) {
	f := newFixture(t)
	var asked []string
	f.Engine.LookPath = func(p string) (string, error) { asked = append(asked, p); return "/opt/bin/" + p, nil }
	f.fake(func(_ context.Context, _ *agent.Request) (*agent.Result, error) {
		return &agent.Result{Raw: []byte(`{"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "ok"}`)}, nil
	})
	f.WriteJob("j", job(command(0, "only-on-the-daemons-path"), command(0, "reviewer-too")))
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("status %s (%s)", m.Status, m.Run.Reason)
	}
	if strings.Join(asked, ",") != "reviewer-too,only-on-the-daemons-path" {
		t.Errorf("looked up %q, want both roles' programs (sorted by role)", asked)
	}
}
