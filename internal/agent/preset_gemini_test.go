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

// geminiSample reads a captured run of gemini 0.61.0 (testdata/presets/
// gemini-cli/README.md says how each was made).
func geminiSample(t *testing.T, name string, exit int) *RunOutput {
	t.Helper()
	return capturedRun(t, "gemini-cli", name, exit)
}

func TestGeminiParseSuccess(t *testing.T) {
	p, err := geminiParse(geminiSample(t, "success", 0))
	if err != nil {
		t.Fatal(err)
	}
	if p.Err != nil {
		t.Fatalf("error on success: %v", p.Err)
	}
	want := `{"action":"COMPLETED","evidence_files":["hello.txt"],"summary_for_supervisor":"done"}`
	if string(p.Answer) != want {
		t.Errorf("answer %q, want %q", p.Answer, want)
	}
	if p.SessionID != "bc8156ea-ac6c-4c48-81ab-77181f2a209d" {
		t.Errorf("session id %q", p.SessionID)
	}
	// Two model requests of 100 prompt (10 cached) and 20 output tokens.
	if p.Tokens == nil || p.Tokens.Input != 200 || p.Tokens.Output != 40 || p.Tokens.Cache != 20 {
		t.Errorf("tokens %+v", p.Tokens)
	}
	if p.Model != "gemini-2.5-flash" || p.Turns != 2 || p.CostReported {
		t.Errorf("model %q turns %d cost reported %v", p.Model, p.Turns, p.CostReported)
	}
}

func TestGeminiParseFailures(t *testing.T) {
	cases := []struct {
		sample    string
		exit      int
		code      string
		transient bool
		retake    bool
		retry     time.Duration
	}{
		{"auth-401", 145, codes.AuthFailed, false, false, 0},
		{"rate-limit-429", 173, codes.RateLimited, true, false, 2 * time.Second},
		{"server-500", 244, codes.APIError, true, false, 0},
		{"stream-cut", 1, codes.StreamCut, true, true, 0},
		{"malformed", 1, codes.APIMalformed, true, false, 0},
		{"max-turns", 53, codes.MaxTurns, false, false, 0},
		// API failures reported with exit status 0.
		{"empty-response-exit0", 0, codes.APIError, true, false, 0},
		{"safety-blocked-exit0", 0, codes.AgentFailed, false, false, 0},
		// Fatal errors before the first event: stderr only.
		{"no-api-key-exit41", 41, codes.AuthFailed, false, false, 0},
		{"bad-resume-exit42", 42, codes.AgentFailed, false, false, 0},
	}
	for _, c := range cases {
		t.Run(c.sample, func(t *testing.T) {
			p, err := geminiParse(geminiSample(t, c.sample, c.exit))
			if err != nil {
				t.Fatal(err)
			}
			e := p.Err
			if e == nil {
				t.Fatalf("no error; answer %q", p.Answer)
			}
			if e.Code != c.code || e.Transient != c.transient || e.Retake != c.retake || e.RetryAfter != c.retry {
				t.Fatalf("got %s transient=%v retake=%v retry=%v (%s), want %s transient=%v retake=%v retry=%v",
					e.Code, e.Transient, e.Retake, e.RetryAfter, e.Msg, c.code, c.transient, c.retake, c.retry)
			}
			if len(p.Answer) != 0 {
				t.Errorf("answer %q on failure", p.Answer)
			}
		})
	}
}

// The turn limit is reached after a tool call: the tokens spent are in
// the result's stats and count.
func TestGeminiParseMaxTurnsKeepsTokens(t *testing.T) {
	p, err := geminiParse(geminiSample(t, "max-turns", 53))
	if err != nil || p.Err == nil {
		t.Fatalf("%v %+v", err, p)
	}
	if p.Tokens == nil || p.Tokens.Input != 100 || p.Tokens.Output != 20 || p.SessionID == "" {
		t.Errorf("tokens %+v session %q", p.Tokens, p.SessionID)
	}
	if !strings.Contains(p.Err.Msg, "max_turns") {
		t.Errorf("message %q does not name the setting", p.Err.Msg)
	}
}

// A cut stream printed the start of the answer before failing: it is kept
// as partial output, never as the answer.
func TestGeminiParseCutKeepsPartialOut(t *testing.T) {
	p, _ := geminiParse(geminiSample(t, "stream-cut", 1))
	if p == nil || p.Err == nil || len(p.Answer) != 0 || !strings.HasPrefix(string(p.Err.Partial), `{"action"`) {
		t.Fatalf("%+v", p)
	}
}

