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

// Gemini CLI against the Gemini API stub, through logistd. Outside the CI
// set: run with LOGIST_TEST_AGENTS=all (or gemini-cli).

// geminiUsage is what the stub reports per reply (promptTokenCount
// includes the cached tokens, as the Gemini API counts them).
var geminiUsage = modelstub.Usage{Input: 1000, Output: 50, Cached: 200}

// geminiPrice is command.price: Gemini reports no cost, so Logist prices
// the tokens; prices.json has no Gemini models.
var geminiPrice = map[string]any{"input_per_mtok": 0.30, "output_per_mtok": 2.50, "cached_input_per_mtok": 0.03}

func geminiStub(t *testing.T, answers ...string) *modelstub.Server {
	t.Helper()
	opts := modelstub.Options{Write: modelstub.FileWrite{Path: "hello.txt", Content: "hello from the stub\n"},
		Answer: answer("hello.txt"), Usage: geminiUsage}
	if len(answers) > 0 {
		opts.Answers = answers
	}
	return startStub(t, opts)
}

func geminiAgent(bin string, s *modelstub.Server, extra map[string]any) map[string]any {
	cmd := map[string]any{"preset": "gemini-cli", "program": bin, "base_url": s.URL, "price": geminiPrice,
		// The stub takes any key; the daemon's own key (if any) is not used.
		"env": map[string]any{"GEMINI_API_KEY": "stub-gemini-key"}}
	for k, v := range extra {
		cmd[k] = v
	}
	return map[string]any{"provider": "command", "model": "gemini-2.5-flash", "command": cmd}
}

func geminiLimits(retries int, timeout float64) map[string]any {
	return map[string]any{"limits": map[string]any{"backoff_initial_ms": 10, "max_api_retries": retries, "call_timeout_seconds": timeout}}
}

func geminiCodes(rs []*history.Response) string {
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

// geminiMain are the main-conversation requests the stub received.
func geminiMain(s *modelstub.Server) []modelstub.Logged {
	var out []modelstub.Logged
	for _, l := range s.Requests() {
		if l.Turn != nil && !l.Turn.Side {
			out = append(out, l)
		}
	}
	return out
}

func TestGeminiCLISuccess(t *testing.T) {
	bin := requireAgent(t, "gemini-cli", "gemini")
	s := geminiStub(t)
	r := runJob(t, "gemini-ok", geminiAgent(bin, s, nil), nil)
	r.requireStatus(t, "SUCCESS")
	if got := r.workspaceFile(t, "hello.txt"); got != "hello from the stub\n" {
		t.Errorf("hello.txt = %q", got)
	}
	// The CLI's state stays in the private home, not in the workspace.
	for _, f := range []string{".gemini", "GEMINI.md", ".env"} {
		if _, err := os.Stat(filepath.Join(r.Dir, r.ID, "workspace", f)); err == nil {
			t.Errorf("%s left in the workspace", f)
		}
	}
	rs := r.responses()
	if len(rs) != 1 {
		t.Fatalf("responses %s", geminiCodes(rs))
	}
	resp := rs[0]
	if resp.Action != "COMPLETED" || resp.SessionID == "" {
		t.Errorf("response %+v", resp)
	}
	// Two model requests (write_file, then the answer), priced by
	// command.price: 1600×$0.30 + 400×$0.03 + 100×$2.50 per million.
	if tk := resp.Tokens; tk == nil || tk.Input != 2*geminiUsage.Input || tk.Output != 2*geminiUsage.Output || tk.Cache != 2*geminiUsage.Cached {
		t.Errorf("tokens %+v", resp.Tokens)
	}
	if resp.CostUSD < 0.000741 || resp.CostUSD > 0.000743 {
		t.Errorf("cost %v, want 0.000742", resp.CostUSD)
	}
	main := geminiMain(s)
	if len(main) != 2 {
		t.Fatalf("main turns %d, want 2", len(main))
	}
	first := main[0]
	var tools []string
	for _, tl := range first.Turn.Tools {
		tools = append(tools, tl.Name)
	}
	// auto_edit: the write tool is offered, the shell is not.
	if j := strings.Join(tools, ","); !strings.Contains(j, "write_file") || strings.Contains(j, "run_shell_command") {
		t.Errorf("tools offered: %s", j)
	}
	// The role's system prompt (the answer contract) reached the model in
	// the system instruction, after the CLI's own.
	if !strings.Contains(first.Turn.System, "summary_for_supervisor") || !strings.Contains(first.Turn.System, "Gemini CLI") {
		t.Errorf("system instruction lacks the answer contract: …%s", tail(first.Turn.System, 600))
	}
	if k := first.Header.Get("X-Goog-Api-Key"); k != "stub-gemini-key" {
		t.Errorf("api key header %q", k)
	}
	if first.Turn.Model != "gemini-2.5-flash" {
		t.Errorf("model %q", first.Turn.Model)
	}
	// Nothing but the model API was called.
	for _, l := range s.Requests() {
		if l.Turn == nil {
			t.Errorf("unexpected request %s %s", l.Method, l.Path)
		}
	}
}

func TestGeminiCLIAuthFailure(t *testing.T) {
	bin := requireAgent(t, "gemini-cli", "gemini")
	s := geminiStub(t)
	// The CLI does not retry a 401; spares in case it did.
	s.Fail(modelstub.Failure{Status: 401}, modelstub.Failure{Status: 401}, modelstub.Failure{Status: 401})
	r := runJob(t, "gemini-auth", geminiAgent(bin, s, nil), nil)
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].ErrorCode != "AUTH_FAILED" {
		t.Fatalf("responses %s", geminiCodes(rs))
	}
	if n := len(geminiMain(s)); n != 1 {
		t.Errorf("a 401 was asked again: %d requests", n)
	}
}

