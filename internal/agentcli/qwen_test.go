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

// Qwen Code against the Chat Completions stub (OpenAI auth with
// OPENAI_BASE_URL), through logistd. Outside the CI set: run with
// LOGIST_TEST_AGENTS=all (or qwen-code).

// qwenUsage is what the stub reports per reply; gpt-4o-mini is in
// prices.json (Qwen Code reports no cost: Logist prices the tokens).
var qwenUsage = modelstub.Usage{Input: 1200, Output: 80, Cached: 200}

func qwenStub(t *testing.T, answers ...string) *modelstub.Server {
	t.Helper()
	return startStub(t, modelstub.Options{Write: modelstub.FileWrite{Path: "hello.txt", Content: "hello from the stub\n"},
		Answer: answer("hello.txt"), Answers: answers, Usage: qwenUsage})
}

func qwenAgent(bin string, s *modelstub.Server, extra map[string]any) map[string]any {
	cmd := map[string]any{"preset": "qwen-code", "program": bin, "base_url": s.URL + "/v1",
		// The stub takes any key; the daemon's own key (if any) is not used.
		"env": map[string]any{"OPENAI_API_KEY": "sk-stub"}}
	for k, v := range extra {
		cmd[k] = v
	}
	return map[string]any{"provider": "command", "model": "gpt-4o-mini", "command": cmd}
}

func qwenLimits(retries int, timeout float64) map[string]any {
	return map[string]any{"limits": map[string]any{"backoff_initial_ms": 10, "max_api_retries": retries, "call_timeout_seconds": timeout}}
}

func qwenMain(s *modelstub.Server) []modelstub.Logged {
	var out []modelstub.Logged
	for _, l := range s.Requests() {
		if l.Turn != nil && !l.Turn.Side {
			out = append(out, l)
		}
	}
	return out
}

func TestQwenCodeSuccess(t *testing.T) {
	bin := requireAgent(t, "qwen-code", "qwen")
	s := qwenStub(t)
	r := runJob(t, "qwen-ok", qwenAgent(bin, s, nil), nil)
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
	// Two model requests (write_file, then structured_output with the
	// answer), summed and priced as gpt-4o-mini.
	if tk := resp.Tokens; tk == nil || tk.Input != 2*qwenUsage.Input || tk.Output != 2*qwenUsage.Output || tk.Cache != 2*qwenUsage.Cached {
		t.Errorf("tokens %+v", resp.Tokens)
	}
	if want := (2000*0.15 + 400*0.075 + 160*0.6) / 1e6; resp.CostUSD < want*0.999 || resp.CostUSD > want*1.001 {
		t.Errorf("cost %v, want %v", resp.CostUSD, want)
	}
	main := qwenMain(s)
	if len(main) != 2 {
		t.Fatalf("%d main requests, want 2", len(main))
	}
	first, last := main[0], main[1]
	if first.Reply.ToolCall == nil || first.Reply.ToolCall.Name != "write_file" {
		t.Errorf("first reply %+v", first.Reply)
	}
	// The answer came through the tool --json-schema registers.
	if last.Reply.ToolCall == nil || last.Reply.ToolCall.Name != modelstub.ChatStructuredTool || last.Turn.ToolResults != 1 {
		t.Errorf("last reply %+v (tool results %d)", last.Reply, last.Turn.ToolResults)
	}
	if !strings.Contains(first.Turn.System, "evidence_files") {
		t.Errorf("the system prompt lacks Logist's answer contract: %.300q", first.Turn.System)
	}
	if h := first.Header.Get("Authorization"); h != "Bearer sk-stub" {
		t.Errorf("Authorization %q", h)
	}
	for _, l := range s.Requests() {
		if l.Turn == nil {
			t.Errorf("unexpected request %s %s", l.Method, l.Path)
		} else if l.Turn.Side {
			t.Errorf("side request %+v", l.Turn)
		}
	}
}

func TestQwenCodeAuthFailure(t *testing.T) {
	bin := requireAgent(t, "qwen-code", "qwen")
	s := qwenStub(t)
	s.Fail(modelstub.Failure{Status: 401}, modelstub.Failure{Status: 401}, modelstub.Failure{Status: 401})
	r := runJob(t, "qwen-auth", qwenAgent(bin, s, nil), nil)
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].ErrorCode != "AUTH_FAILED" {
		t.Fatalf("responses %s", codes(rs))
	}
	if n := len(qwenMain(s)); n != 1 {
		t.Errorf("a 401 was asked again: %d requests", n)
	}
}

// qwenAttempts is how often Qwen Code sends a request that gets 429 or
// 5xx (retryWithBackoff's 7 attempts in 0.24.4; not configurable).
const qwenAttempts = 7

func TestQwenCodeTransientAPIErrors(t *testing.T) {
	bin := requireAgent(t, "qwen-code", "qwen")
	s := qwenStub(t)
	// More failures than Qwen Code makes attempts, so that Logist sees
	// each kind. It honours Retry-After for 429 and 503 only (a 500 costs
	// 1.5 s doubling: 68 s for the 7 attempts; the unit tests cover it).
	for i := 0; i < qwenAttempts; i++ {
		s.Fail(modelstub.Failure{Status: 429, RetryAfter: "1"})
	}
	for i := 0; i < qwenAttempts; i++ {
		s.Fail(modelstub.Failure{Status: 503, RetryAfter: "1"})
	}
	r := runJob(t, "qwen-transient", qwenAgent(bin, s, nil), qwenLimits(3, 120))
	r.requireStatus(t, "SUCCESS")
	if got, want := codes(r.responses()), "ERROR:RATE_LIMITED ERROR:API_ERROR SUCCESS"; got != want {
		t.Errorf("responses %s, want %s", got, want)
	}
	if r.workspaceFile(t, "hello.txt") != "hello from the stub\n" {
		t.Error("hello.txt not written")
	}
	if n := len(qwenMain(s)); n != 2*qwenAttempts+2 {
		t.Errorf("%d main requests", n)
	}
}

