package agentcli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/cli"
	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/testbed/modelstub"
	"github.com/logist/logist/internal/verify"
)

// The deliberation workflows with every member played by Claude Code
// against the model stub. The demo job is run first on its scripted
// agents; the answers it recorded, in call order, are what the stub then
// answers through claude (one call at a time, so the order is the game's).

// copyDemo copies jobs/<name> into a fresh jobs folder, one call at a time.
func copyDemo(t *testing.T, name string, agents func(m map[string]any)) string {
	t.Helper()
	jobs := t.TempDir()
	if err := os.CopyFS(filepath.Join(jobs, name), os.DirFS(filepath.Join("..", "..", "..", "jobs", name))); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(jobs, name, "job.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["limits"] = map[string]any{"max_parallel_calls": 1, "backoff_initial_ms": 10, "max_api_retries": 1, "call_timeout_seconds": 120}
	if agents != nil {
		agents(m)
	}
	out, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(p, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return jobs
}

// turnAnswers are the successful turn answers of a job, in call order.
func turnAnswers(t *testing.T, recs []history.Record) []string {
	var out []string
	for _, r := range recs {
		if r.Type == history.TypeResponse && r.Response != nil && r.Response.Status == "SUCCESS" {
			out = append(out, r.Response.RawResponse)
		}
	}
	return out
}

// ledgerShape is the ledger without what legitimately differs between the
// two runs (ids, times).
func ledgerShape(t *testing.T, recs []history.Record) string {
	var out []string
	for _, r := range recs {
		if r.Type != history.TypeMessage {
			continue
		}
		var m deliberation.Message
		if err := json.Unmarshal(r.Message, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Type+":"+m.From)
	}
	return strings.Join(out, " ")
}

func claudeMembers(t *testing.T, bin string, s *modelstub.Server) func(m map[string]any) {
	return func(m map[string]any) {
		agents := m["agents"].(map[string]any)
		for role := range agents {
			agents[role] = claudeCode.agent(t, bin, s, nil)
		}
	}
}

func TestNegotiationOnClaudeCode(t *testing.T) {
	bin := requireAgent(t, "claude-code", "claude")
	scripted := rerun(t, copyDemo(t, "demo-negotiation", nil), "demo-negotiation")
	scripted.requireStatus(t, "SUCCESS")
	answers := turnAnswers(t, scripted.Records)
	s := startStub(t, modelstub.Options{Answers: answers, Usage: claudeCode.usage})
	r := rerun(t, copyDemo(t, "demo-negotiation", claudeMembers(t, bin, s)), "demo-negotiation")
	r.requireStatus(t, "SUCCESS")
	if got, want := ledgerShape(t, r.Records), ledgerShape(t, scripted.Records); got != want {
		t.Errorf("ledger through claude:\n%s\nscripted:\n%s", got, want)
	}
	if r.Manifest.Run.WorkflowState != scripted.Manifest.Run.WorkflowState {
		t.Errorf("state %q, scripted %q", r.Manifest.Run.WorkflowState, scripted.Manifest.Run.WorkflowState)
	}
	if n := s.MainTurns(); n < len(answers) {
		t.Errorf("the stub saw %d conversations for %d answers", n, len(answers))
	}
	// Each party's claude was told only what it may see: no prompt Logist
	// sent to a party carries a private message of a pair it is not in.
	priv := privateTexts(t, r.Records)
	prompts := 0
	for _, rec := range r.Records {
		if rec.Type != history.TypeIntent || rec.Request == nil {
			continue
		}
		prompts++
		for text, audience := range priv {
			if strings.Contains(rec.Request.Prompt, text) && !contains(audience, rec.Role) {
				t.Errorf("the prompt to %s carried the private message %q of %v", rec.Role, text, audience)
			}
		}
	}
	if len(priv) == 0 || prompts == 0 {
		t.Fatalf("nothing checked: %d private messages, %d prompts", len(priv), prompts)
	}
	rep, err := verify.Job(r.ID, filepath.Join(r.Dir, r.ID), verify.Options{Manifest: r.Manifest})
	if err != nil || !rep.OK() {
		t.Errorf("verify: %v %+v", err, rep)
	}
}

// privateTexts are the texts of messages with an audience, by audience.
func privateTexts(t *testing.T, recs []history.Record) map[string][]string {
	out := map[string][]string{}
	for _, r := range recs {
		if r.Type != history.TypeMessage {
			continue
		}
		var m deliberation.Message
		if err := json.Unmarshal(r.Message, &m); err != nil {
			t.Fatal(err)
		}
		if text, _ := m.Content["text"].(string); text != "" && len(m.Audience) > 0 && m.Type == "MESSAGE" {
			out[text] = m.Audience
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestParliamentOnClaudeCode(t *testing.T) {
	bin := requireAgent(t, "claude-code", "claude")
	jobs := copyDemo(t, "demo-parliament", nil)
	scripted := rerun(t, jobs, "demo-parliament")
	scripted.requireStatus(t, "INTERVENTION_REQUIRED")
	answers := turnAnswers(t, scripted.Records)
	s := startStub(t, modelstub.Options{Answers: answers, Usage: claudeCode.usage})
	cjobs := copyDemo(t, "demo-parliament", claudeMembers(t, bin, s))
	r := rerun(t, cjobs, "demo-parliament")
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	if r.Manifest.Run.ErrorCode != "AWAITING_STEWARD" {
		t.Fatalf("waiting for %s (%s)", r.Manifest.Run.ErrorCode, r.Manifest.Run.Reason)
	}
	if got, want := ledgerShape(t, r.Records), ledgerShape(t, scripted.Records); got != want {
		t.Errorf("ledger through claude:\n%s\nscripted:\n%s", got, want)
	}
	// The amendment the House passed changed the workspace file.
	if got := r.workspaceFile(t, "README.md"); !strings.Contains(got, "sha256sum -c") {
		t.Errorf("README.md was not amended:\n%s", got)
	}
	// The Prime Minister approves; the House completes.
	var out, errb bytes.Buffer
	if code := cli.Main(context.Background(), []string{"logist", "pm", "demo-parliament", "approve", "--jobs-dir", cjobs, "--reason", "meets the brief"},
		os.Getenv, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("logist pm exited %d: %s %s", code, out.String(), errb.String())
	}
	r = rerun(t, cjobs, "demo-parliament")
	r.requireStatus(t, "SUCCESS")
}