func TestGeminiCLITransientAPIErrors(t *testing.T) {
	bin := requireAgent(t, "gemini-cli", "gemini")
	s := geminiStub(t)
	s.Fail(modelstub.Failure{Status: 429, RetryAfter: "1"}, modelstub.Failure{Status: 500}, modelstub.Failure{Status: 503})
	start := time.Now()
	r := runJob(t, "gemini-transient", geminiAgent(bin, s, nil), geminiLimits(4, 120))
	r.requireStatus(t, "SUCCESS")
	// general.maxAttempts 1: each failure is Logist's to retry, and each
	// is on the record.
	if got, want := geminiCodes(r.responses()), "ERROR:RATE_LIMITED ERROR:API_ERROR ERROR:API_ERROR SUCCESS"; got != want {
		t.Errorf("responses %s, want %s", got, want)
	}
	if n := len(geminiMain(s)); n != 5 {
		t.Errorf("%d model requests, want 5 (3 failures, write, answer)", n)
	}
	if r.workspaceFile(t, "hello.txt") != "hello from the stub\n" {
		t.Error("hello.txt not written")
	}
	// The CLI's own backoff (5 s doubling) would take far longer.
	t.Logf("four calls in %v", time.Since(start))
}

func TestGeminiCLIBrokenStreams(t *testing.T) {
	bin := requireAgent(t, "gemini-cli", "gemini")
	s := geminiStub(t)
	s.Fail(modelstub.Failure{Cut: true}, modelstub.Failure{Malformed: true})
	r := runJob(t, "gemini-broken", geminiAgent(bin, s, nil), geminiLimits(3, 120))
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	// The cut call is asked again without a response record (partial
	// generation is never recorded); the malformed one is an error on the
	// record.
	if got, want := geminiCodes(rs), "ERROR:API_MALFORMED SUCCESS"; got != want {
		t.Errorf("responses %s, want %s", got, want)
	}
	for _, resp := range rs[:len(rs)-1] {
		if resp.Status == "SUCCESS" || strings.Contains(resp.RawResponse, `"action"`) {
			t.Errorf("partial answer recorded: %+v", resp)
		}
	}
	if !strings.Contains(r.Log, "STREAM_CUT") {
		t.Errorf("the cut stream is not in the log:\n%s", tail(r.Log, 3000))
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

func TestGeminiCLISessionContinues(t *testing.T) {
	bin := requireAgent(t, "gemini-cli", "gemini")
	retry := `{"action":"RETRY","evidence_files":["hello.txt"],"summary_for_supervisor":"hello.txt is there; one more pass is needed."}`
	s := geminiStub(t, retry, answer("hello.txt"))
	r := runJob(t, "gemini-session", geminiAgent(bin, s, nil), nil)
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	if len(rs) != 2 || rs[0].Action != "RETRY" || rs[1].Action != "COMPLETED" {
		t.Fatalf("responses %s", geminiCodes(rs))
	}
	if rs[0].SessionID == "" || rs[1].SessionID != rs[0].SessionID {
		t.Errorf("sessions %q then %q: not continued", rs[0].SessionID, rs[1].SessionID)
	}
	// The second call ran with --resume: the CLI sent the whole first
	// conversation (the task, the write_file call, the RETRY answer)
	// ahead of the new request.
	main := geminiMain(s)
	if len(main) != 3 {
		t.Fatalf("%d main requests, want 3 (write, RETRY, COMPLETED)", len(main))
	}
	first, last := main[0], main[2]
	if !strings.Contains(strings.Join(first.Turn.Messages, "\n"), "Create the file the model asks for") {
		t.Errorf("the first conversation lacks the task: %.300q", first.Turn.Messages)
	}
	conv := strings.Join(last.Turn.Messages, "\n")
	for _, want := range []string{"Create the file the model asks for", "call write_file", "one more pass is needed"} {
		if !strings.Contains(conv, want) {
			t.Errorf("the resumed conversation lacks %.80q", want)
		}
	}
	if len(last.Turn.Messages) <= len(first.Turn.Messages)+2 {
		t.Errorf("resumed conversation has %d messages, the first had %d", len(last.Turn.Messages), len(first.Turn.Messages))
	}
}

func TestGeminiCLIMaxTurns(t *testing.T) {
	bin := requireAgent(t, "gemini-cli", "gemini")
	s := geminiStub(t)
	r := runJob(t, "gemini-turns", geminiAgent(bin, s, map[string]any{"max_turns": 1}), nil)
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	// The first turn (write_file) was paid for: stream-json's result
	// carries its tokens although the run failed.
	if len(rs) != 1 || rs[0].ErrorCode != "MAX_TURNS" || rs[0].CostUSD <= 0 {
		t.Fatalf("responses %s (%+v)", geminiCodes(rs), rs)
	}
}

// geminiProcs lists the pids of processes that carry the marker in their
// environment (command.env).
func geminiProcs(marker string) []string {
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

func TestGeminiCLITimeoutKillsGroup(t *testing.T) {
	bin := requireAgent(t, "gemini-cli", "gemini")
	s := geminiStub(t)
	s.Fail(modelstub.Failure{Delay: 2 * time.Minute})
	marker := fmt.Sprintf("gemini-slow-%d-%d", os.Getpid(), time.Now().UnixNano())
	agentCfg := geminiAgent(bin, s, nil)
	agentCfg["command"].(map[string]any)["env"].(map[string]any)["LOGIST_TEST_MARK"] = marker
	// Watch for the CLI (gemini relaunches itself: two node processes)
	// while the job runs, so the final check is known to see them.
	var most atomic.Int32
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if n := int32(len(geminiProcs(marker))); n > most.Load() {
				most.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	r := runJob(t, "gemini-slow", agentCfg, geminiLimits(3, 10))
	close(stop)
	<-done
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].Status != "TIMEOUT" {
		t.Fatalf("responses %s", geminiCodes(rs))
	}
	if most.Load() == 0 {
		t.Error("gemini was never seen running")
	}
	if len(geminiMain(s)) == 0 {
		t.Error("the call was killed before it reached the model")
	}
	if left := geminiProcs(marker); len(left) > 0 {
		t.Errorf("processes left running after the timeout: %v", left)
	}
}
