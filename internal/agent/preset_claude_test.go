package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
)

func claudeSample(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "presets", "claude-code", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// argAfter is the value following flag in args ("" if absent).
func argAfter(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func claudeInvocation(t *testing.T) *Invocation {
	dir := t.TempDir()
	return &Invocation{Program: "/bin/claude", Model: "claude-sonnet-4-5", SystemPrompt: "You are the Worker.",
		Prompt: "## Task\nDo it.", Schema: []byte(`{"type":"object"}`), SchemaFile: filepath.Join(dir, "s.json"),
		Workspace: filepath.Join(dir, "ws"), Home: filepath.Join(dir, "home"), CallDir: dir,
		BaseURL: "http://127.0.0.1:9/v1/", MaxTurns: 7, Env: map[string]string{}}
}

func TestClaudeBuild(t *testing.T) {
	p, ok := LookupPreset("claude-code")
	if !ok || p.Program != "claude" {
		t.Fatalf("preset claude-code not registered: %+v", p)
	}
	inv := claudeInvocation(t)
	inv.ResumeSession = "0b4f3a4e-7f55-4c4e-9d7e-2b8f6f5f1a11"
	if err := p.Build(inv); err != nil {
		t.Fatal(err)
	}
	a := inv.Args
	if a[0] != "-p" || a[1] != inv.Prompt {
		t.Errorf("args start %q, want -p PROMPT", a[:2])
	}
	for flag, want := range map[string]string{"--output-format": "json", "--permission-mode": "acceptEdits",
		"--permission-prompts": "none", "--json-schema": `{"type":"object"}`, "--append-system-prompt": "You are the Worker.",
		"--model": "claude-sonnet-4-5", "--max-turns": "7"} {
		if got := argAfter(a, flag); got != want {
			t.Errorf("%s %q, want %q (args %q)", flag, got, want, a)
		}
	}
	// No transcript in the private home: a cold start, not a failed resume.
	if slices.Contains(a, "--resume") {
		t.Errorf("--resume without a transcript: %q", a)
	}
	want := map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "CLAUDE_CODE_MAX_RETRIES": "0",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1"}
	for k, v := range want {
		if inv.Env[k] != v {
			t.Errorf("env %s=%q, want %q", k, inv.Env[k], v)
		}
	}

	// With the transcript claude keeps, the session is resumed.
	proj := filepath.Join(inv.Home, ".claude", "projects", "-tmp-ws")
	if err := os.MkdirAll(proj, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, inv.ResumeSession+".jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inv.Env = map[string]string{}
	if err := p.Build(inv); err != nil {
		t.Fatal(err)
	}
	if got := argAfter(inv.Args, "--resume"); got != inv.ResumeSession {
		t.Errorf("--resume %q, want %q", got, inv.ResumeSession)
	}
}

func TestClaudeBuildAwkwardPrompts(t *testing.T) {
	p, _ := LookupPreset("claude-code")
	inv := claudeInvocation(t)
	inv.Prompt = "--help me"
	inv.Model, inv.MaxTurns, inv.BaseURL = "", 0, ""
	if err := p.Build(inv); err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(inv.Args[1], "-") || strings.TrimSpace(inv.Args[1]) != "--help me" {
		t.Errorf("a prompt starting with - must not look like an option: %q", inv.Args[1])
	}
	for _, f := range []string{"--model", "--max-turns", "--resume"} {
		if slices.Contains(inv.Args, f) {
			t.Errorf("%s without a value to pass: %q", f, inv.Args)
		}
	}
	if _, set := inv.Env["ANTHROPIC_BASE_URL"]; set {
		t.Error("ANTHROPIC_BASE_URL set without base_url")
	}

	// Longer than one argv string may be: the prompt goes through a file.
	inv = claudeInvocation(t)
	inv.Prompt = strings.Repeat("x", maxPromptArg+1)
	if err := p.Build(inv); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(inv.CallDir, "prompt.md")
	if b, err := os.ReadFile(f); err != nil || string(b) != inv.Prompt {
		t.Fatalf("prompt file: %v", err)
	}
	if !strings.Contains(inv.Args[1], f) || len(inv.Args[1]) > 1000 || argAfter(inv.Args, "--add-dir") != inv.CallDir {
		t.Errorf("long prompt args: %.200q", inv.Args)
	}
}

func TestClaudeParseSamples(t *testing.T) {
	cases := []struct {
		file      string
		exit      int
		code      string // "" = success
		transient bool
	}{
		{"success.json", 0, "", false},
		{"auth_401.json", 1, codes.AuthFailed, false},
		{"not_logged_in.json", 1, codes.AuthFailed, false},
		{"rate_limit_429.json", 1, codes.RateLimited, true},
		{"server_500.json", 1, codes.APIError, true},
		{"overloaded_529.json", 1, codes.APIError, true},
		{"server_500_after_tool.json", 1, codes.APIError, true},
		// A broken stream, then a broken non-streaming fallback.
		{"cut_twice.json", 1, codes.APIError, true},
		{"malformed_twice.json", 1, codes.APIError, true},
		{"max_turns.json", 1, codes.MaxTurns, false},
		{"budget.json", 1, codes.AgentBudget, false},
		{"not_json_answer.json", 0, "", false},
		// The exit-status-0 traps: an API error is never an answer.
		{"api_error_exit0.json", 0, codes.RateLimited, true},
		{"api_error_not_flagged.json", 0, codes.APIError, true},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			p, err := claudeParse(&RunOutput{Stdout: claudeSample(t, c.file), ExitCode: c.exit})
			if err != nil {
				t.Fatal(err)
			}
			if p.SessionID == "" {
				t.Error("no session id")
			}
			if c.code == "" {
				if p.Err != nil {
					t.Fatalf("error %v, want success", p.Err)
				}
				return
			}
			if p.Err == nil {
				t.Fatalf("answer %q, want error %s", p.Answer, c.code)
			}
			if p.Err.Code != c.code || p.Err.Transient != c.transient {
				t.Errorf("error %s transient=%v (%s), want %s transient=%v", p.Err.Code, p.Err.Transient, p.Err.Msg, c.code, c.transient)
			}
			if len(p.Answer) != 0 {
				t.Errorf("a failure has an answer: %q", p.Answer)
			}
		})
	}
}

func TestClaudeParseSuccess(t *testing.T) {
	p, err := claudeParse(&RunOutput{Stdout: claudeSample(t, "success.json")})
	if err != nil || p.Err != nil {
		t.Fatal(err, p.Err)
	}
	// The answer is the schema-validated structured_output.
	var ans map[string]any
	if err := json.Unmarshal(p.Answer, &ans); err != nil || ans["action"] != "COMPLETED" {
		t.Errorf("answer %q: %v", p.Answer, err)
	}
	if !p.CostReported || p.CostUSD < 0.0085 || p.CostUSD > 0.0086 {
		t.Errorf("cost %v reported=%v, want 0.00852 reported", p.CostUSD, p.CostReported)
	}
	// Two requests of 1200 input (200 of them cached) and 80 output tokens.
	if tk := p.Tokens; tk == nil || tk.Input != 2400 || tk.Cache != 400 || tk.Output != 160 {
		t.Errorf("tokens %+v, want input 2400 (cache 400), output 160", p.Tokens)
	}
	if p.SessionID != "cf1f8ab4-ca7b-43f1-894a-0a971e4dbfaa" || p.Turns != 3 || p.Model != "claude-sonnet-4-5" {
		t.Errorf("session %q turns %d model %q", p.SessionID, p.Turns, p.Model)
	}

	// Without structured_output the result text is the answer.
	p, _ = claudeParse(&RunOutput{Stdout: claudeSample(t, "not_json_answer.json")})
	if string(p.Answer) != "plain-text-not-json" {
		t.Errorf("answer %q", p.Answer)
	}
}

func TestClaudeParseUnpricedModel(t *testing.T) {
	// A model claude does not price (behind a gateway) reports cost 0 with
	// tokens spent: the price table decides instead.
	var m map[string]any
	if err := json.Unmarshal(claudeSample(t, "success.json"), &m); err != nil {
		t.Fatal(err)
	}
	m["total_cost_usd"] = 0
	b, _ := json.Marshal(m)
	p, err := claudeParse(&RunOutput{Stdout: b})
	if err != nil {
		t.Fatal(err)
	}
	if p.CostReported || p.Tokens == nil || p.Tokens.Output != 160 {
		t.Errorf("cost reported=%v tokens %+v", p.CostReported, p.Tokens)
	}
}

func TestClaudeParseWithoutResult(t *testing.T) {
	p, err := claudeParse(&RunOutput{Stderr: claudeSample(t, "resume_missing.stderr.txt"), ExitCode: 1})
	if err != nil || p.Err == nil || p.Err.Code != codes.AgentFailed || p.Err.Transient {
		t.Errorf("unknown session: %+v %v", p, err)
	}
	if _, err := claudeParse(&RunOutput{Stdout: []byte("Segmentation fault\n"), ExitCode: 139}); err == nil {
		t.Error("output without a result object parsed")
	}
}

// TestClaudeErrorText classifies results that carry only the error text
// (is_error false, no api_error_* fields: the exit-status-0 trap).
func TestClaudeErrorText(t *testing.T) {
	for _, c := range []struct {
		text, code string
		transient  bool
	}{
		{"API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit", codes.RateLimited, true},
		{"API Error: 529 Overloaded. This is a server-side issue", codes.APIError, true},
		{"API Error: Connection to the API was lost (ECONNRESET).", codes.APIError, true},
		{`API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`, codes.APIError, false},
		{"Invalid API key · Fix external API key", codes.AuthFailed, false},
		{"Not logged in · Please run /login", codes.AuthFailed, false},
	} {
		b, _ := json.Marshal(map[string]any{"type": "result", "subtype": "success", "is_error": false, "result": c.text, "session_id": "s"})
		p, err := claudeParse(&RunOutput{Stdout: b})
		if err != nil || p.Err == nil || p.Err.Code != c.code || p.Err.Transient != c.transient {
			t.Errorf("%q: %+v %v, want %s transient=%v", c.text, p.Err, err, c.code, c.transient)
		}
	}
	// An answer is an answer, even one that talks about API errors.
	b, _ := json.Marshal(map[string]any{"type": "result", "subtype": "success", "is_error": false,
		"result": `{"action":"STUCK","evidence_files":[],"summary_for_supervisor":"API Error: the tests' mock server is down"}`})
	if p, err := claudeParse(&RunOutput{Stdout: b}); err != nil || p.Err != nil {
		t.Errorf("answer taken for an error: %+v %v", p.Err, err)
	}
}
