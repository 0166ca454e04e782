package steward_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/steward"
)

// A command that wants a stopped job, refused for a queued or running
// one, says to wait until it stops, never to halt it: a halt makes it
// CANCELED, which is final (neither resumed nor rolled back). A canceled
// job's hint says it is final.
func TestRefusalHintsNeverLeadToAHalt(t *testing.T) {
	t.Parallel()
	refusals := map[string]func(f *fixture) error{
		"resume": func(f *fixture) error { _, err := f.St.Resume("j", steward.ResumeOptions{}); return err },
		"rollback": func(f *fixture) error {
			_, _, err := f.St.Rollback("j", "cp-start", steward.RollbackOptions{})
			return err
		},
		"activate": func(f *fixture) error { _, err := f.St.Activate("j"); return err },
		"set": func(f *fixture) error {
			_, _, err := f.St.Set("j", []steward.Assignment{set("limits.max_retries", "5")}, "")
			return err
		},
		"reply": func(f *fixture) error { _, err := f.St.Reply("j", "worker", []byte(`{}`)); return err },
		"pm": func(f *fixture) error {
			_, err := f.St.Decide("j", deliberation.Input{Kind: "pm_decision"})
			return err
		},
	}
	for _, st := range []lifecycle.Status{lifecycle.Pending, lifecycle.Running, lifecycle.Reviewing, lifecycle.Canceled} {
		for name, refuse := range refusals {
			t.Run(string(st)+"/"+name, func(t *testing.T) {
				f := newFixture(t)
				phase := ""
				if st == lifecycle.Running || st == lifecycle.Reviewing {
					phase = "work"
				}
				f.WriteJob("j", withStatus(string(st), phase))
				e, ok := isOutOfOrder(refuse(f))
				if !ok {
					t.Fatalf("not refused as out of order")
				}
				if strings.Contains(e.Hint, "logist halt") {
					t.Errorf("hint %q leads to a halt", e.Hint)
				}
				want := "wait until it stops"
				if st == lifecycle.Canceled {
					want = "final"
				}
				if !strings.Contains(e.Hint, want) {
					t.Errorf("hint %q does not say %q", e.Hint, want)
				}
			})
		}
	}
}

// resumeInHint is the logist resume a hint gives, as options; ok is false
// when the hint gives none.
func resumeInHint(t *testing.T, hint string) (steward.ResumeOptions, bool) {
	t.Helper()
	m := regexp.MustCompile(`logist resume j((?: --[a-z-]+ [0-9.]+)*)`).FindStringSubmatch(hint)
	if m == nil {
		return steward.ResumeOptions{}, false
	}
	var o steward.ResumeOptions
	f := strings.Fields(m[1])
	for i := 0; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i+1], 64)
		if err != nil {
			t.Fatalf("hint %q: %v", hint, err)
		}
		switch f[i] {
		case "--cost-threshold":
			o.CostThreshold = &v
		case "--time-threshold-minutes":
			o.TimeThresholdMinutes = &v
		case "--max-agent-calls":
			n := int(v)
			o.MaxAgentCalls = &n
		default:
			t.Fatalf("hint %q: flag %s", hint, f[i])
		}
	}
	return o, true
}

// A job stopped by a budget is told the resume that continues it, with
// a value above what it used (not --guidance, which is refused while the
// budget is still spent); so is a resume refused for a raise too small.
// Following the hint works.
func TestBudgetHintsGiveAResumeThatWorks(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		job         map[string]any
		flag        string
		tooSmall    steward.ResumeOptions
		wantRefusal string
	}{
		{"calls", map[string]any{"status": "INTERVENTION_REQUIRED", "limits": map[string]any{"max_agent_calls": 3},
			"metrics": map[string]any{"cumulative_cost": 0, "cumulative_time_seconds": 0.1, "agent_calls": 3},
			"run":     map[string]any{"error_code": codes.CallBudget}},
			"--max-agent-calls 6", steward.ResumeOptions{MaxAgentCalls: new(2)}, "calls budget of 2"},
		{"time", map[string]any{"status": "HALTED_TIME", "time_threshold_minutes": 0.02,
			"metrics": map[string]any{"cumulative_cost": 0, "cumulative_time_seconds": 1.215, "agent_calls": 2},
			"run":     map[string]any{"error_code": codes.TimeBudget}},
			"--time-threshold-minutes 0.041", steward.ResumeOptions{TimeThresholdMinutes: new(0.01)}, "budget of 0.01 minutes (0.6s)"},
		{"cost", map[string]any{"status": "HALTED_COST", "cost_threshold": 50,
			"metrics": map[string]any{"cumulative_cost": 60, "cumulative_time_seconds": 0.1, "agent_calls": 2},
			"run":     map[string]any{"error_code": codes.CostBudget}},
			"--cost-threshold 220", steward.ResumeOptions{CostThreshold: new(55.0)}, "budget of 55.00 cents"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			c.job["current_phase"] = "work"
			f.WriteJob("j", c.job)
			hint := steward.HintFor(f.Load("j"), "j")
			if !strings.Contains(hint, "logist resume j "+c.flag) || strings.Contains(hint, "--guidance") {
				t.Errorf("hint %q, want logist resume j %s", hint, c.flag)
			}
			_, err := f.St.Resume("j", c.tooSmall)
			e, ok := isOutOfOrder(err)
			if !ok || !strings.Contains(e.Want, c.wantRefusal) {
				t.Fatalf("a raise too small: %v, want a refusal saying %q", err, c.wantRefusal)
			}
			o, ok := resumeInHint(t, e.Hint)
			if !ok {
				t.Fatalf("refusal hint %q gives no resume", e.Hint)
			}
			if _, err := f.St.Resume("j", o); err != nil {
				t.Fatalf("the resume the hint %q gives: %v", e.Hint, err)
			}
		})
	}
}