func TestQwenCodeBrokenStreams(t *testing.T) {
	bin := requireAgent(t, "qwen-code", "qwen")
	s := qwenStub(t)
	s.Fail(modelstub.Failure{Cut: true}, modelstub.Failure{Malformed: true})
	r := runJob(t, "qwen-broken", qwenAgent(bin, s, nil), qwenLimits(3, 120))
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	// Qwen Code retries the cut stream itself; it gives up on the reply
	// that is not JSON, which Logist retries.
	if got := codes(rs); got != "ERROR:API_MALFORMED SUCCESS" {
		t.Errorf("responses %s, want ERROR:API_MALFORMED SUCCESS", got)
	}
	for _, resp := range rs[:len(rs)-1] {
		if resp.Status == "SUCCESS" || strings.Contains(resp.RawResponse, `"action"`) {
			t.Errorf("partial answer recorded: %+v", resp)
		}
	}
	if r.workspaceFile(t, "hello.txt") != "hello from the stub\n" {
		t.Error("hello.txt not written")
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

func TestQwenCodeSessionContinues(t *testing.T) {
	bin := requireAgent(t, "qwen-code", "qwen")
	retry := `{"action":"RETRY","evidence_files":["hello.txt"],"summary_for_supervisor":"hello.txt is there; one more pass is needed."}`
	s := qwenStub(t, retry, answer("hello.txt"))
	r := runJob(t, "qwen-session", qwenAgent(bin, s, nil), nil)
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	if len(rs) != 2 || rs[0].Action != "RETRY" || rs[1].Action != "COMPLETED" {
		t.Fatalf("responses %s", codes(rs))
	}
	if rs[0].SessionID == "" || rs[1].SessionID != rs[0].SessionID {
		t.Errorf("sessions %q then %q: not continued", rs[0].SessionID, rs[1].SessionID)
	}
	// The second call ran with --resume: the whole first conversation
	// (the task, write_file and its result, the RETRY answer) came ahead of
	// the new request; its tokens are only its own.
	main := qwenMain(s)
	if len(main) != 3 {
		t.Fatalf("%d main requests, want 3 (write_file, RETRY, COMPLETED)", len(main))
	}
	first, last := main[0], main[2]
	if !strings.Contains(strings.Join(first.Turn.Messages, "\n"), "Create the file the model asks for") {
		t.Errorf("the first conversation lacks the task: %.300q", first.Turn.Messages)
	}
	conv := strings.Join(last.Turn.Messages, "\n")
	for _, want := range []string{"Create the file the model asks for", "write_file {", "one more pass is needed"} {
		if !strings.Contains(conv, want) {
			t.Errorf("the resumed conversation lacks %.80q", want)
		}
	}
	if last.Turn.ToolResults < 2 {
		t.Errorf("resumed conversation has %d tool results", last.Turn.ToolResults)
	}
	if tk := rs[1].Tokens; tk == nil || tk.Input != qwenUsage.Input || tk.Output != qwenUsage.Output {
		t.Errorf("second call's tokens %+v, want one reply's", rs[1].Tokens)
	}
}

func TestQwenCodeMaxTurns(t *testing.T) {
	bin := requireAgent(t, "qwen-code", "qwen")
	s := qwenStub(t)
	// One turn allowed: the write call uses it.
	r := runJob(t, "qwen-turns", qwenAgent(bin, s, map[string]any{"max_turns": 1}), nil)
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].ErrorCode != "MAX_TURNS" || rs[0].CostUSD <= 0 {
		t.Fatalf("responses %s (%+v)", codes(rs), rs)
	}
}

// qwenProcs lists the pids of processes that carry the marker in their
// environment (command.env).
func qwenProcs(marker string) []string {
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

func TestQwenCodeTimeoutKillsGroup(t *testing.T) {
	bin := requireAgent(t, "qwen-code", "qwen")
	s := qwenStub(t)
	s.Fail(modelstub.Failure{Delay: 2 * time.Minute})
	marker := fmt.Sprintf("qwen-slow-%d-%d", os.Getpid(), time.Now().UnixNano())
	agentCfg := qwenAgent(bin, s, nil)
	agentCfg["command"].(map[string]any)["env"].(map[string]any)["LOGIST_TEST_MARK"] = marker
	var seen atomic.Bool
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if len(qwenProcs(marker)) > 0 {
				seen.Store(true)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	r := runJob(t, "qwen-slow", agentCfg, qwenLimits(3, 10))
	close(stop)
	<-done
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].Status != "TIMEOUT" {
		t.Fatalf("responses %s", codes(rs))
	}
	if !seen.Load() {
		t.Error("qwen was never seen running")
	}
	if n := len(qwenMain(s)); n > 1 {
		t.Errorf("%d model requests; want at most the one that hung", n)
	}
	if left := qwenProcs(marker); len(left) > 0 {
		t.Errorf("processes left running after the timeout: %v", left)
	}
}
