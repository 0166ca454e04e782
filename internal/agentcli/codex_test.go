package agentcli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/modelstub"
)

// Codex CLI against the OpenAI Responses stub, through logistd.

// codexUsage is what the stub reports per reply. gpt-5.5 is in Codex's
// own model catalog (so it offers its apply_patch tool) and in
// prices.json ($5 in, $0.50 cached, $30 out per million tokens).
var codexUsage = modelstub.Usage{Input: 1200, Output: 80, Cached: 200}

const codexModel = "gpt-5.5"

func codexStub(t *testing.T, answers ...string) *modelstub.Server {
	t.Helper()
	opts := modelstub.Options{Write: modelstub.FileWrite{Path: "hello.txt", Content: "hello from the stub\n"},
		Answer: answer("hello.txt"), Usage: codexUsage}
	if len(answers) > 0 {
		opts.Answers = answers
	}
	return startStub(t, opts)
}

var (
	codexSandboxOnce sync.Once
	codexSandboxArgs []string
	codexSandboxNote string
)

// codexSandbox probes whether Codex can build its Linux sandbox
// (bubblewrap in a user namespace) here: hosts that forbid unprivileged
// user namespaces (Ubuntu 24.04's AppArmor default, some containers)
// cannot, and there every apply_patch would fail. On such hosts the tests
// run Codex with the documented override and say so.
func codexSandbox(t *testing.T, bin string) []string {
	codexSandboxOnce.Do(func() {
		dir := t.TempDir()
		home := filepath.Join(dir, "home")
		os.MkdirAll(home, 0o700)
		cmd := exec.Command(bin, "sandbox", "-c", `sandbox_mode="workspace-write"`, "--", "/bin/sh", "-c", "echo ok > probe.txt")
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home}
		out, err := cmd.CombinedOutput()
		if b, _ := os.ReadFile(filepath.Join(dir, "probe.txt")); err == nil && string(b) == "ok\n" {
			return
		}
		codexSandboxArgs = []string{"-c", `sandbox_mode="danger-full-access"`}
		codexSandboxNote = fmt.Sprintf("CODEX SANDBOX UNAVAILABLE on this host (%v: %s); running with -c sandbox_mode=\"danger-full-access\"", err, codexLastLines(string(out), 3))
	})
	if codexSandboxNote != "" {
		t.Log(codexSandboxNote)
	}
	return codexSandboxArgs
}

func codexLastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], " | ")
}

func codexAgent(t *testing.T, bin string, s *modelstub.Server, extra map[string]any) map[string]any {
	// --strict-config: Codex rejects config.toml keys it does not know,
	// so a key Logist relies on (retries off, ...) cannot silently lapse.
	args := append([]string{"--strict-config"}, codexSandbox(t, bin)...)
	cmd := map[string]any{"preset": "codex", "program": bin, "base_url": s.URL + "/v1", "args": args,
		// The stub takes any key; the daemon's own key (if any) is not used.
		"env": map[string]any{"OPENAI_API_KEY": "sk-stub"}}
	for k, v := range extra {
		cmd[k] = v
	}
	return map[string]any{"provider": "command", "model": codexModel, "command": cmd}
}

func codexLimits(retries int, timeout float64) map[string]any {
	return map[string]any{"limits": map[string]any{"backoff_initial_ms": 10, "max_api_retries": retries, "call_timeout_seconds": timeout}}
}

// codexMain is the main-conversation requests the stub received.
func codexMain(s *modelstub.Server) []modelstub.Logged {
	var out []modelstub.Logged
	for _, l := range s.Requests() {
		if l.Turn != nil && !l.Turn.Side {
			out = append(out, l)
		}
	}
	return out
}