// A job waiting for guidance while a budget is spent is told to raise it
// in the same resume.
func TestGuidanceHintRaisesASpentBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", map[string]any{"status": "INTERVENTION_REQUIRED", "current_phase": "work", "limits": map[string]any{"max_agent_calls": 2},
		"metrics": map[string]any{"cumulative_cost": 0, "cumulative_time_seconds": 0.1, "agent_calls": 2},
		"run":     map[string]any{"error_code": codes.AgentStuck}})
	hint := steward.HintFor(f.Load("j"), "j")
	if !strings.Contains(hint, "logist resume j --max-agent-calls 4 --guidance TEXT") {
		t.Fatalf("hint %q", hint)
	}
	o, _ := resumeInHint(t, hint)
	if _, err := f.St.Resume("j", o); err != nil {
		t.Fatal(err)
	}
}

// A workspace source that cannot be used cannot be changed (logist set
// refuses workspace), and a resume makes it again: the hint says to
// submit a new job. An agent program that exited points at logist set as
// well as guidance.
func TestHintsByErrorCode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code, reason string
		want         []string
		not          []string
	}{
		{codes.WorkspaceSource, `workspace: ref "nosuchref" is not a commit, branch or tag of the repository`,
			[]string{"logist halt j", "submit a new job"}, []string{"logist resume"}},
		{codes.AgentExit, "AGENT_EXIT after 0 automatic retries: sh exited with status 2: sh: 0: cannot open ../nope.sh",
			[]string{`logist set j agents.worker.command.argv='["PROGRAM","{request_file}"]', then logist resume j`, "logist resume j --guidance TEXT"}, nil},
		{codes.AgentStuck, "worker answered STUCK", []string{"continue it: logist resume j --guidance TEXT"}, nil},
	} {
		t.Run(c.code, func(t *testing.T) {
			f := newFixture(t)
			f.WriteJob("j", map[string]any{"status": "INTERVENTION_REQUIRED", "current_phase": "work",
				"run": map[string]any{"error_code": c.code, "reason": c.reason}})
			hint := steward.HintFor(f.Load("j"), "j")
			for _, w := range c.want {
				if !strings.Contains(hint, w) {
					t.Errorf("hint %q does not say %q", hint, w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(hint, n) {
					t.Errorf("hint %q says %q", hint, n)
				}
			}
		})
	}
}

// A job waiting for a human's reply is told the role to answer as, when
// its phase's role is the human one; the placeholder stays where the
// manifest cannot tell (a game's turns: the reason names the parties).
func TestReplyHintNamesTheWaitingRole(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	waiting := func(workerProvider string) map[string]any {
		worker := map[string]any{"provider": workerProvider}
		if workerProvider == "script" {
			worker["script"] = []any{map[string]any{"action": "COMPLETED", "summary": "ok"}}
		}
		return map[string]any{"status": "INTERVENTION_REQUIRED", "current_phase": "work",
			"agents": map[string]any{"worker": worker, "supervisor": map[string]any{"provider": "human"}},
			"run":    map[string]any{"error_code": codes.AwaitingReply, "reason": "waiting for logist reply j --as worker"}}
	}
	f.WriteJob("j", waiting("human"))
	if hint := steward.HintFor(f.Load("j"), "j"); !strings.Contains(hint, "logist reply j --as worker --file ANSWER.json") || strings.Contains(hint, "ROLE") {
		t.Errorf("hint %q does not name the worker", hint)
	}
	f.WriteJob("k", waiting("script"))
	if hint := steward.HintFor(f.Load("k"), "k"); !strings.Contains(hint, "--as ROLE") {
		t.Errorf("a phase whose role is no human's: hint %q", hint)
	}
}

// The argv a hint shows for an agent that answers in a file names
// {answer_file}, which such an argv must name: whether its program exited
// with an error or wrote no answer file.
func TestHintsArgvForAnAgentThatAnswersInAFile(t *testing.T) {
	t.Parallel()
	for _, code := range []string{codes.AgentExit, codes.AgentEmpty} {
		t.Run(code, func(t *testing.T) {
			f := newFixture(t)
			f.WriteJob("j", map[string]any{"status": "INTERVENTION_REQUIRED", "current_phase": "work",
				"agents": map[string]any{
					"worker":     map[string]any{"provider": "command", "command": map[string]any{"argv": []string{"agent", "{answer_file}"}, "answer": "file"}},
					"supervisor": map[string]any{"provider": "script", "script": []any{map[string]any{"action": "COMPLETED", "summary": "ok"}}}},
				"run": map[string]any{"error_code": code, "reason": "the agent wrote no answer file"}})
			hint := steward.HintFor(f.Load("j"), "j")
			if !strings.Contains(hint, `logist set j agents.worker.command.argv='["PROGRAM","{request_file}","{answer_file}"]', then logist resume j`) ||
				!strings.Contains(hint, "logist resume j --guidance TEXT") {
				t.Errorf("hint %q: want an argv with {answer_file}, and guidance", hint)
			}
		})
	}
}
