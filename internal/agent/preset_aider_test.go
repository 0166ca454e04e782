package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
)

// The aider samples are CONSTRUCTED from aider's documented output (the
// usage line of base_coder.py, format_tokens of utils.py, the error
// descriptions of exceptions.py), not captured: aider is not installable
// here (PyPI unreachable). See docs/presets/aider.md.

const aiderSuccess = `Aider v0.86.1
Main model: gpt-4.1 with diff edit format
Weak model: gpt-4.1-mini
Git repo: none
Repo-map: disabled
Added /jobs/j/requests/000001.d/logist-instructions.md to the chat (read-only).

hello.txt
` + "```" + `
<<<<<<< SEARCH
=======
hello from the model
>>>>>>> REPLACE
` + "```" + `

{"action": "COMPLETED", "evidence_files": ["hello.txt"], "summary_for_supervisor": "Created hello.txt."}

Tokens: 2.1k sent, 1.0k cache hit, 176 received. Cost: $0.0062 message, $0.0062 session.

Applied edit to hello.txt
`

func TestAiderParseSuccess(t *testing.T) {
	p, err := aiderParse(&RunOutput{Stdout: []byte(aiderSuccess)})
	if err != nil || p.Err != nil {
		t.Fatal(err, p.Err)
	}
	want := `{"action": "COMPLETED", "evidence_files": ["hello.txt"], "summary_for_supervisor": "Created hello.txt."}`
	if string(p.Answer) != want {
		t.Errorf("answer %q", p.Answer)
	}
	if !p.CostReported || p.CostUSD != 0.0062 {
		t.Errorf("cost %v reported %v", p.CostUSD, p.CostReported)
	}
	if tk := p.Tokens; tk == nil || tk.Input != 2100 || tk.Cache != 1000 || tk.Output != 176 {
		t.Errorf("tokens %+v", p.Tokens)
	}
	if p.Model != "gpt-4.1" || p.SessionID != aiderSession || p.Turns != 1 {
		t.Errorf("model %q session %q turns %d", p.Model, p.SessionID, p.Turns)
	}
}

// A reflection (a lint fix, files the model mentioned) makes a second
// reply: the answer is in the last one, the cost is the session's.
func TestAiderParseLastReplyAndSessionCost(t *testing.T) {
	out := `Model: claude-sonnet-4-5 with diff edit format
{"action": "RETRY", "evidence_files": [], "summary_for_supervisor": "first"}
Tokens: 950 sent, 12k cache write, 40 received. Cost: $0.05 message, $0.05 session.
Attempt to fix lint errors? (Y)es/(N)o [Yes]: y
The fix is in place.
{"action": "COMPLETED", "evidence_files": ["a.go"], "summary_for_supervisor": "second"}
Tokens: 13k sent, 300 received. Cost: $0.04 message, $0.09 session.
`
	p, err := aiderParse(&RunOutput{Stdout: []byte(out)})
	if err != nil || p.Err != nil {
		t.Fatal(err, p.Err)
	}
	if !strings.Contains(string(p.Answer), `"second"`) {
		t.Errorf("answer %q", p.Answer)
	}
	if p.CostUSD != 0.09 || p.Tokens.Input != 13950 || p.Tokens.Output != 340 || p.Turns != 2 || p.Model != "claude-sonnet-4-5" {
		t.Errorf("cost %v tokens %+v turns %d model %q", p.CostUSD, p.Tokens, p.Turns, p.Model)
	}
}