// MAX_TOKENS cuts the answer but the CLI reports success: the truncated
// text goes to the runner, whose JSON validation rejects it.
func TestGeminiParseMaxTokensIsNotDetectable(t *testing.T) {
	p, err := geminiParse(geminiSample(t, "max-tokens-exit0", 0))
	if err != nil || p.Err != nil {
		t.Fatalf("%v %+v", err, p)
	}
	if json.Valid(p.Answer) {
		t.Fatalf("answer %q should be the cut text", p.Answer)
	}
}

// Warnings the model loop reports with a successful result.
func TestGeminiParseWarnings(t *testing.T) {
	for msg, code := range map[string]string{
		"Maximum session turns exceeded":    codes.MaxTurns,
		"Loop detected, stopping execution": codes.AgentFailed,
	} {
		out := `{"type":"init","session_id":"s1","model":"gemini-2.5-pro"}
{"type":"message","role":"assistant","content":"partial","delta":true}
{"type":"error","severity":"warning","message":"` + msg + `"}
{"type":"result","status":"success","stats":{"total_tokens":10,"input_tokens":8,"output_tokens":2,"cached":0,"models":{"gemini-2.5-pro":{"total_tokens":10}}}}
`
		p, err := geminiParse(&RunOutput{Stdout: []byte(out)})
		if err != nil || p.Err == nil || p.Err.Code != code {
			t.Errorf("%s: %v %+v", msg, err, p)
		}
	}
}

func TestGeminiParseUnreadable(t *testing.T) {
	if _, err := geminiParse(&RunOutput{Stdout: []byte("Segmentation fault\n"), ExitCode: 139}); err == nil {
		t.Fatal("no error for output without a result event")
	}
}

func TestGeminiAnswerIsLastTurnText(t *testing.T) {
	out := `{"type":"init","session_id":"s1","model":"m"}
{"type":"message","role":"assistant","content":"Let me write it.","delta":true}
{"type":"tool_use","tool_name":"write_file","tool_id":"a","parameters":{}}
{"type":"tool_result","tool_id":"a","status":"success"}
{"type":"message","role":"assistant","content":"{\"action\":","delta":true}
{"type":"message","role":"assistant","content":"\"COMPLETED\"}","delta":true}
{"type":"result","status":"success","stats":{"total_tokens":30,"input_tokens":20,"output_tokens":6,"cached":5,"models":{"m":{"total_tokens":30}}}}
`
	p, err := geminiParse(&RunOutput{Stdout: []byte(out)})
	if err != nil || p.Err != nil {
		t.Fatal(err, p.Err)
	}
	if string(p.Answer) != `{"action":"COMPLETED"}` {
		t.Errorf("answer %q", p.Answer)
	}
	// Thinking tokens are in total_tokens only; they are billed as output.
	if p.Tokens.Output != 10 || p.Tokens.Input != 20 || p.Tokens.Cache != 5 {
		t.Errorf("tokens %+v", p.Tokens)
	}
}

func TestGeminiClassifyByExitStatus(t *testing.T) {
	// A message without the API's body: the exit status (HTTP status mod
	// 256) tells.
	for exit, code := range map[int]string{147: codes.AuthFailed, 247: codes.APIError, 173: codes.RateLimited} {
		if e := geminiClassify("[API Error: something]", false, exit); e.Code != code {
			t.Errorf("exit %d: %s, want %s", exit, e.Code, code)
		}
	}
	if e := geminiClassify("You have exhausted your daily quota on this model.", false, 173); e.Code != codes.RateLimited || e.Transient {
		t.Errorf("daily quota: %+v", e)
	}
	if e := geminiClassify(`[API Error: {"error":{"code":400,"message":"bad model","status":"INVALID_ARGUMENT"}}]`, false, 144); e.Code != codes.APIError || e.Transient {
		t.Errorf("400: %+v", e)
	}
	if d := geminiRetryAfter("Please retry in 1500ms."); d != 1500*time.Millisecond {
		t.Errorf("retry %v", d)
	}
}

