package protocol

import "testing"

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tool  string
		input map[string]any
		want  string
	}{
		{ToolShell, map[string]any{"command": "cat greeting.txt"}, RiskLow},
		{ToolShell, map[string]any{"command": "grep -n hello src/a.go"}, RiskLow},
		{ToolShell, map[string]any{"command": "ls"}, RiskLow},
		{ToolShell, map[string]any{"command": "echo pwned > ../outside.txt"}, RiskHigh},
		{ToolShell, map[string]any{"command": "cat /etc/passwd"}, RiskHigh},
		{ToolShell, map[string]any{"command": "cat ../../job.json"}, RiskHigh},
		{ToolShell, map[string]any{"command": "grep --file=/etc/shadow x"}, RiskHigh},
		{ToolShell, map[string]any{"command": "cat a; rm -rf ."}, RiskHigh},
		{ToolShell, map[string]any{"command": "cat $(echo /etc/passwd)"}, RiskHigh},
		{ToolShell, map[string]any{"command": "rm -rf ."}, RiskHigh},
		{ToolShell, map[string]any{"command": "curl http://example.com"}, RiskHigh},
		{ToolShell, map[string]any{"command": ""}, RiskHigh},
		{ToolShell, nil, RiskHigh},
		{ToolWriteFile, map[string]any{"path": "greeting.txt", "content": "x"}, RiskLow},
		{ToolWriteFile, map[string]any{"path": "docs/a.md", "content": "x"}, RiskLow},
		{ToolWriteFile, map[string]any{"path": ".git/hooks/pre-commit", "content": "x"}, RiskHigh},
		{ToolWriteFile, map[string]any{"path": "../escape.txt", "content": "x"}, RiskHigh},
		{ToolWriteFile, map[string]any{"path": "/tmp/x", "content": "x"}, RiskHigh},
		{"fetch", map[string]any{"url": "x"}, RiskHigh},
	} {
		if got := Classify(c.tool, c.input); got != c.want {
			t.Errorf("Classify(%s, %v) = %s, want %s", c.tool, c.input, got, c.want)
		}
	}
	for _, c := range [][3]string{
		{"low", "high", "high"}, {"high", "low", "high"}, {"medium", "low", "medium"}, {"bogus", "low", "high"}, {"low", "low", "low"},
	} {
		if got := EffectiveRisk(c[0], c[1]); got != c[2] {
			t.Errorf("EffectiveRisk(%s, %s) = %s, want %s", c[0], c[1], got, c[2])
		}
	}
}

// The action guard: an intent's signed class may not be lower than
// Logist's own, and its tool must be one the approved proposal names.
func TestActionGuardClassifiesAndHoldsToTheProposal(t *testing.T) {
	t.Parallel()
	b := newTB(t)
	b.executing() // p1 names only shell
	low := shellIntent("i1", "p1", "echo pwned > ../outside.txt", RiskLow)
	if g := b.refuse(ToolIntentSigned, Executor, "i1", b.intentBody(low)); g.Guard != GuardAction {
		t.Errorf("a low-labelled write outside the workspace: %s guard: %s", g.Guard, g.Msg)
	}
	wf := Intent{ID: "i2", ProposalID: "p1", Tool: ToolWriteFile, Input: map[string]any{"path": "a.txt", "content": "x"}, RiskClass: RiskLow, Justification: "j"}
	if g := b.refuse(ToolIntentSigned, Executor, "i2", b.intentBody(wf)); g.Guard != GuardAction {
		t.Errorf("a tool the proposal does not name: %s guard: %s", g.Guard, g.Msg)
	}
	high := shellIntent("i3", "p1", "echo pwned > ../outside.txt", RiskHigh)
	b.intent(high)
	// High risk: it needs the Critic before it runs.
	if g := b.refuse(ToolExecutionStarted, System, "i3", StartedBody(high)); g.Guard != GuardAction {
		t.Errorf("an unreviewed high-risk run: %s guard: %s", g.Guard, g.Msg)
	}
}