func TestAiderParseErrors(t *testing.T) {
	cases := map[string]struct {
		out       string
		code      string
		transient bool
	}{
		"auth": {`Main model: gpt-4.1 with diff edit format
litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided: sk-stub.
The API provider is not able to authenticate you. Check your API key.
`, codes.AuthFailed, false},
		"rate limit": {`litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached
The API provider has rate limited you. Try again later or check your quotas.
Retrying in 0.2 seconds...
litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached
The API provider has rate limited you. Try again later or check your quotas.
`, codes.RateLimited, true},
		"overloaded": {`litellm.InternalServerError: AnthropicException - Overloaded
The API provider's servers are down or overloaded.
`, codes.APIError, true},
		"context": {`Model gpt-4.1 has hit a token limit!
`, codes.MaxTokens, false},
	}
	for name, c := range cases {
		p, err := aiderParse(&RunOutput{Stdout: []byte(c.out)})
		if err != nil || p.Err == nil || p.Err.Code != c.code || p.Err.Transient != c.transient {
			t.Errorf("%s: %v %+v", name, err, p)
		}
	}
}

// An error aider retried past is not a failure.
func TestAiderParseRetriedThenAnswered(t *testing.T) {
	out := `litellm.InternalServerError: AnthropicException - Overloaded
The API provider's servers are down or overloaded.
Retrying in 0.2 seconds...
{"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "ok"}
Tokens: 1.5k sent, 20 received. Cost: $0.01 message, $0.01 session.
`
	p, err := aiderParse(&RunOutput{Stdout: []byte(out)})
	if err != nil || p.Err != nil || !strings.Contains(string(p.Answer), `"ok"`) {
		t.Fatalf("%v %+v", err, p)
	}
}

// Without an answer object the reply goes to the runner, which reports
// it as an invalid answer.
func TestAiderParseNoAnswer(t *testing.T) {
	out := "I created the file.\nTokens: 500 sent, 10 received.\n"
	p, err := aiderParse(&RunOutput{Stdout: []byte(out)})
	if err != nil || p.Err != nil || string(p.Answer) != "I created the file." || p.CostReported {
		t.Fatalf("%v %+v", err, p)
	}
	if _, err := aiderParse(&RunOutput{ExitCode: 1}); err == nil {
		t.Error("no error for a crash without output")
	}
}

func TestAiderBuild(t *testing.T) {
	dir := t.TempDir()
	inv := &Invocation{Model: "gpt-4.1", SystemPrompt: "Answer with JSON.", Prompt: "-do it", Workspace: filepath.Join(dir, "ws"),
		Home: filepath.Join(dir, "home"), CallDir: filepath.Join(dir, "call"), BaseURL: "http://127.0.0.1:9/v1",
		ResumeSession: aiderSession, Env: map[string]string{}}
	for _, d := range []string{inv.Workspace, inv.Home, inv.CallDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := aiderBuild(inv); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"--yes-always", "--no-auto-commits", "--no-pretty", "--no-stream", "--no-check-update", "--analytics-disable",
		"--no-git", "--restore-chat-history"} {
		if !slices.Contains(inv.Args, f) {
			t.Errorf("%s missing from %q", f, inv.Args)
		}
	}
	arg := func(flag string) string {
		i := slices.Index(inv.Args, flag)
		if i < 0 || i+1 >= len(inv.Args) {
			t.Fatalf("%s missing from %q", flag, inv.Args)
		}
		return inv.Args[i+1]
	}
	if b, _ := os.ReadFile(arg("--message-file")); string(b) != "-do it" {
		t.Errorf("message %q", b)
	}
	if b, _ := os.ReadFile(arg("--read")); !strings.Contains(string(b), "Answer with JSON.") {
		t.Errorf("instructions %q", b)
	}
	if arg("--model") != "gpt-4.1" || !strings.HasPrefix(arg("--chat-history-file"), inv.Home) || inv.Env["OPENAI_API_BASE"] != inv.BaseURL {
		t.Errorf("args %q env %v", inv.Args, inv.Env)
	}
	// A git workspace is used as such; a cold start restores nothing.
	if err := os.Mkdir(filepath.Join(inv.Workspace, ".git"), 0o700); err != nil {
		t.Fatal(err)
	}
	inv.ResumeSession = ""
	if err := aiderBuild(inv); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(inv.Args, "--no-git") || slices.Contains(inv.Args, "--restore-chat-history") {
		t.Errorf("args %q", inv.Args)
	}
}
