package agentcli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logist/logist/internal/modelstub"
)

// Cline CLI against the Chat Completions stub (its openai-compatible
// provider), through logistd. Outside the CI set: run with
// LOGIST_TEST_AGENTS=all (or cline).

// clineHello is hello.txt as Cline's apply_patch writes the stub's file.
const clineHello = "hello from the stub"

// clineUsage is what the stub reports per reply; gpt-4o-mini is in
// prices.json (Cline reports cost 0 for it: Logist prices the tokens).
var clineUsage = modelstub.Usage{Input: 1200, Output: 80, Cached: 200}

func clineStub(t *testing.T, answers ...string) *modelstub.Server {
	t.Helper()
	return startStub(t, modelstub.Options{Write: modelstub.FileWrite{Path: "hello.txt", Content: "hello from the stub\n"},
		Answer: answer("hello.txt"), Answers: answers, Usage: clineUsage})
}

func clineAgent(bin string, s *modelstub.Server, extra map[string]any) map[string]any {
	cmd := map[string]any{"preset": "cline", "program": bin, "base_url": s.URL + "/v1",
		// The stub takes any key; the daemon's own key (if any) is not used.
		"env": map[string]any{"OPENAI_API_KEY": "sk-stub"}}
	for k, v := range extra {
		cmd[k] = v
	}
	return map[string]any{"provider": "command", "model": "gpt-4o-mini", "command": cmd}
}

func clineLimits(retries int, timeout float64) map[string]any {
	return map[string]any{"limits": map[string]any{"backoff_initial_ms": 10, "max_api_retries": retries, "call_timeout_seconds": timeout}}
}

func clineMain(s *modelstub.Server) []modelstub.Logged {
	var out []modelstub.Logged
	for _, l := range s.Requests() {
		if l.Turn != nil && !l.Turn.Side {
			out = append(out, l)
		}
	}
	return out
}

func TestClineSuccess(t *testing.T) {
	bin := requireAgent(t, "cline", "cline")
	s := clineStub(t)
	r := runJob(t, "cline-ok", clineAgent(bin, s, nil), nil)
	r.requireStatus(t, "SUCCESS")
	// Cline's apply_patch writes an added file's lines without a final
	// newline.
	if got := r.workspaceFile(t, "hello.txt"); got != clineHello {
		t.Errorf("hello.txt = %q", got)
	}
	rs := r.responses()
	if len(rs) != 1 {
		t.Fatalf("responses %s", codes(rs))
	}
	resp := rs[0]
	if resp.Action != "COMPLETED" || resp.SessionID == "" {
		t.Errorf("response %+v", resp)
	}
	if tk := resp.Tokens; tk == nil || tk.Input != 2*clineUsage.Input || tk.Output != 2*clineUsage.Output || tk.Cache != 2*clineUsage.Cached {
		t.Errorf("tokens %+v", resp.Tokens)
	}
	if want := (2000*0.15 + 400*0.075 + 160*0.6) / 1e6; resp.CostUSD < want*0.999 || resp.CostUSD > want*1.001 {
		t.Errorf("cost %v, want %v", resp.CostUSD, want)
	}
	main := clineMain(s)
	if len(main) != 2 {
		t.Fatalf("%d main requests, want 2", len(main))
	}
	first := main[0]
	// Cline writes files with its apply_patch tool.
	if first.Reply.ToolCall == nil || first.Reply.ToolCall.Name != "apply_patch" || main[1].Turn.ToolResults != 1 {
		t.Errorf("first reply %+v", first.Reply)
	}
	if !strings.Contains(first.Turn.System, "evidence_files") {
		t.Errorf("the system prompt lacks Logist's answer contract (the rule file): %.300q", first.Turn.System)
	}
	if h := first.Header.Get("Authorization"); h != "Bearer sk-stub" {
		t.Errorf("Authorization %q", h)
	}
	for _, l := range s.Requests() {
		if l.Turn == nil {
			t.Errorf("unexpected request %s %s", l.Method, l.Path)
		}
	}
}

func TestClineAuthFailure(t *testing.T) {
	bin := requireAgent(t, "cline", "cline")
	s := clineStub(t)
	s.Fail(modelstub.Failure{Status: 401}, modelstub.Failure{Status: 401}, modelstub.Failure{Status: 401})
	r := runJob(t, "cline-auth", clineAgent(bin, s, nil), nil)
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].ErrorCode != "AUTH_FAILED" {
		t.Fatalf("responses %s", codes(rs))
	}
	if n := len(clineMain(s)); n != 1 {
		t.Errorf("a 401 was asked again: %d requests", n)
	}
}

// clineAttempts is how often Cline sends a request that gets 429 or 5xx
// (the AI SDK's retries in 3.0.65: 6 attempts; not configurable).
const clineAttempts = 6