func TestCodexSuccess(t *testing.T) {
	bin := requireAgent(t, "codex", "codex")
	s := codexStub(t)
	r := runJob(t, "codex-ok", codexAgent(t, bin, s, nil), nil)
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
	// Two model requests (apply_patch, then the answer): Codex sums the
	// stub's usage; Logist prices it, 2000×$5 + 400×$0.50 + 160×$30 per
	// million tokens.
	if tk := resp.Tokens; tk == nil || tk.Input != 2*codexUsage.Input || tk.Output != 2*codexUsage.Output || tk.Cache != 2*codexUsage.Cached {
		t.Errorf("tokens %+v", resp.Tokens)
	}
	if resp.CostUSD < 0.01499 || resp.CostUSD > 0.01501 {
		t.Errorf("cost %v, want 0.015", resp.CostUSD)
	}
	main := codexMain(s)
	if len(main) != 2 {
		t.Fatalf("%d main requests, want 2", len(main))
	}
	for _, l := range s.Requests() {
		if l.Turn == nil {
			t.Errorf("unexpected request %s %s", l.Method, l.Path)
		}
	}
	first, second := main[0], main[1]
	// Codex's own apply_patch (a freeform tool) wrote the file; its
	// result came back in the second request.
	var tools []string
	for _, tl := range first.Turn.Tools {
		tools = append(tools, tl.Name)
	}
	if !strings.Contains(","+strings.Join(tools, ",")+",", ",apply_patch,") {
		t.Errorf("tools offered: %v", tools)
	}
	if first.Reply.ToolCall == nil || first.Reply.ToolCall.Name != "apply_patch" || second.Turn.ToolResults != 1 {
		t.Errorf("tool call %+v, tool results in the second request %d", first.Reply.ToolCall, second.Turn.ToolResults)
	}
	// The role's system prompt went in as developer instructions, the
	// answer schema as the strict response format, the session id as
	// the thread-id header.
	if !strings.Contains(first.Turn.System, "COMPLETED") || !strings.Contains(first.Turn.System, "evidence_files") {
		t.Errorf("system prompt not sent: %.300q", first.Turn.System)
	}
	var body struct {
		Text struct {
			Format struct {
				Type   string         `json:"type"`
				Strict bool           `json:"strict"`
				Schema map[string]any `json:"schema"`
			} `json:"format"`
		} `json:"text"`
	}
	if err := json.Unmarshal(first.Body, &body); err != nil || body.Text.Format.Type != "json_schema" || !body.Text.Format.Strict || body.Text.Format.Schema["properties"] == nil {
		t.Errorf("answer schema not sent as text.format: %v %+v", err, body.Text.Format)
	}
	if h := first.Header.Get("Thread-Id"); h != resp.SessionID {
		t.Errorf("thread-id header %q, session recorded %q", h, resp.SessionID)
	}
	if a := first.Header.Get("Authorization"); a != "Bearer sk-stub" {
		t.Errorf("authorization %q", a)
	}
	// Writes in the workspace only, unless this host cannot build the
	// sandbox (see codexSandbox).
	var meta struct {
		SandboxMode string `json:"sandbox_mode"`
	}
	json.Unmarshal([]byte(first.Header.Get("X-Codex-Turn-Metadata")), &meta)
	if want := "workspace-write"; codexSandboxArgs == nil && meta.SandboxMode != want {
		t.Errorf("sandbox mode %q, want %q", meta.SandboxMode, want)
	}
}

func TestCodexAuthFailure(t *testing.T) {
	bin := requireAgent(t, "codex", "codex")
	s := codexStub(t)
	// Codex runs with request_max_retries = 0; spares in case it retries.
	s.Fail(modelstub.Failure{Status: 401}, modelstub.Failure{Status: 401}, modelstub.Failure{Status: 401})
	r := runJob(t, "codex-auth", codexAgent(t, bin, s, nil), nil)
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].ErrorCode != "AUTH_FAILED" {
		t.Fatalf("responses %s", codes(rs))
	}
	if s.MainTurns() != 1 {
		t.Errorf("a 401 was asked again: %d requests", s.MainTurns())
	}
}

func TestCodexTransientAPIErrors(t *testing.T) {
	bin := requireAgent(t, "codex", "codex")
	s := codexStub(t)
	s.Fail(modelstub.Failure{Status: 429, RetryAfter: "1"}, modelstub.Failure{Status: 500}, modelstub.Failure{Status: 503})
	r := runJob(t, "codex-transient", codexAgent(t, bin, s, nil), codexLimits(4, 120))
	r.requireStatus(t, "SUCCESS")
	// Each failure is Logist's to retry (Codex's own retries are off),
	// and each is on the record.
	if got, want := codes(r.responses()), "ERROR:RATE_LIMITED ERROR:API_ERROR ERROR:API_ERROR SUCCESS"; got != want {
		t.Errorf("responses %s, want %s", got, want)
	}
	if s.MainTurns() != 5 {
		t.Errorf("%d main requests, want 5 (3 failures, apply_patch, answer)", s.MainTurns())
	}
	if r.workspaceFile(t, "hello.txt") != "hello from the stub\n" {
		t.Error("hello.txt not written")
	}
}