func newGeminiInv(t *testing.T) *Invocation {
	t.Helper()
	dir := t.TempDir()
	inv := &Invocation{Program: "gemini", Model: "gemini-2.5-pro", SystemPrompt: "You are the Worker. Answer with JSON.",
		Prompt: "-Do the task.", Workspace: filepath.Join(dir, "ws"), Home: filepath.Join(dir, "home"),
		CallDir: filepath.Join(dir, "call"), BaseURL: "http://127.0.0.1:9/v1beta/", Env: map[string]string{}}
	for _, d := range []string{inv.Workspace, inv.Home, inv.CallDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return inv
}

func TestGeminiBuild(t *testing.T) {
	inv := newGeminiInv(t)
	inv.MaxTurns = 7
	inv.ResumeSession = "0a1b2c3d-0000-4000-8000-000000000000" // no record: start cold
	if err := geminiBuild(inv); err != nil {
		t.Fatal(err)
	}
	want := []string{"--prompt=-Do the task.", "--output-format", "stream-json", "--model", "gemini-2.5-pro"}
	if !slices.Equal(inv.Args, want) {
		t.Errorf("args %q, want %q", inv.Args, want)
	}
	if inv.Env["GOOGLE_GEMINI_BASE_URL"] != "http://127.0.0.1:9" {
		t.Errorf("base url %q", inv.Env["GOOGLE_GEMINI_BASE_URL"])
	}
	b, err := os.ReadFile(filepath.Join(inv.Home, ".gemini", "GEMINI.md"))
	if err != nil || !strings.Contains(string(b), "Answer with JSON.") {
		t.Errorf("GEMINI.md %q %v", b, err)
	}
	var s struct {
		General struct {
			MaxAttempts         int    `json:"maxAttempts"`
			DefaultApprovalMode string `json:"defaultApprovalMode"`
		} `json:"general"`
		Security struct {
			Auth        struct{ SelectedType string } `json:"auth"`
			FolderTrust struct{ Enabled bool }        `json:"folderTrust"`
		} `json:"security"`
		Privacy struct {
			UsageStatisticsEnabled bool `json:"usageStatisticsEnabled"`
		} `json:"privacy"`
		Model struct {
			MaxSessionTurns int `json:"maxSessionTurns"`
		} `json:"model"`
	}
	b, err = os.ReadFile(filepath.Join(inv.Home, ".gemini", "settings.json"))
	if err != nil || json.Unmarshal(b, &s) != nil {
		t.Fatalf("settings %s %v", b, err)
	}
	if s.General.MaxAttempts != 1 || s.General.DefaultApprovalMode != "auto_edit" || s.Security.Auth.SelectedType != "gemini-api-key" ||
		s.Security.FolderTrust.Enabled || s.Privacy.UsageStatisticsEnabled || s.Model.MaxSessionTurns != 7 {
		t.Errorf("settings %s", b)
	}

	// A later call without a system prompt leaves no stale context file.
	inv.SystemPrompt = ""
	if err := geminiBuild(inv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(inv.Home, ".gemini", "GEMINI.md")); !os.IsNotExist(err) {
		t.Errorf("GEMINI.md left behind: %v", err)
	}
}

func TestGeminiBuildResumesKnownSession(t *testing.T) {
	inv := newGeminiInv(t)
	id := "0a1b2c3d-0000-4000-8000-000000000000"
	chats := filepath.Join(inv.Home, ".gemini", "tmp", "ws", "chats")
	if err := os.MkdirAll(chats, 0o700); err != nil {
		t.Fatal(err)
	}
	head := `{"sessionId":"` + id + `","projectHash":"x","kind":"main"}` + "\n"
	if err := os.WriteFile(filepath.Join(chats, "session-2026-01-01T00-00-0a1b2c3d.jsonl"), []byte(head), 0o600); err != nil {
		t.Fatal(err)
	}
	inv.ResumeSession = id
	if err := geminiBuild(inv); err != nil {
		t.Fatal(err)
	}
	if i := slices.Index(inv.Args, "--resume"); i < 0 || inv.Args[i+1] != id {
		t.Errorf("args %q", inv.Args)
	}
	// Same 8-character prefix, another session: not resumed.
	inv.ResumeSession = "0a1b2c3d-ffff-4000-8000-000000000000"
	if err := geminiBuild(inv); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(inv.Args, "--resume") {
		t.Errorf("args %q", inv.Args)
	}
}

func TestGeminiBuildLongPromptGoesThroughFile(t *testing.T) {
	inv := newGeminiInv(t)
	inv.Prompt = strings.Repeat("x", maxPromptArg+1)
	if err := geminiBuild(inv); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(inv.CallDir, "prompt.md")
	if b, err := os.ReadFile(f); err != nil || len(b) != maxPromptArg+1 {
		t.Fatalf("prompt file: %v", err)
	}
	if !strings.Contains(inv.Args[0], f) || len(inv.Args[0]) > 1000 {
		t.Errorf("prompt arg %.200q", inv.Args[0])
	}
	if i := slices.Index(inv.Args, "--include-directories"); i < 0 || inv.Args[i+1] != inv.CallDir {
		t.Errorf("args %q", inv.Args)
	}
}
