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

// OpenCode against the Chat Completions stub (a base_url provider),
// through logistd.

// opencodeUsage is what the stub reports per reply; gpt-4o-mini is in
// prices.json (OpenCode reports cost 0 for a base_url model, so Logist
// prices the tokens).
var opencodeUsage = modelstub.Usage{Input: 1200, Output: 80, Cached: 200}

func opencodeStub(t *testing.T, answers ...string) *modelstub.Server {
	t.Helper()
	opts := modelstub.Options{Write: modelstub.FileWrite{Path: "hello.txt", Content: "hello from the stub\n"},
		Answer: answer("hello.txt"), Answers: answers, Usage: opencodeUsage}
	return startStub(t, opts)
}

func opencodeAgent(bin string, s *modelstub.Server, extra map[string]any) map[string]any {
	cmd := map[string]any{"preset": "opencode", "program": bin, "base_url": s.URL + "/v1",
		// The stub takes any key; the daemon's own key (if any) is not used.
		"env": map[string]any{"OPENAI_API_KEY": "sk-stub"}}
	for k, v := range extra {
		cmd[k] = v
	}
	return map[string]any{"provider": "command", "model": "gpt-4o-mini", "command": cmd}
}

func opencodeLimits(retries int, timeout float64) map[string]any {
	return map[string]any{"limits": map[string]any{"backoff_initial_ms": 10, "max_api_retries": retries, "call_timeout_seconds": timeout}}
}

func opencodeMain(s *modelstub.Server) []modelstub.Logged {
	var out []modelstub.Logged
	for _, l := range s.Requests() {
		if l.Turn != nil && !l.Turn.Side {
			out = append(out, l)
		}
	}
	return out
}

func TestOpenCodeSuccess(t *testing.T) {
	bin := requireAgent(t, "opencode", "opencode")
	s := opencodeStub(t)
	r := runJob(t, "opencode-ok", opencodeAgent(bin, s, nil), nil)
	r.requireStatus(t, "SUCCESS")
	if got := r.workspaceFile(t, "hello.txt"); got != "hello from the stub\n" {
		t.Errorf("hello.txt = %q", got)
	}
	rs := r.responses()
	if len(rs) != 1 {
		t.Fatalf("responses %s", codes(rs))
	}
	resp := rs[0]
	if resp.Action != "COMPLETED" || !strings.HasPrefix(resp.SessionID, "ses_") {
		t.Errorf("response %+v", resp)
	}
	// Two model requests (the write call, then the answer), summed; the
	// tokens priced as gpt-4o-mini: 2000 uncached × $0.15 + 400 cached ×
	// $0.075 + 160 × $0.60 per million.
	if tk := resp.Tokens; tk == nil || tk.Input != 2*opencodeUsage.Input || tk.Output != 2*opencodeUsage.Output || tk.Cache != 2*opencodeUsage.Cached {
		t.Errorf("tokens %+v", resp.Tokens)
	}
	if want := (2000*0.15 + 400*0.075 + 160*0.6) / 1e6; resp.CostUSD < want*0.999 || resp.CostUSD > want*1.001 {
		t.Errorf("cost %v, want %v", resp.CostUSD, want)
	}
	// Only the model API was called, with OpenCode's own write tool, the
	// role's system prompt among its instructions and the key we gave.
	main := opencodeMain(s)
	if len(main) != 2 {
		t.Fatalf("%d main requests, want 2", len(main))
	}
	for _, l := range s.Requests() {
		if l.Turn == nil {
			t.Errorf("unexpected request %s %s", l.Method, l.Path)
		}
	}
	first := main[0]
	var tools []string
	for _, tl := range first.Turn.Tools {
		tools = append(tools, tl.Name)
	}
	if !strings.Contains(","+strings.Join(tools, ",")+",", ",write,") {
		t.Errorf("tools offered: %v", tools)
	}
	if first.Reply.ToolCall == nil || first.Reply.ToolCall.Name != "write" {
		t.Errorf("first reply %+v", first.Reply)
	}
	if !strings.Contains(first.Turn.System, "evidence_files") {
		t.Errorf("the system prompt lacks Logist's answer contract: %.400q", first.Turn.System)
	}
	if h := first.Header.Get("Authorization"); h != "Bearer sk-stub" {
		t.Errorf("Authorization %q", h)
	}
	if first.Turn.Model != "gpt-4o-mini" || !first.Turn.Stream {
		t.Errorf("model %q stream %v", first.Turn.Model, first.Turn.Stream)
	}
	// The prompt arrived as Logist wrote it (opencode run would quote and
	// escape an argument with spaces).
	if msg := first.Turn.Messages[0]; !strings.Contains(msg, "Create the file the model asks for") || strings.Contains(msg, `\"`) || strings.HasPrefix(msg, `"`) {
		t.Errorf("first message %.300q", msg)
	}
	if main[1].Turn.ToolResults != 1 {
		t.Errorf("second request has %d tool results", main[1].Turn.ToolResults)
	}
}

