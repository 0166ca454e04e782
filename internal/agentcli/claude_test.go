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

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/modelstub"
)

// Claude Code against the Anthropic Messages stub, through logistd.

// claudeUsage is what the stub reports per reply; claude-sonnet-4-5 is a
// model claude prices itself (and prices.json knows).
var claudeUsage = modelstub.Usage{Input: 1200, Output: 80, Cached: 200}

func claudeStub(t *testing.T, answers ...string) *modelstub.Server {
	t.Helper()
	opts := modelstub.Options{Write: modelstub.FileWrite{Path: "hello.txt", Content: "hello from the stub\n"},
		Answer: answer("hello.txt"), Usage: claudeUsage}
	if len(answers) > 0 {
		opts.Answers = answers
	}
	return startStub(t, opts)
}

func claudeAgent(bin string, s *modelstub.Server, extra map[string]any) map[string]any {
	cmd := map[string]any{"preset": "claude-code", "program": bin, "base_url": s.URL,
		// The stub takes any key; the daemon's own key (if any) is not used.
		"env": map[string]any{"ANTHROPIC_API_KEY": "sk-ant-stub"}}
	for k, v := range extra {
		cmd[k] = v
	}
	return map[string]any{"provider": "command", "model": "claude-sonnet-4-5", "command": cmd}
}

func claudeLimits(retries int, timeout float64) map[string]any {
	return map[string]any{"limits": map[string]any{"backoff_initial_ms": 10, "max_api_retries": retries, "call_timeout_seconds": timeout}}
}

// codes lists the responses' status/error codes, for assertions and
// failure messages.
func codes(rs []*history.Response) string {
	var out []string
	for _, r := range rs {
		c := r.Status
		if r.ErrorCode != "" {
			c += ":" + r.ErrorCode
		}
		out = append(out, c)
	}
	return strings.Join(out, " ")
}

func TestClaudeCodeSuccess(t *testing.T) {
	bin := requireAgent(t, "claude-code", "claude")
	s := claudeStub(t)
	r := runJob(t, "claude-ok", claudeAgent(bin, s, nil), nil)
	r.requireStatus(t, "SUCCESS")
	if got := r.workspaceFile(t, "hello.txt"); got != "hello from the stub\n" {
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
	// Two model requests (the Write call, then the answer): claude sums
	// the stub's usage and prices it, 2000×$3 + 400×$0.30 + 160×$15 per
	// million tokens.
	if tk := resp.Tokens; tk == nil || tk.Input != 2*claudeUsage.Input || tk.Output != 2*claudeUsage.Output || tk.Cache != 2*claudeUsage.Cached {
		t.Errorf("tokens %+v", resp.Tokens)
	}
	if resp.CostUSD < 0.0085 || resp.CostUSD > 0.0086 {
		t.Errorf("cost %v, want 0.00852", resp.CostUSD)
	}
	// The stub saw claude's own Write tool and the answer schema as its
	// StructuredOutput tool; nothing but the model API was called.
	var tools []string
	for _, l := range s.Requests() {
		if l.Turn == nil {
			t.Errorf("unexpected request %s %s", l.Method, l.Path)
			continue
		}
		if !l.Turn.Side && len(tools) == 0 {
			for _, tl := range l.Turn.Tools {
				tools = append(tools, tl.Name)
			}
		}
	}
	if j := strings.Join(tools, ","); !strings.Contains(j, "Write") || !strings.Contains(j, modelstub.AnthropicStructuredTool) {
		t.Errorf("tools offered: %s", j)
	}
	if s.MainTurns() != 2 {
		t.Errorf("main turns %d, want 2", s.MainTurns())
	}
}

func TestClaudeCodeAuthFailure(t *testing.T) {
	bin := requireAgent(t, "claude-code", "claude")
	s := claudeStub(t)
	// claude runs with CLAUDE_CODE_MAX_RETRIES=0; spares in case it retries.
	s.Fail(modelstub.Failure{Status: 401}, modelstub.Failure{Status: 401}, modelstub.Failure{Status: 401})
	r := runJob(t, "claude-auth", claudeAgent(bin, s, nil), nil)
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].ErrorCode != "AUTH_FAILED" {
		t.Fatalf("responses %s", codes(rs))
	}
	if s.MainTurns() != 1 {
		t.Errorf("a 401 was asked again: %d requests", s.MainTurns())
	}
}

func TestClaudeCodeTransientAPIErrors(t *testing.T) {
	bin := requireAgent(t, "claude-code", "claude")
	s := claudeStub(t)
	s.Fail(modelstub.Failure{Status: 429, RetryAfter: "1"}, modelstub.Failure{Status: 500}, modelstub.Failure{Status: 529})
	r := runJob(t, "claude-transient", claudeAgent(bin, s, nil), claudeLimits(4, 120))
	r.requireStatus(t, "SUCCESS")
	// Each failure is Logist's to retry (claude's own retries are off),
	// and each is on the record.
	if got, want := codes(r.responses()), "ERROR:RATE_LIMITED ERROR:API_ERROR ERROR:API_ERROR SUCCESS"; got != want {
		t.Errorf("responses %s, want %s", got, want)
	}
	if r.workspaceFile(t, "hello.txt") != "hello from the stub\n" {
		t.Error("hello.txt not written")
	}
}

