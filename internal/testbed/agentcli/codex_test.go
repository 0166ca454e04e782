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
	"testing"

	"github.com/logist/logist/internal/testbed/modelstub"
)

// Codex CLI against the OpenAI Responses stub, through logistd.

// codex: gpt-5.5 is in Codex's own model catalog (so it offers its
// apply_patch tool) and in prices.json ($5 in, $0.50 cached, $30 out per
// million tokens).
var codex = &cliProgram{name: "codex", bin: "codex", id: "codex", model: "gpt-5.5", path: "/v1",
	keyVar: "OPENAI_API_KEY", key: "sk-stub", usage: modelstub.Usage{Input: 1200, Output: 80, Cached: 200}, write: "apply_patch",
	command: func(t *testing.T, bin string) map[string]any {
		// --strict-config: Codex rejects config.toml keys it does not know,
		// so a key Logist relies on (retries off, ...) cannot silently lapse.
		return map[string]any{"args": append([]string{"--strict-config"}, codexSandbox(t, bin)...)}
	}}

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
		if err := os.MkdirAll(home, 0o700); err != nil {
			t.Fatal(err)
		}
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

func TestCodexSuccess(t *testing.T) {
	// Codex sums the stub's usage; Logist prices it, 2000×$5 + 400×$0.50
	// + 160×$30 per million tokens: $0.015.
	o := codex.succeeds(t, [2]float64{0.01499, 0.01501})
	first, second := o.main[0], o.main[1]
	// Codex's own apply_patch (a freeform tool) wrote the file; its
	// result came back in the second request.
	if j := toolList(first); !strings.Contains(","+j+",", ",apply_patch,") {
		t.Errorf("tools offered: %s", j)
	}
	if second.Turn.ToolResults != 1 {
		t.Errorf("tool results in the second request %d", second.Turn.ToolResults)
	}
	// The role's system prompt went in as developer instructions, the
	// answer schema as the strict response format, the session id as
	// the thread-id header.
	requireSystem(t, first, "COMPLETED", "evidence_files")
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
	requireHeader(t, first, "Thread-Id", o.rs[0].SessionID)
	requireHeader(t, first, "Authorization", "Bearer sk-stub")
	// Contained (every job here is), Codex defers to Logist's sandbox:
	// its own bubblewrap cannot nest in Logist's, which forbids new user
	// namespaces.
	var meta struct {
		SandboxMode string `json:"sandbox_mode"`
	}
	// A missing header leaves meta empty, which the check says when it matters.
	_ = json.Unmarshal([]byte(first.Header.Get("X-Codex-Turn-Metadata")), &meta)
	if want := "danger-full-access"; meta.SandboxMode != want {
		t.Errorf("sandbox mode %q, want %q (run %s)", meta.SandboxMode, want, o.r.Manifest.Run.Sandbox)
	}
}

func TestCodexAuthFailure(t *testing.T) {
	// Codex runs with request_max_retries = 0.
	codex.authFailure(t)
}

func TestCodexTransientAPIErrors(t *testing.T) {
	// Codex's own retries are off.
	codex.transientErrors(t, 503)
}

func TestCodexBrokenStreams(t *testing.T) {
	// A broken stream is a retake: nothing of it is a response; the
	// errors are on the record and the same turn is asked again.
	o := codex.brokenStreams(t, "SUCCESS")
	var streamErrs []string
	for _, rec := range o.r.Records {
		if rec.Error != nil && rec.Error.Code == "AGENT_STREAM_FAIL" {
			streamErrs = append(streamErrs, rec.Error.Message)
		}
	}
	if len(streamErrs) != 2 || !strings.HasPrefix(streamErrs[0], "STREAM_CUT: ") || !strings.HasPrefix(streamErrs[1], "STREAM_CUT: ") {
		t.Errorf("stream errors on the record: %q", streamErrs)
	}
	if len(o.main) != 4 {
		t.Errorf("%d main requests, want 4", len(o.main))
	}
}

func TestCodexSessionContinues(t *testing.T) {
	// The second call ran `codex exec resume ID`: the same thread id, and
	// the apply_patch call's result in the conversation.
	o := codex.sessionContinues(t, "apply_patch *** Begin Patch", "Thread-Id")
	first, last := o.main[0], o.main[2]
	conv := strings.Join(last.Turn.Messages, "\n")
	if strings.Count(conv, taskText) < 2 || last.Turn.ToolResults != 1 {
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
	if tk, u := o.rs[1].Tokens, codex.usage; tk == nil || tk.Input != u.Input || tk.Output != u.Output || tk.Cache != u.Cached {
		t.Errorf("tokens of the resumed call %+v, want one request's", o.rs[1].Tokens)
	}
}

// Codex runs as the node wrapper and the native binary: both are watched
// and both must be gone.
func TestCodexTimeoutKillsGroup(t *testing.T) { codex.timeoutKillsGroup(t, 3, 2) }

func TestCodexConnectionRefused(t *testing.T) { codex.connectionRefused(t, refusedBound) }