func TestOpenCodeAuthFailure(t *testing.T) {
	bin := requireAgent(t, "opencode", "opencode")
	s := opencodeStub(t)
	// OpenCode does not retry a 401; spares in case a version does.
	s.Fail(modelstub.Failure{Status: 401}, modelstub.Failure{Status: 401}, modelstub.Failure{Status: 401})
	r := runJob(t, "opencode-auth", opencodeAgent(bin, s, nil), nil)
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].ErrorCode != "AUTH_FAILED" {
		t.Fatalf("responses %s", codes(rs))
	}
	if n := len(opencodeMain(s)); n != 1 {
		t.Errorf("a 401 was asked again: %d requests", n)
	}
}

// opencodeRetries is how often OpenCode retries a 429/5xx by itself
// (RETRY_MAX_RETRIES in 1.18.33; it cannot be configured).
const opencodeRetries = 5

func TestOpenCodeTransientAPIErrors(t *testing.T) {
	bin := requireAgent(t, "opencode", "opencode")
	s := opencodeStub(t)
	// More failures than OpenCode retries, so that Logist sees each kind.
	// OpenCode waits what Retry-After says (else 2 s doubling): 0 keeps
	// the test short.
	for i := 0; i <= opencodeRetries; i++ {
		s.Fail(modelstub.Failure{Status: 429, RetryAfter: "0"})
	}
	for i := 0; i <= opencodeRetries; i++ {
		s.Fail(modelstub.Failure{Status: 500, RetryAfter: "0"})
	}
	r := runJob(t, "opencode-transient", opencodeAgent(bin, s, nil), opencodeLimits(3, 120))
	r.requireStatus(t, "SUCCESS")
	if got, want := codes(r.responses()), "ERROR:RATE_LIMITED ERROR:API_ERROR SUCCESS"; got != want {
		t.Errorf("responses %s, want %s", got, want)
	}
	if r.workspaceFile(t, "hello.txt") != "hello from the stub\n" {
		t.Error("hello.txt not written")
	}
	// 2×6 failed requests, then the write call and the answer.
	if n := len(opencodeMain(s)); n != 2*(opencodeRetries+1)+2 {
		t.Errorf("%d main requests", n)
	}
}