func TestClaudeCodeBrokenStreams(t *testing.T) {
	bin := requireAgent(t, "claude-code", "claude")
	s := claudeStub(t)
	s.Fail(modelstub.Failure{Cut: true}, modelstub.Failure{Malformed: true})
	r := runJob(t, "claude-broken", claudeAgent(bin, s, nil), claudeLimits(3, 120))
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	t.Logf("responses: %s; model requests: %d", codes(rs), s.MainTurns())
	if len(rs) == 0 || rs[len(rs)-1].Action != "COMPLETED" {
		t.Fatalf("responses %s", codes(rs))
	}
	if r.workspaceFile(t, "hello.txt") != "hello from the stub\n" {
		t.Error("hello.txt not written")
	}
	// claude retries a broken stream once by itself, without streaming
	// (even with its retries off); that reply broken too, Logist retries.
	if got := codes(rs); got != "ERROR:API_ERROR SUCCESS" {
		t.Errorf("responses %s, want ERROR:API_ERROR SUCCESS", got)
	}
	// No partial answer is on the record.
	for _, resp := range rs[:len(rs)-1] {
		if resp.Status == "SUCCESS" || strings.Contains(resp.RawResponse, `"action"`) {
			t.Errorf("partial answer recorded: %+v", resp)
		}
	}
	var cut, malformed bool
	for _, l := range s.Requests() {
		if l.Reply != nil && l.Reply.Failure != nil {
			cut = cut || l.Reply.Failure.Cut
			malformed = malformed || l.Reply.Failure.Malformed
		}
	}
	if !cut || !malformed {
		t.Errorf("the broken streams were not served: cut %v malformed %v", cut, malformed)
	}
}

func TestClaudeCodeSessionContinues(t *testing.T) {
	bin := requireAgent(t, "claude-code", "claude")
	retry := `{"action":"RETRY","evidence_files":["hello.txt"],"summary_for_supervisor":"hello.txt is there; one more pass is needed."}`
	s := claudeStub(t, retry, answer("hello.txt"))
	r := runJob(t, "claude-session", claudeAgent(bin, s, nil), nil)
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	if len(rs) != 2 || rs[0].Action != "RETRY" || rs[1].Action != "COMPLETED" {
		t.Fatalf("responses %s", codes(rs))
	}
	if rs[0].SessionID == "" || rs[1].SessionID != rs[0].SessionID {
		t.Errorf("sessions %q then %q: not continued", rs[0].SessionID, rs[1].SessionID)
	}
	// The second call ran with --resume: claude sent the same session id
	// and the whole first conversation (its prompt, the Write call, the
	// RETRY answer) ahead of the new request.
	var main []modelstub.Logged
	for _, l := range s.Requests() {
		if l.Turn != nil && !l.Turn.Side {
			main = append(main, l)
		}
	}
	if len(main) != 3 {
		t.Fatalf("%d main requests, want 3 (Write, RETRY, COMPLETED)", len(main))
	}
	first, last := main[0], main[2]
	if h := last.Header.Get("X-Claude-Code-Session-Id"); h == "" || h != first.Header.Get("X-Claude-Code-Session-Id") || h != rs[0].SessionID {
		t.Errorf("session headers %q, %q; recorded %q", first.Header.Get("X-Claude-Code-Session-Id"), h, rs[0].SessionID)
	}
	if !strings.Contains(strings.Join(first.Turn.Messages, "\n"), "Create the file the model asks for") {
		t.Errorf("the first conversation lacks the task: %.300q", first.Turn.Messages)
	}
	conv := strings.Join(last.Turn.Messages, "\n")
	for _, want := range []string{"Create the file the model asks for", "call Write", "one more pass is needed"} {
		if !strings.Contains(conv, want) {
			t.Errorf("the resumed conversation lacks %.80q", want)
		}
	}
	if len(last.Turn.Messages) <= len(first.Turn.Messages) {
		t.Errorf("resumed conversation has %d messages, the first had %d", len(last.Turn.Messages), len(first.Turn.Messages))
	}
}

func TestClaudeCodeMaxTurns(t *testing.T) {
	bin := requireAgent(t, "claude-code", "claude")
	s := claudeStub(t)
	r := runJob(t, "claude-turns", claudeAgent(bin, s, map[string]any{"max_turns": 1}), nil)
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].ErrorCode != "MAX_TURNS" || rs[0].CostUSD <= 0 {
		t.Fatalf("responses %s (%+v)", codes(rs), rs)
	}
}

// claudeProcs lists the pids of processes that carry the marker in their
// environment (command.env).
func claudeProcs(marker string) []string {
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

func TestClaudeCodeTimeoutKillsGroup(t *testing.T) {
	bin := requireAgent(t, "claude-code", "claude")
	s := claudeStub(t)
	s.Fail(modelstub.Failure{Delay: 2 * time.Minute})
	marker := fmt.Sprintf("claude-slow-%d-%d", os.Getpid(), time.Now().UnixNano())
	agentCfg := claudeAgent(bin, s, nil)
	agentCfg["command"].(map[string]any)["env"].(map[string]any)["LOGIST_TEST_MARK"] = marker
	// Watch for claude while the job runs, so the final check is known to
	// see it when it is there.
	var seen atomic.Bool
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if len(claudeProcs(marker)) > 0 {
				seen.Store(true)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	r := runJob(t, "claude-slow", agentCfg, claudeLimits(3, 4))
	close(stop)
	<-done
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].Status != "TIMEOUT" {
		t.Fatalf("responses %s", codes(rs))
	}
	if !seen.Load() {
		t.Error("claude was never seen running")
	}
	if left := claudeProcs(marker); len(left) > 0 {
		t.Errorf("processes left running after the timeout: %v", left)
	}
}