func TestCodexBrokenStreams(t *testing.T) {
	bin := requireAgent(t, "codex", "codex")
	s := codexStub(t)
	s.Fail(modelstub.Failure{Cut: true}, modelstub.Failure{Malformed: true})
	r := runJob(t, "codex-broken", codexAgent(t, bin, s, nil), codexLimits(3, 120))
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	// A broken stream is a retake: nothing of it is a response; the
	// errors are on the record and the same turn is asked again.
	if got := codes(rs); got != "SUCCESS" {
		t.Errorf("responses %s, want SUCCESS", got)
	}
	var streamErrs []string
	for _, rec := range r.Records {
		if rec.Error != nil && rec.Error.Code == "AGENT_STREAM_FAIL" {
			streamErrs = append(streamErrs, rec.Error.Message)
		}
	}
	if len(streamErrs) != 2 || !strings.HasPrefix(streamErrs[0], "STREAM_CUT: ") || !strings.HasPrefix(streamErrs[1], "STREAM_CUT: ") {
		t.Errorf("stream errors on the record: %q", streamErrs)
	}
	for _, resp := range rs {
		if resp.Status != "SUCCESS" && strings.Contains(resp.RawResponse, `"action"`) {
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
	if !cut || !malformed || s.MainTurns() != 4 {
		t.Errorf("cut %v malformed %v, %d main requests (want 4)", cut, malformed, s.MainTurns())
	}
}

func TestCodexSessionContinues(t *testing.T) {
	bin := requireAgent(t, "codex", "codex")
	retry := `{"action":"RETRY","evidence_files":["hello.txt"],"summary_for_supervisor":"hello.txt is there; one more pass is needed."}`
	s := codexStub(t, retry, answer("hello.txt"))
	r := runJob(t, "codex-session", codexAgent(t, bin, s, nil), nil)
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	if len(rs) != 2 || rs[0].Action != "RETRY" || rs[1].Action != "COMPLETED" {
		t.Fatalf("responses %s", codes(rs))
	}
	if rs[0].SessionID == "" || rs[1].SessionID != rs[0].SessionID {
		t.Errorf("sessions %q then %q: not continued", rs[0].SessionID, rs[1].SessionID)
	}
	main := codexMain(s)
	if len(main) != 3 {
		t.Fatalf("%d main requests, want 3 (apply_patch, RETRY, COMPLETED)", len(main))
	}
	// The second call ran `codex exec resume ID`: the same thread id, and
	// the whole first conversation (its prompt, the apply_patch call and
	// its result, the RETRY answer) ahead of the new prompt.
	first, last := main[0], main[2]
	if h := last.Header.Get("Thread-Id"); h == "" || h != first.Header.Get("Thread-Id") || h != rs[0].SessionID {
		t.Errorf("thread-id headers %q, %q; recorded %q", first.Header.Get("Thread-Id"), h, rs[0].SessionID)
	}
	conv := strings.Join(last.Turn.Messages, "\n")
	for _, want := range []string{"Create the file the model asks for", "apply_patch *** Begin Patch", "one more pass is needed"} {
		if !strings.Contains(conv, want) {
			t.Errorf("the resumed conversation lacks %.80q", want)
		}
	}
	if strings.Count(conv, "Create the file the model asks for") < 2 || last.Turn.ToolResults != 1 {
		t.Errorf("the resumed conversation does not hold both prompts and the tool result: %d tool results", last.Turn.ToolResults)
	}
	// The resumed call still asks for the answer schema, and the system
	// prompt is in it once, not once per call.
	if !bytes.Contains(last.Body, []byte(`"codex_output_schema"`)) {
		t.Error("the resumed call has no answer schema")
	}
	if n := strings.Count(last.Turn.System, "evidence_files"); n != strings.Count(first.Turn.System, "evidence_files") {
		t.Errorf("system prompt repeated on resume: %d mentions, first call %d", n, strings.Count(first.Turn.System, "evidence_files"))
	}
	// Codex reports the session's running total; the second response
	// holds only its own request's tokens.
	if tk := rs[1].Tokens; tk == nil || tk.Input != codexUsage.Input || tk.Output != codexUsage.Output || tk.Cache != codexUsage.Cached {
		t.Errorf("tokens of the resumed call %+v, want one request's", rs[1].Tokens)
	}
}

// codexProcs lists the pids of processes that carry the marker in their
// environment (command.env).
func codexProcs(marker string) []string {
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

func TestCodexTimeoutKillsGroup(t *testing.T) {
	bin := requireAgent(t, "codex", "codex")
	s := codexStub(t)
	s.Fail(modelstub.Failure{Delay: 2 * time.Minute})
	marker := fmt.Sprintf("codex-slow-%d-%d", os.Getpid(), time.Now().UnixNano())
	agentCfg := codexAgent(t, bin, s, nil)
	agentCfg["command"].(map[string]any)["env"].(map[string]any)["LOGIST_TEST_MARK"] = marker
	// Watch for codex (the node wrapper and the native binary) while the
	// job runs, so the final check is known to see them when they are
	// there.
	var seen atomic.Int32
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if n := int32(len(codexProcs(marker))); n > seen.Load() {
				seen.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	r := runJob(t, "codex-slow", agentCfg, codexLimits(3, 3))
	close(stop)
	<-done
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].Status != history.StatusTimeout {
		t.Fatalf("responses %s", codes(rs))
	}
	if seen.Load() < 2 {
		t.Errorf("codex was not seen running as wrapper and binary (max %d processes)", seen.Load())
	}
	if left := codexProcs(marker); len(left) > 0 {
		t.Errorf("processes left running after the timeout: %v", left)
	}
}
