package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/codes"
)

func codexSample(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "presets", "codex", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func codexInvocation(t *testing.T) *Invocation {
	dir := t.TempDir()
	call := filepath.Join(dir, "call")
	if err := os.MkdirAll(call, 0o700); err != nil {
		t.Fatal(err)
	}
	return &Invocation{Program: "/bin/codex", Model: "gpt-5.5",
		SystemPrompt: "You are the Worker.\nAnswer with \"action\" <json> & a \\ backslash\ttab \u2028.",
		Prompt:       "## Task\nDo it.", Schema: []byte(`{"type":"object"}`), SchemaFile: filepath.Join(call, "s.json"),
		Workspace: filepath.Join(dir, "ws"), Home: filepath.Join(dir, "home"), CallDir: call,
		BaseURL: "http://127.0.0.1:9/v1/", Env: map[string]string{}}
}

func TestCodexBuild(t *testing.T) {
	p, ok := LookupPreset("codex")
	if !ok || p.Program != "codex" || !slices.Contains(p.EnvAllow, "OPENAI_API_KEY") {
		t.Fatalf("preset codex not registered: %+v", p)
	}
	inv := codexInvocation(t)
	if err := p.Build(inv); err != nil {
		t.Fatal(err)
	}
	a := inv.Args
	want := []string{"exec", "--json", "--skip-git-repo-check", "-C", inv.Workspace, "-m", "gpt-5.5", "--output-schema", inv.SchemaFile, "## Task\nDo it."}
	if !slices.Equal(a, want) {
		t.Errorf("args %q\nwant %q", a, want)
	}
	home := filepath.Join(inv.Home, ".codex")
	if inv.Env["CODEX_HOME"] != home {
		t.Errorf("CODEX_HOME %q", inv.Env["CODEX_HOME"])
	}
	b, err := os.ReadFile(filepath.Join(home, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	for _, line := range []string{
		`model_provider = "logist"`, `approval_policy = "never"`, `sandbox_mode = "workspace-write"`,
		`check_for_update_on_startup = false`, "[model_providers.logist]", `base_url = "http://127.0.0.1:9/v1"`,
		`env_key = "OPENAI_API_KEY"`, `wire_api = "responses"`, "request_max_retries = 0", "stream_max_retries = 0",
		"unbounded_connection_retries = false", "[analytics]\nenabled = false", "[feedback]\nenabled = false",
	} {
		if !strings.Contains(cfg, line) {
			t.Errorf("config.toml lacks %q:\n%s", line, cfg)
		}
	}
	// The system prompt is one TOML basic string that reads back as is.
	var di string
	for _, l := range strings.Split(cfg, "\n") {
		if v, ok := strings.CutPrefix(l, "developer_instructions = "); ok {
			if err := json.Unmarshal([]byte(v), &di); err != nil {
				t.Fatalf("developer_instructions %s: %v", v, err)
			}
		}
	}
	if di != inv.SystemPrompt {
		t.Errorf("developer_instructions %q, want %q", di, inv.SystemPrompt)
	}
	if strings.Contains(cfg, `\/`) {
		t.Error(`config.toml has \/ (not a TOML escape)`)
	}
}

func TestCodexBuildDefaults(t *testing.T) {
	p, _ := LookupPreset("codex")
	inv := codexInvocation(t)
	inv.Model, inv.BaseURL, inv.SystemPrompt, inv.SchemaFile = "", "", "", ""
	inv.Prompt = "--looks like a flag"
	if err := p.Build(inv); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(inv.Args, "-m") || slices.Contains(inv.Args, "--output-schema") {
		t.Errorf("args %q", inv.Args)
	}
	// The prompt stays a positional argument.
	if last := inv.Args[len(inv.Args)-1]; last != "\n--looks like a flag" {
		t.Errorf("prompt argument %q", last)
	}
	b, _ := os.ReadFile(filepath.Join(inv.Home, ".codex", "config.toml"))
	if !strings.Contains(string(b), `base_url = "https://api.openai.com/v1"`) || strings.Contains(string(b), "developer_instructions") {
		t.Errorf("config.toml:\n%s", b)
	}

	// A prompt too long for one argument goes through a file.
	inv = codexInvocation(t)
	inv.Prompt = strings.Repeat("context line\n", 20000)
	if err := p.Build(inv); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(inv.CallDir, "prompt.md")
	if last := inv.Args[len(inv.Args)-1]; len(last) > maxPromptArg || !strings.Contains(last, f) {
		t.Errorf("prompt argument %.200q", last)
	}
	if b, err := os.ReadFile(f); err != nil || string(b) != inv.Prompt {
		t.Errorf("prompt file: %v", err)
	}
}

// codexSession puts the captured session file where Codex keeps it.
func codexSession(t *testing.T, inv *Invocation, id string) {
	dir := filepath.Join(inv.Home, ".codex", "sessions", "2026", "11", "21")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rollout-2026-11-21T19-47-05-"+id+".jsonl"), codexSample(t, "rollout.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCodexBuildResume(t *testing.T) {
	p, _ := LookupPreset("codex")
	const id = "01a1ffa6-5b13-79f0-a5b1-d952a78c1aea"
	inv := codexInvocation(t)
	inv.ResumeSession = id
	codexSession(t, inv, id)
	if err := p.Build(inv); err != nil {
		t.Fatal(err)
	}
	n := len(inv.Args)
	if n < 3 || inv.Args[n-3] != "resume" || inv.Args[n-2] != id || inv.Args[n-1] != inv.Prompt {
		t.Errorf("args %q, want ... resume ID PROMPT", inv.Args)
	}
	// The session's running total before the call: the last token_count
	// of the captured session (two calls: 3 requests of 1200/200/80).
	var f codexUsageFile
	b, err := os.ReadFile(filepath.Join(inv.CallDir, codexUsageBefore))
	if err != nil || json.Unmarshal(b, &f) != nil {
		t.Fatalf("usage before: %s %v", b, err)
	}
	if f.Session != id || f.Usage != (codexUsage{Input: 3600, Cached: 600, Output: 240}) {
		t.Errorf("usage before %+v", f)
	}

	// A session Codex does not have (another home, a fresh start) is not
	// resumed: the call starts cold instead of failing.
	inv = codexInvocation(t)
	inv.ResumeSession = "01a1ff9f-0000-7000-8000-000000000000"
	if err := p.Build(inv); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(inv.Args, "resume") {
		t.Errorf("resumed a session without a session file: %q", inv.Args)
	}
	if _, err := os.Stat(filepath.Join(inv.CallDir, codexUsageBefore)); err == nil {
		t.Error("usage-before file written for a cold start")
	}
}

func codexParse(t *testing.T, name string, exit int, inv *Invocation) *Parsed {
	t.Helper()
	out := &RunOutput{Stdout: codexSample(t, name), ExitCode: exit, Inv: inv}
	if strings.HasSuffix(name, ".txt") {
		out = &RunOutput{Stderr: codexSample(t, name), ExitCode: exit, Inv: inv}
	}
	p, err := parseCodex(out)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

func TestCodexParseSuccess(t *testing.T) {
	p := codexParse(t, "success.jsonl", 0, nil)
	if p.Err != nil || p.SessionID != "01a1ffa6-5b13-79f0-a5b1-d952a78c1aea" || p.Turns != 2 ||
		!strings.Contains(string(p.Answer), `"action":"RETRY"`) || p.CostReported {
		t.Errorf("parsed %+v (err %v)", p, p.Err)
	}
	if tk := p.Tokens; tk == nil || tk.Input != 2400 || tk.Cache != 400 || tk.Output != 160 {
		t.Errorf("tokens %+v", p.Tokens)
	}
	// "Reconnecting..." events (Codex retrying by itself) and warning
	// items (a model outside Codex's catalog) are not failures.
	for _, name := range []string{"reconnecting-then-success.jsonl", "unknown-model.jsonl"} {
		p := codexParse(t, name, 0, nil)
		if p.Err != nil || !strings.Contains(string(p.Answer), `"action"`) || p.Tokens == nil {
			t.Errorf("%s: parsed %+v (err %v)", name, p, p.Err)
		}
	}
}

func TestCodexParseResumeTokens(t *testing.T) {
	// Codex reports the resumed session's running total (3600 = the
	// first call's 2400 + this call's 1200); the call's own tokens are
	// that minus the total before it, which Build saved.
	p := codexParse(t, "resume.jsonl", 0, nil)
	if p.Tokens.Input != 3600 {
		t.Fatalf("running total %+v", p.Tokens)
	}
	inv := codexInvocation(t)
	if err := os.WriteFile(filepath.Join(inv.CallDir, codexUsageBefore), codexSample(t, "resume.usage-before.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	p = codexParse(t, "resume.jsonl", 0, inv)
	if tk := p.Tokens; p.Err != nil || tk.Input != 1200 || tk.Cache != 200 || tk.Output != 80 {
		t.Errorf("tokens %+v (err %v)", p.Tokens, p.Err)
	}
	// A total saved for another session is not subtracted.
	p = codexParse(t, "reconnecting-then-success.jsonl", 0, inv)
	if p.Tokens.Input != 2400 {
		t.Errorf("tokens %+v", p.Tokens)
	}
}

func TestCodexParseErrors(t *testing.T) {
	cases := []struct {
		sample     string
		exit       int
		code       string
		transient  bool
		retake     bool
		retryAfter time.Duration
	}{
		{"auth-401.jsonl", 1, codes.AuthFailed, false, false, 0},
		// The same failure behind exit status 0 is still a failure.
		{"auth-401.jsonl", 0, codes.AuthFailed, false, false, 0},
		{"forbidden-403.jsonl", 1, codes.AuthFailed, false, false, 0},
		{"missing-key.jsonl", 1, codes.AuthFailed, false, false, 0},
		{"rate-limit-429.jsonl", 1, codes.RateLimited, true, false, 0},
		{"instream-rate-limit.jsonl", 1, codes.RateLimited, true, false, 2500 * time.Millisecond},
		{"quota-429.jsonl", 1, codes.APIError, false, false, 0},
		{"usage-limit-429.jsonl", 1, codes.APIError, false, false, 0},
		{"server-500.jsonl", 1, codes.APIError, true, false, 0},
		{"server-503.jsonl", 1, codes.APIError, true, false, 0},
		{"connection-refused.jsonl", 1, codes.APIError, true, false, 0},
		{"stream-cut.jsonl", 1, codes.StreamCut, true, true, 0},
		{"malformed.jsonl", 1, codes.StreamCut, true, true, 0},
		{"instream-server-error.jsonl", 1, codes.StreamCut, true, true, 0},
		{"context-window.jsonl", 1, codes.AgentFailed, false, false, 0},
		{"bad-request-400.jsonl", 1, codes.AgentFailed, false, false, 0},
		{"config-error.stderr.txt", 1, codes.AgentConfig, false, false, 0},
		{"bad-args.stderr.txt", 2, codes.AgentConfig, false, false, 0},
		{"no-rollout.stderr.txt", 1, codes.AgentFailed, false, false, 0},
	}
	for _, c := range cases {
		p := codexParse(t, c.sample, c.exit, nil)
		e := p.Err
		if e == nil {
			t.Errorf("%s (exit %d): no error; parsed %+v", c.sample, c.exit, p)
			continue
		}
		if e.Code != c.code || e.Transient != c.transient || e.Retake != c.retake || e.RetryAfter != c.retryAfter {
			t.Errorf("%s (exit %d): %+v, want %s transient=%v retake=%v retry-after=%v", c.sample, c.exit, e, c.code, c.transient, c.retake, c.retryAfter)
		}
		if e.Msg == "" {
			t.Errorf("%s: empty message", c.sample)
		}
	}
	if e := codexParse(t, "bad-args.stderr.txt", 2, nil).Err; !strings.Contains(e.Msg, "--no-such-flag") {
		t.Errorf("bad args message %q", e.Msg)
	}
}

func TestCodexParseIncomplete(t *testing.T) {
	// Nothing at all: the runner decides (a crash is retried).
	if _, err := parseCodex(&RunOutput{ExitCode: 137}); err == nil {
		t.Error("empty output parsed")
	}
	// An answer without turn.completed (the program was stopped) is not
	// an answer.
	out := []byte(`{"type":"thread.started","thread_id":"t1"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"{\"action\":\"COMPLETED\"}"}}
`)
	p, err := parseCodex(&RunOutput{Stdout: out, ExitCode: 0})
	if err != nil || p.Err == nil || p.Err.Code != codes.AgentFailed || p.SessionID != "t1" {
		t.Errorf("parsed %+v, %v", p, err)
	}
}

func TestCodexRolloutTotals(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "r.jsonl")
	if err := os.WriteFile(f, codexSample(t, "rollout.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	if u, ok := codexRolloutTotals(dir, f); !ok || u != (codexUsage{Input: 3600, Cached: 600, Output: 240}) {
		t.Errorf("totals %+v %v", u, ok)
	}
	if err := os.WriteFile(f, []byte(`{"type":"session_meta","payload":{}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := codexRolloutTotals(dir, f); ok {
		t.Error("totals found in a session without token counts")
	}
	if _, ok := codexRolloutTotals(dir, filepath.Join(dir, "missing")); ok {
		t.Error("totals of a missing file")
	}
}