func TestOpenCodeBrokenStreams(t *testing.T) {
	bin := requireAgent(t, "opencode", "opencode")
	s := opencodeStub(t)
	s.Fail(modelstub.Failure{Cut: true}, modelstub.Failure{Malformed: true})
	r := runJob(t, "opencode-broken", opencodeAgent(bin, s, nil), opencodeLimits(3, 120))
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	// OpenCode retries the cut stream itself; it gives up on the reply
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

func TestOpenCodeSessionContinues(t *testing.T) {
	bin := requireAgent(t, "opencode", "opencode")
	retry := `{"action":"RETRY","evidence_files":["hello.txt"],"summary_for_supervisor":"hello.txt is there; one more pass is needed."}`
	s := opencodeStub(t, retry, answer("hello.txt"))
	r := runJob(t, "opencode-session", opencodeAgent(bin, s, nil), nil)
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	if len(rs) != 2 || rs[0].Action != "RETRY" || rs[1].Action != "COMPLETED" {
		t.Fatalf("responses %s", codes(rs))
	}
	if rs[0].SessionID == "" || rs[1].SessionID != rs[0].SessionID {
		t.Errorf("sessions %q then %q: not continued", rs[0].SessionID, rs[1].SessionID)
	}
	// The second call ran with --session: OpenCode sent the whole first
	// conversation (the task, the write call and its result, the RETRY
	// answer) ahead of the new request.
	main := opencodeMain(s)
	if len(main) != 3 {
		t.Fatalf("%d main requests, want 3 (write, RETRY, COMPLETED)", len(main))
	}
	first, last := main[0], main[2]
	if !strings.Contains(strings.Join(first.Turn.Messages, "\n"), "Create the file the model asks for") {
		t.Errorf("the first conversation lacks the task: %.300q", first.Turn.Messages)
	}
	conv := strings.Join(last.Turn.Messages, "\n")
	for _, want := range []string{"Create the file the model asks for", "write {", "one more pass is needed"} {
		if !strings.Contains(conv, want) {
			t.Errorf("the resumed conversation lacks %.80q: %.600q", want, conv)
		}
	}
	if last.Turn.ToolResults != 1 || len(last.Turn.Messages) <= len(first.Turn.Messages)+2 {
		t.Errorf("resumed conversation: %d messages, %d tool results; the first had %d messages",
			len(last.Turn.Messages), last.Turn.ToolResults, len(first.Turn.Messages))
	}
	args, err := os.ReadFile(filepath.Join(r.Dir, r.ID, "agent-home", "worker", ".local", "share", "opencode", "opencode.db"))
	if err != nil || !bytes.Contains(args, []byte(rs[0].SessionID)) {
		t.Errorf("the session is not in the role's private home: %v", err)
	}
}

func TestOpenCodeMaxTurns(t *testing.T) {
	bin := requireAgent(t, "opencode", "opencode")
	s := opencodeStub(t)
	// One step allowed: the write call uses it, the answer needs a second.
	r := runJob(t, "opencode-turns", opencodeAgent(bin, s, map[string]any{"max_turns": 1}), nil)
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].ErrorCode != "MAX_TURNS" || rs[0].CostUSD <= 0 {
		t.Fatalf("responses %s (%+v)", codes(rs), rs)
	}
}

// opencodeProcs lists the pids of processes that carry the marker in
// their environment (command.env).
func opencodeProcs(marker string) []string {
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

func TestOpenCodeTimeoutKillsGroup(t *testing.T) {
	bin := requireAgent(t, "opencode", "opencode")
	s := opencodeStub(t)
	s.Fail(modelstub.Failure{Delay: 2 * time.Minute})
	marker := fmt.Sprintf("opencode-slow-%d-%d", os.Getpid(), time.Now().UnixNano())
	agentCfg := opencodeAgent(bin, s, nil)
	agentCfg["command"].(map[string]any)["env"].(map[string]any)["LOGIST_TEST_MARK"] = marker
	// Watch for OpenCode while the job runs, so the final check is known
	// to see it when it is there.
	var seen atomic.Bool
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if len(opencodeProcs(marker)) > 0 {
				seen.Store(true)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	// OpenCode needs a few seconds to start on a busy machine; the call
	// is cut off while it waits for the model (or, on a very slow day,
	// before it asked).
	r := runJob(t, "opencode-slow", agentCfg, opencodeLimits(3, 10))
	close(stop)
	<-done
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].Status != "TIMEOUT" {
		t.Fatalf("responses %s", codes(rs))
	}
	if !seen.Load() {
		t.Error("opencode was never seen running")
	}
	if n := len(opencodeMain(s)); n > 1 {
		t.Errorf("%d model requests; want at most the one that hung", n)
	} else if n == 0 {
		t.Log("opencode was killed before its first model request")
	}
	if left := opencodeProcs(marker); len(left) > 0 {
		t.Errorf("processes left running after the timeout: %v", left)
	}
}
