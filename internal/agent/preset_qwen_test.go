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

// qwenSample reads a captured run of qwen 0.24.4 against the model stub
// (testdata/presets/qwen-code/README.txt says how each was made).
func qwenSample(t *testing.T, name string, exit int) *RunOutput {
	t.Helper()
	return capturedRun(t, "qwen-code", name, exit)
}

func qwenInvocation(t *testing.T) *Invocation {
	t.Helper()
	call := t.TempDir()
	return &Invocation{Program: "qwen", Model: "qwen3-coder-plus", SystemPrompt: "Answer with one JSON object.",
		Prompt: "## Task\nWrite hello.txt.", Workspace: t.TempDir(), Home: t.TempDir(), CallDir: call,
		SchemaFile: filepath.Join(call, "answer-schema.json"), BaseURL: "http://127.0.0.1:8080/v1/", Env: map[string]string{}}
}

func TestQwenBuild(t *testing.T) {
	inv := qwenInvocation(t)
	inv.MaxTurns = 9
	if err := qwenBuild(inv); err != nil {
		t.Fatal(err)
	}
	a := inv.Args
	if a[0] != inv.Prompt || opencodeFlag(a, "--output-format") != "stream-json" || opencodeFlag(a, "--model") != "qwen3-coder-plus" ||
		opencodeFlag(a, "--json-schema") != "@"+inv.SchemaFile || opencodeFlag(a, "--append-system-prompt") != inv.SystemPrompt ||
		opencodeFlag(a, "--max-session-turns") != "9" || slices.Contains(a, "--resume") {
		t.Errorf("args %q", a)
	}
	if inv.Env["OPENAI_BASE_URL"] != "http://127.0.0.1:8080/v1" {
		t.Errorf("env %v", inv.Env)
	}
	b, err := os.ReadFile(filepath.Join(inv.Home, ".qwen", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		General struct {
			EnableAutoUpdate *bool `json:"enableAutoUpdate"`
		} `json:"general"`
		Security struct {
			Auth struct {
				SelectedType string `json:"selectedType"`
			} `json:"auth"`
		} `json:"security"`
		Tools struct {
			ApprovalMode string `json:"approvalMode"`
		} `json:"tools"`
		Privacy struct {
			UsageStatisticsEnabled *bool `json:"usageStatisticsEnabled"`
		} `json:"privacy"`
		Telemetry struct {
			Enabled *bool `json:"enabled"`
		} `json:"telemetry"`
		Model struct {
			GenerationConfig struct {
				MaxRetries *int `json:"maxRetries"`
			} `json:"generationConfig"`
		} `json:"model"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.General.EnableAutoUpdate == nil || *s.General.EnableAutoUpdate || s.Security.Auth.SelectedType != "openai" ||
		s.Tools.ApprovalMode != "auto-edit" || s.Privacy.UsageStatisticsEnabled == nil || *s.Privacy.UsageStatisticsEnabled ||
		s.Telemetry.Enabled == nil || *s.Telemetry.Enabled || s.Model.GenerationConfig.MaxRetries == nil || *s.Model.GenerationConfig.MaxRetries != 0 {
		t.Errorf("settings %s", b)
	}
}

func TestQwenBuildDefaultsAndAwkwardPrompts(t *testing.T) {
	inv := qwenInvocation(t)
	inv.Model, inv.BaseURL, inv.SystemPrompt, inv.Prompt = "", "", "", "--help"
	if err := qwenBuild(inv); err != nil {
		t.Fatal(err)
	}
	if inv.Args[0] != "\n--help" || slices.Contains(inv.Args, "--model") || slices.Contains(inv.Args, "--append-system-prompt") ||
		slices.Contains(inv.Args, "--max-session-turns") {
		t.Errorf("args %q", inv.Args)
	}
	if _, ok := inv.Env["OPENAI_BASE_URL"]; ok {
		t.Errorf("env %v", inv.Env)
	}
	inv = qwenInvocation(t)
	inv.Prompt = strings.Repeat("y", maxPromptArg+1)
	if err := qwenBuild(inv); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(inv.CallDir, "prompt.md")
	if b, err := os.ReadFile(f); err != nil || string(b) != inv.Prompt {
		t.Fatalf("prompt file: %v", err)
	}
	if len(inv.Args[0]) > 1000 || !strings.Contains(inv.Args[0], f) || opencodeFlag(inv.Args, "--include-directories") != inv.CallDir {
		t.Errorf("args %.300q", inv.Args)
	}
}

func TestQwenBuildResume(t *testing.T) {
	inv := qwenInvocation(t)
	inv.ResumeSession = "53c478d6-5b3a-4543-bb3a-54b140975c1b"
	if err := qwenBuild(inv); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(inv.Args, "--resume") {
		t.Errorf("a session that is gone was resumed: %q", inv.Args)
	}
	chats := filepath.Join(inv.Home, ".qwen", "projects", "-tmp-ws", "chats")
	if err := os.MkdirAll(chats, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(chats, inv.ResumeSession+".jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := qwenBuild(inv); err != nil {
		t.Fatal(err)
	}
	if opencodeFlag(inv.Args, "--resume") != inv.ResumeSession {
		t.Errorf("args %q", inv.Args)
	}
}

func TestQwenParseSuccess(t *testing.T) {
	p, err := qwenParse(qwenSample(t, "success", 0))
	if err != nil || p.Err != nil {
		t.Fatalf("%v %+v", err, p.Err)
	}
	if want := `{"action":"COMPLETED","evidence_files":["hello.txt"],"summary_for_supervisor":"done"}`; string(p.Answer) != want {
		t.Errorf("answer %q", p.Answer)
	}
	if tk := p.Tokens; tk == nil || tk.Input != 200 || tk.Output != 40 || tk.Cache != 20 {
		t.Errorf("tokens %+v", p.Tokens)
	}
	if p.SessionID != "53c478d6-5b3a-4543-bb3a-54b140975c1b" || p.Turns != 2 || p.Model != "gpt-4o-mini" || p.CostReported {
		t.Errorf("parsed %+v", p)
	}
}

func TestQwenParseResumeCountsOnlyThisCall(t *testing.T) {
	out := qwenSample(t, "resume", 0)
	out.Inv = &Invocation{ResumeSession: "53c478d6-5b3a-4543-bb3a-54b140975c1b"}
	p, err := qwenParse(out)
	if err != nil || p.Err != nil {
		t.Fatalf("%v %+v", err, p.Err)
	}
	// The result says 300/60 (the whole session); this call made one
	// request.
	if tk := p.Tokens; tk == nil || tk.Input != 100 || tk.Output != 20 || tk.Cache != 10 {
		t.Errorf("tokens %+v", p.Tokens)
	}
	if p.SessionID != out.Inv.ResumeSession || !strings.Contains(string(p.Answer), "COMPLETED") {
		t.Errorf("parsed %+v", p)
	}
}

func TestQwenParseErrors(t *testing.T) {
	for _, c := range []struct {
		sample    string
		exit      int
		code      string
		transient bool
		msg       string
	}{
		{"auth-401", 1, codes.AuthFailed, false, "401"},
		{"rate-limit-429", 1, codes.RateLimited, true, "429"},
		{"server-500", 1, codes.APIError, true, "500"},
		{"malformed", 1, codes.APIMalformed, true, "in JSON at position"},
		{"cut-8", 1, codes.StreamCut, true, "other side closed"},
		{"connection-refused", 1, codes.APIError, true, "Connection error"},
		{"max-turns", 53, codes.MaxTurns, false, "turn limit"},
		{"session-not-found", 1, codes.AgentFailed, false, "No saved session found"},
		{"missing-key", 1, codes.AuthFailed, false, "OPENAI_API_KEY"},
		// An error result is an error whatever the exit status.
		{"auth-401", 0, codes.AuthFailed, false, "401"},
		{"rate-limit-429", 0, codes.RateLimited, true, "429"},
	} {
		p, err := qwenParse(qwenSample(t, c.sample, c.exit))
		if err != nil {
			t.Errorf("%s: %v", c.sample, err)
			continue
		}
		e := p.Err
		if e == nil {
			t.Errorf("%s (exit %d): no error; answer %q", c.sample, c.exit, p.Answer)
			continue
		}
		if e.Code != c.code || e.Transient != c.transient || !strings.Contains(e.Msg, c.msg) {
			t.Errorf("%s (exit %d): %+v", c.sample, c.exit, e)
		}
		if len(p.Answer) != 0 {
			t.Errorf("%s: answer %q next to an error", c.sample, p.Answer)
		}
	}
	// The write call before the turn limit was paid for.
	p, _ := qwenParse(qwenSample(t, "max-turns", 53))
	if p.Tokens == nil || p.Tokens.Input != 100 {
		t.Errorf("max-turns tokens %+v", p.Tokens)
	}
	// A cut stream Qwen Code retried by itself is a success.
	if p, err := qwenParse(qwenSample(t, "cut", 0)); err != nil || p.Err != nil || !strings.Contains(string(p.Answer), "COMPLETED") {
		t.Errorf("cut: %v %+v", err, p)
	}
}

func TestQwenParseErrorTextBehindSuccess(t *testing.T) {
	// An API error worded in the result text with is_error false and exit
	// status 0 is not an answer.
	out := &RunOutput{Stdout: []byte(`{"type":"system","subtype":"init","session_id":"s1","model":"m"}
{"type":"result","subtype":"success","session_id":"s1","is_error":false,"num_turns":1,"result":"[API Error: 503 Service Unavailable]","usage":{"input_tokens":0,"output_tokens":0}}
`)}
	p, err := qwenParse(out)
	if err != nil || p.Err == nil || p.Err.Code != codes.APIError || !p.Err.Transient {
		t.Fatalf("%v %+v", err, p)
	}
	// The model wrote its answer as text instead of calling
	// structured_output.
	out = &RunOutput{ExitCode: 1, Stdout: []byte(`{"type":"result","subtype":"error_during_execution","session_id":"s2","is_error":true,"num_turns":2,"usage":{"input_tokens":200,"output_tokens":40},"error":{"message":"Model produced plain text instead of calling the structured_output tool."}}
`)}
	p, err = qwenParse(out)
	if err != nil || p.Err == nil || p.Err.Code != codes.AgentFailed || p.Tokens == nil || p.Tokens.Input != 200 {
		t.Fatalf("%v %+v", err, p)
	}
}

func TestQwenParseUnreadable(t *testing.T) {
	if _, err := qwenParse(&RunOutput{Stdout: []byte("Killed\n"), ExitCode: 137}); err == nil {
		t.Error("no result accepted")
	}
}
