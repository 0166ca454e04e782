package agentcli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/protocol"
	"github.com/logist/logist/internal/testbed/modelstub"
	"github.com/logist/logist/internal/verify"
)

// The protocol workflow (seed 003) with every role played by Claude Code
// against the model stub: the stub answers each role's turn in order, with
// the role's own fields, through claude's structured output (the phase's
// schema reaches claude as --json-schema).

func roleAnswer(summary string, fields map[string]any) string {
	m := map[string]any{"action": "COMPLETED", "evidence_files": []string{}, "summary_for_supervisor": summary}
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func TestProtocolOnClaudeCode(t *testing.T) {
	bin := requireAgent(t, "claude-code", "claude")
	intents := []any{
		map[string]any{"id": "t1", "proposal_id": "p1", "tool": "write_file", "input": map[string]any{"path": "greeting.txt", "content": "hello, protocol\n"}, "risk_class": "low", "justification": "the task"},
		map[string]any{"id": "t2", "proposal_id": "p1", "tool": "shell", "input": map[string]any{"command": "cat greeting.txt"}, "risk_class": "low", "justification": "evidence"},
	}
	answers := []string{
		roleAnswer("One proposal.", map[string]any{"proposals": []any{map[string]any{"id": "p1", "objective": "write and show greeting.txt",
			"assumptions": []string{}, "required_tools": []string{"write_file", "shell"}, "expected_evidence": []string{"cat output"}}}}),
		roleAnswer("Approved.", map[string]any{"reviews": []any{map[string]any{"proposal_id": "p1", "decision": "approved", "reason": "inside the workspace"}}}),
		roleAnswer("Write, then show.", map[string]any{"tool_intents": intents}),
		roleAnswer("Done with tools.", map[string]any{"tool_intents": []any{}}),
		roleAnswer("One claim.", map[string]any{"claims": []any{map[string]any{"id": "c1", "text": "greeting.txt holds the greeting", "confidence": 0.9, "evidence": []string{"tool:t2"}}}}),
		roleAnswer("No challenge.", map[string]any{"challenges": []any{}}),
		roleAnswer("Final.", map[string]any{"final_statement": map[string]any{"summary": "greeting.txt written and shown", "claim_ids": []string{"c1"}}}),
		roleAnswer("Pass.", map[string]any{"verdict": map[string]any{"status": "pass", "notes": "all checks passed"}}),
	}
	s := startStub(t, modelstub.Options{Answers: answers, Usage: claudeCode.usage})
	agents := map[string]any{}
	for _, role := range protocol.Roles {
		agents[role] = claudeCode.agent(t, bin, s, nil)
	}
	r := runJob(t, "protocol-claude", agents["planner"].(map[string]any), map[string]any{
		"workflow": "protocol", "agents": agents,
		"protocol": map[string]any{"checks": []any{map[string]any{"name": "greeting", "argv": []string{"grep", "-q", "hello, protocol", "greeting.txt"}}}},
		"limits":   map[string]any{"backoff_initial_ms": 10, "max_api_retries": 1, "call_timeout_seconds": 120},
	})
	r.requireStatus(t, "SUCCESS")
	if r.Manifest.Run.WorkflowState != "completed" {
		t.Errorf("session state %q", r.Manifest.Run.WorkflowState)
	}
	if got := r.workspaceFile(t, "greeting.txt"); got != "hello, protocol\n" {
		t.Errorf("greeting.txt = %q", got)
	}
	var types []string
	for _, rec := range r.Records {
		if rec.Event != nil {
			types = append(types, rec.Event.Type)
		}
	}
	if got := strings.Join(types, " "); !strings.HasSuffix(got, "claim_issued final_statement_signed verification_run_started verification_run_completed") {
		t.Errorf("events: %s", got)
	}
	// Each role's answer came through claude, with its cost and session.
	for _, resp := range r.responses() {
		if resp.Status != "SUCCESS" {
			t.Errorf("response %+v", resp)
		}
	}
	// The phase's schema was what claude was told to produce.
	sawProposals := false
	for _, l := range s.Requests() {
		sawProposals = sawProposals || strings.Contains(string(l.Body), `"proposals"`)
	}
	if !sawProposals {
		t.Error("no request to the model carried the Planner's schema")
	}
	b, _ := os.ReadFile(filepath.Join(r.Dir, r.ID, "job.json"))
	if !strings.Contains(string(b), `"workflow_state": "completed"`) {
		t.Error("manifest lacks the session state")
	}
	rep, err := verify.Job(r.ID, filepath.Join(r.Dir, r.ID), verify.Options{Manifest: r.Manifest})
	if err != nil || !rep.OK() || rep.Protocol != "pass" {
		t.Errorf("verify: %v %+v", err, rep)
	}
}