func TestClineTransientAPIErrors(t *testing.T) {
	bin := requireAgent(t, "cline", "cline")
	s := clineStub(t)
	// More failures than Cline makes attempts, so that Logist sees each
	// kind; Cline waits what Retry-After says.
	for i := 0; i < clineAttempts; i++ {
		s.Fail(modelstub.Failure{Status: 429, RetryAfter: "1"})
	}
	for i := 0; i < clineAttempts; i++ {
		s.Fail(modelstub.Failure{Status: 500, RetryAfter: "1"})
	}
	r := runJob(t, "cline-transient", clineAgent(bin, s, nil), clineLimits(3, 120))
	r.requireStatus(t, "SUCCESS")
	if got, want := codes(r.responses()), "ERROR:RATE_LIMITED ERROR:API_ERROR SUCCESS"; got != want {
		t.Errorf("responses %s, want %s", got, want)
	}
	if r.workspaceFile(t, "hello.txt") != clineHello {
		t.Error("hello.txt not written")
	}
	if n := len(clineMain(s)); n != 2*clineAttempts+2 {
		t.Errorf("%d main requests", n)
	}
}

func TestClineBrokenStreams(t *testing.T) {
	bin := requireAgent(t, "cline", "cline")
	s := clineStub(t)
	s.Fail(modelstub.Failure{Cut: true}, modelstub.Failure{Malformed: true})
	r := runJob(t, "cline-broken", clineAgent(bin, s, nil), clineLimits(3, 120))
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	// Cline retries the cut stream itself; it gives up on the reply that
	// is not JSON, which Logist retries.
	if got := codes(rs); got != "ERROR:API_MALFORMED SUCCESS" {
		t.Errorf("responses %s, want ERROR:API_MALFORMED SUCCESS", got)
	}
	for _, resp := range rs[:len(rs)-1] {
		if resp.Status == "SUCCESS" || strings.Contains(resp.RawResponse, `"action"`) {
			t.Errorf("partial answer recorded: %+v", resp)
		}
	}
	if r.workspaceFile(t, "hello.txt") != clineHello {
		t.Error("hello.txt not written")
	}
}

// Cline 3.0.65 resumes a session (--id) only in its interactive terminal
// UI: a RETRY of the phase starts a new session, told only what Logist's
// prompt says (docs/presets/cline.md).
func TestClineRetryStartsCold(t *testing.T) {
	bin := requireAgent(t, "cline", "cline")
	retry := `{"action":"RETRY","evidence_files":["hello.txt"],"summary_for_supervisor":"hello.txt is there; one more pass is needed."}`
	s := clineStub(t, retry, answer("hello.txt"))
	r := runJob(t, "cline-session", clineAgent(bin, s, nil), nil)
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	if len(rs) != 2 || rs[0].Action != "RETRY" || rs[1].Action != "COMPLETED" {
		t.Fatalf("responses %s", codes(rs))
	}
	if rs[0].SessionID == "" || rs[1].SessionID == "" || rs[1].SessionID == rs[0].SessionID {
		t.Errorf("sessions %q then %q", rs[0].SessionID, rs[1].SessionID)
	}
	// The second call's conversation is new: one user message (Logist's
	// prompt, which carries the RETRY's feedback), no tool calls, so the
	// stub has the file written again before the answer.
	main := clineMain(s)
	if len(main) != 4 {
		t.Fatalf("%d main requests, want 4 (apply_patch, RETRY, apply_patch, COMPLETED)", len(main))
	}
	if again := main[2]; again.Turn.ToolResults != 0 || len(again.Turn.Messages) != len(main[0].Turn.Messages) ||
		!strings.Contains(strings.Join(again.Turn.Messages, "\n"), "one more pass is needed") {
		t.Errorf("second conversation: %d tool results, %d messages (first: %d): %.300q",
			again.Turn.ToolResults, len(again.Turn.Messages), len(main[0].Turn.Messages), again.Turn.Messages)
	}
}

func TestClineMaxTurnsRefused(t *testing.T) {
	bin := requireAgent(t, "cline", "cline")
	s := clineStub(t)
	r := runJob(t, "cline-turns", clineAgent(bin, s, map[string]any{"max_turns": 3}), nil)
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].ErrorCode != "AGENT_CONFIG" {
		t.Fatalf("responses %s", codes(rs))
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d model requests", n)
	}
}

// clineProcs lists the pids of processes that carry the marker in their
// environment (command.env).
func clineProcs(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(env, []byte("LOGIST_TEST_MARK="+marker+"\x00")) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestClineTimeoutKillsGroup(t *testing.T) {
	bin := requireAgent(t, "cline", "cline")
	s := clineStub(t)
	s.Fail(modelstub.Failure{Delay: 2 * time.Minute})
	marker := fmt.Sprintf("cline-slow-%d-%d", os.Getpid(), time.Now().UnixNano())
	agentCfg := clineAgent(bin, s, nil)
	agentCfg["command"].(map[string]any)["env"].(map[string]any)["LOGIST_TEST_MARK"] = marker
	var seen atomic.Bool
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if len(clineProcs(marker)) > 0 {
				seen.Store(true)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	r := runJob(t, "cline-slow", agentCfg, clineLimits(3, 10))
	close(stop)
	<-done
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].Status != "TIMEOUT" {
		t.Fatalf("responses %s", codes(rs))
	}
	if !seen.Load() {
		t.Error("cline was never seen running")
	}
	if n := len(clineMain(s)); n > 1 {
		t.Errorf("%d model requests; want at most the one that hung", n)
	}
	// No hub daemon or other helper is left either (the local backend).
	if left := clineProcs(marker); len(left) > 0 {
		t.Errorf("processes left running after the timeout: %v", left)
	}
}
