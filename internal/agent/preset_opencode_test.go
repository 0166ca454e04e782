package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/manifest"
)

// opencodeSample reads a captured run of opencode 1.18.33 against the
// model stub (testdata/presets/opencode/README.txt says how each was
// made).
func opencodeSample(t *testing.T, name string, exit int) *RunOutput {
	t.Helper()
	return capturedRun(t, "opencode", name, exit)
}

func opencodeInvocation(t *testing.T) *Invocation {
	t.Helper()
	return &Invocation{Program: "opencode", Model: "gpt-4o-mini", SystemPrompt: "Answer with one JSON object.",
		Prompt: "## Task\nWrite hello.txt.", Workspace: t.TempDir(), Home: t.TempDir(), CallDir: t.TempDir(),
		BaseURL: "http://127.0.0.1:8080/v1/", Env: map[string]string{}}
}

// opencodeConfig decodes the configuration Build passed in
// OPENCODE_CONFIG_CONTENT.
func opencodeConfig(t *testing.T, inv *Invocation) map[string]any {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal([]byte(inv.Env["OPENCODE_CONFIG_CONTENT"]), &cfg); err != nil {
		t.Fatalf("OPENCODE_CONFIG_CONTENT: %v", err)
	}
	return cfg
}

// opencodeMessage is the message as opencode run puts it together: the
// arguments after "--" joined with spaces (an argument with a space in it
// would be quoted).
func opencodeMessage(args []string) string {
	i := slices.Index(args, "--")
	if i < 0 {
		return ""
	}
	for _, a := range args[i+1:] {
		if strings.Contains(a, " ") {
			return "<quoted " + a + ">"
		}
	}
	return strings.Join(args[i+1:], " ")
}

func opencodeFlag(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func TestOpenCodeBuild(t *testing.T) {
	inv := opencodeInvocation(t)
	inv.MaxTurns = 7
	if err := opencodeBuild(inv); err != nil {
		t.Fatal(err)
	}
	a := inv.Args
	if !slices.Equal(a[:3], []string{"run", "--format", "json"}) || opencodeFlag(a, "--model") != "logist/gpt-4o-mini" ||
		opencodeFlag(a, "--title") != "logist" || slices.Contains(a, "--session") {
		t.Errorf("args %q", a)
	}
	// The prompt comes last (after command.args), after "--", cut at its
	// spaces.
	if got := opencodeMessage(inv.TailArgs); got != inv.Prompt || slices.Contains(a, "--") {
		t.Errorf("message %q", got)
	}
	cfg := opencodeConfig(t, inv)
	if cfg["model"] != "logist/gpt-4o-mini" || cfg["autoupdate"] != false || cfg["share"] != "disabled" || cfg["snapshot"] != false {
		t.Errorf("config %v", cfg)
	}
	prov := cfg["provider"].(map[string]any)["logist"].(map[string]any)
	opts := prov["options"].(map[string]any)
	if prov["npm"] != "@ai-sdk/openai-compatible" || opts["baseURL"] != "http://127.0.0.1:8080/v1" || opts["apiKey"] != "{env:OPENAI_API_KEY}" {
		t.Errorf("provider %v", prov)
	}
	if _, ok := prov["models"].(map[string]any)["gpt-4o-mini"]; !ok {
		t.Errorf("models %v", prov["models"])
	}
	perm := cfg["permission"].(map[string]any)
	if perm["edit"] != "allow" || perm["bash"] != "allow" {
		t.Errorf("permission %v", perm)
	}
	if steps := cfg["agent"].(map[string]any)["build"].(map[string]any)["steps"]; steps != 7.0 {
		t.Errorf("steps %v", steps)
	}
	// The system prompt is an instructions file in the call's folder.
	ins := cfg["instructions"].([]any)
	if len(ins) != 1 {
		t.Fatalf("instructions %v", ins)
	}
	if b, err := os.ReadFile(ins[0].(string)); err != nil || strings.TrimSpace(string(b)) != inv.SystemPrompt || filepath.Dir(ins[0].(string)) != inv.CallDir {
		t.Errorf("instructions file %v: %q %v", ins[0], b, err)
	}
	for _, k := range []string{"OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_LSP_DOWNLOAD"} {
		if inv.Env[k] != "1" {
			t.Errorf("%s = %q", k, inv.Env[k])
		}
	}
}

func TestOpenCodeBuildOwnProviders(t *testing.T) {
	inv := opencodeInvocation(t)
	inv.BaseURL, inv.Model, inv.SystemPrompt = "", "anthropic/claude-sonnet-4-5", ""
	if err := opencodeBuild(inv); err != nil {
		t.Fatal(err)
	}
	cfg := opencodeConfig(t, inv)
	if _, ok := cfg["provider"]; ok {
		t.Errorf("provider defined without base_url: %v", cfg["provider"])
	}
	if _, ok := cfg["instructions"]; ok {
		t.Errorf("instructions without a system prompt: %v", cfg["instructions"])
	}
	if _, ok := cfg["agent"]; ok {
		t.Errorf("a step limit without max_turns: %v", cfg["agent"])
	}
	if opencodeFlag(inv.Args, "--model") != "anthropic/claude-sonnet-4-5" {
		t.Errorf("args %q", inv.Args)
	}
	// base_url with no model cannot name the model to the server.
	inv = opencodeInvocation(t)
	inv.Model = ""
	if err := opencodeBuild(inv); err == nil {
		t.Error("base_url without a model accepted")
	}
	// A model named with our provider prefix is not prefixed twice.
	inv = opencodeInvocation(t)
	inv.Model = "logist/qwen3-coder"
	if err := opencodeBuild(inv); err != nil || opencodeFlag(inv.Args, "--model") != "logist/qwen3-coder" {
		t.Errorf("args %q: %v", inv.Args, err)
	}
}

func TestOpenCodeBuildResume(t *testing.T) {
	inv := opencodeInvocation(t)
	inv.ResumeSession = "ses_e004c92c1ffeLFc3dg8hPS2HCl"
	// No database in the home (session "fresh" wiped it): start cold.
	if err := opencodeBuild(inv); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(inv.Args, "--session") || opencodeFlag(inv.Args, "--title") == "" {
		t.Errorf("a session that is gone was resumed: %q", inv.Args)
	}
	db := filepath.Join(inv.Home, ".local", "share", "opencode", "opencode.db")
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		t.Fatal(err)
	}
	// The id may still be in the write-ahead log only.
	if err := os.WriteFile(db+"-wal", []byte("\x00\x01session\x00ses_e004c92c1ffeLFc3dg8hPS2HCl\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := opencodeBuild(inv); err != nil {
		t.Fatal(err)
	}
	if opencodeFlag(inv.Args, "--session") != inv.ResumeSession || slices.Contains(inv.Args, "--title") {
		t.Errorf("args %q", inv.Args)
	}
}

func TestOpenCodeBuildAwkwardPrompts(t *testing.T) {
	inv := opencodeInvocation(t)
	for _, prompt := range []string{"--help me", `Answer {"action": "COMPLETED"}  (two spaces)` + "\n\tnext line ", "", " "} {
		inv.Prompt = prompt
		if err := opencodeBuild(inv); err != nil {
			t.Fatal(err)
		}
		if got := opencodeMessage(inv.TailArgs); got != prompt {
			t.Errorf("message %q, want %q (args %q)", got, prompt, inv.TailArgs)
		}
	}
	// Longer than one argument may be: attached as a file.
	inv = opencodeInvocation(t)
	inv.Prompt = strings.Repeat("x", maxPromptArg+1)
	if err := opencodeBuild(inv); err != nil {
		t.Fatal(err)
	}
	f := opencodeFlag(inv.Args, "--file")
	if b, err := os.ReadFile(f); err != nil || string(b) != inv.Prompt {
		t.Fatalf("prompt file %q: %v", f, err)
	}
	if msg := opencodeMessage(inv.TailArgs); len(msg) > 1000 || !strings.Contains(msg, f) {
		t.Errorf("message %.200q", msg)
	}
}

func TestOpenCodeParseSuccess(t *testing.T) {
	out := opencodeSample(t, "success", 0)
	out.Inv = &Invocation{Model: "gpt-4o-mini"}
	p, err := opencodeParse(out)
	if err != nil || p.Err != nil {
		t.Fatalf("%v %v", err, p.Err)
	}
	if want := `{"action":"COMPLETED","evidence_files":["hello.txt"],"summary_for_supervisor":"done"}`; string(p.Answer) != want {
		t.Errorf("answer %q", p.Answer)
	}
	// Two steps; the stub reported 100 input (10 cached) and 20 output
	// each: OpenCode's 90 uncached + 10 cache reads.
	if tk := p.Tokens; tk == nil || tk.Input != 200 || tk.Output != 40 || tk.Cache != 20 {
		t.Errorf("tokens %+v", p.Tokens)
	}
	if p.SessionID != "ses_e004c92c1ffeLFc3dg8hPS2HCl" || p.Turns != 2 || p.Model != "gpt-4o-mini" {
		t.Errorf("parsed %+v", p)
	}
	// OpenCode's cost 0 for a base_url model is not a price: Logist
	// prices the tokens.
	if p.CostReported {
		t.Errorf("cost reported %v", p.CostUSD)
	}
}

func TestOpenCodeParseResume(t *testing.T) {
	p, err := opencodeParse(opencodeSample(t, "resume", 0))
	if err != nil || p.Err != nil {
		t.Fatalf("%v %v", err, p.Err)
	}
	if p.SessionID != "ses_e004c92c1ffeLFc3dg8hPS2HCl" || p.Turns != 1 || !strings.Contains(string(p.Answer), `"COMPLETED"`) {
		t.Errorf("parsed %+v", p)
	}
	if tk := p.Tokens; tk == nil || tk.Input != 100 || tk.Output != 20 {
		t.Errorf("tokens %+v", p.Tokens)
	}
}

func TestOpenCodeParseCostReported(t *testing.T) {
	out := &RunOutput{Stdout: []byte(`{"type":"step_start","sessionID":"ses_1","part":{"type":"step-start"}}
{"type":"text","sessionID":"ses_1","part":{"type":"text","text":"thinking out loud"}}
{"type":"step_finish","sessionID":"ses_1","part":{"type":"step-finish","reason":"tool-calls","cost":0.0125,"tokens":{"input":1000,"output":50,"reasoning":10,"cache":{"read":0,"write":200}}}}
{"type":"step_start","sessionID":"ses_1","part":{"type":"step-start"}}
{"type":"text","sessionID":"ses_1","part":{"type":"text","text":"{\"action\":\"COMPLETED\"}"}}
{"type":"step_finish","sessionID":"ses_1","part":{"type":"step-finish","reason":"stop","cost":0.0025,"tokens":{"input":100,"output":5,"reasoning":0,"cache":{"read":1000,"write":0}}}}
`)}
	p, err := opencodeParse(out)
	if err != nil || p.Err != nil {
		t.Fatalf("%v %v", err, p.Err)
	}
	if !p.CostReported || p.CostUSD < 0.01499 || p.CostUSD > 0.01501 {
		t.Errorf("cost %v reported %v", p.CostUSD, p.CostReported)
	}
	// Only the last step's text is the answer; cache reads and writes
	// count as input, reasoning as output.
	if string(p.Answer) != `{"action":"COMPLETED"}` {
		t.Errorf("answer %q", p.Answer)
	}
	if tk := p.Tokens; tk.Input != 2300 || tk.Output != 65 || tk.Cache != 1000 {
		t.Errorf("tokens %+v", tk)
	}
}

func TestOpenCodeParseErrors(t *testing.T) {
	for _, c := range []struct {
		sample    string
		exit      int
		code      string
		transient bool
		retake    bool
		after     time.Duration
		msg       string
	}{
		{"auth-401", 1, codes.AuthFailed, false, false, 0, "HTTP 401"},
		{"rate-limit-429", 1, codes.RateLimited, true, false, time.Second, "HTTP 429"},
		{"server-500", 1, codes.APIError, true, false, time.Second, "HTTP 500"},
		{"malformed", 1, codes.APIMalformed, true, false, 0, "JSON parsing failed"},
		{"connection-refused", 1, codes.APIError, true, false, 0, "Unable to connect"},
		{"cut-6", 1, codes.StreamCut, true, true, 0, ""},
		{"session-not-found", 1, codes.AgentFailed, false, false, 0, "Session not found"},
		// An API error is an error also behind exit status 0.
		{"auth-401", 0, codes.AuthFailed, false, false, 0, "HTTP 401"},
		{"server-500", 0, codes.APIError, true, false, time.Second, "HTTP 500"},
	} {
		p, err := opencodeParse(opencodeSample(t, c.sample, c.exit))
		if err != nil {
			t.Errorf("%s: %v", c.sample, err)
			continue
		}
		e := p.Err
		if e == nil {
			t.Errorf("%s (exit %d): no error; answer %q", c.sample, c.exit, p.Answer)
			continue
		}
		if e.Code != c.code || e.Transient != c.transient || e.Retake != c.retake || e.RetryAfter != c.after || !strings.Contains(e.Msg, c.msg) {
			t.Errorf("%s (exit %d): %+v", c.sample, c.exit, e)
		}
		if len(p.Answer) != 0 {
			t.Errorf("%s: answer %q next to an error", c.sample, p.Answer)
		}
	}
}

func TestOpenCodeParseMaxSteps(t *testing.T) {
	// The max-steps run had steps 1: the write call took it, the answer
	// came in a second step.
	out := opencodeSample(t, "max-steps", 0)
	out.Inv = &Invocation{MaxTurns: 1}
	p, err := opencodeParse(out)
	if err != nil {
		t.Fatal(err)
	}
	if p.Err == nil || p.Err.Code != codes.MaxTurns || p.Err.Transient || p.Tokens == nil || p.Tokens.Input == 0 {
		t.Fatalf("parsed %+v err %+v", p, p.Err)
	}
	// Within the limit it is an answer.
	out.Inv = &Invocation{MaxTurns: 2}
	if p, err := opencodeParse(out); err != nil || p.Err != nil || !strings.Contains(string(p.Answer), "COMPLETED") {
		t.Errorf("%v %+v", err, p)
	}
	// The last allowed step ended in prose (the summary OpenCode asks for
	// at its limit), not a JSON answer.
	prose := &RunOutput{Inv: &Invocation{MaxTurns: 1}, Stdout: []byte(`{"type":"step_start","sessionID":"ses_1","part":{}}
{"type":"text","sessionID":"ses_1","part":{"type":"text","text":"Maximum steps reached. Done so far: nothing."}}
{"type":"step_finish","sessionID":"ses_1","part":{"reason":"stop","cost":0,"tokens":{"input":10,"output":5,"reasoning":0,"cache":{"read":0,"write":0}}}}
`)}
	if p, err := opencodeParse(prose); err != nil || p.Err == nil || p.Err.Code != codes.MaxTurns {
		t.Errorf("%v %+v", err, p)
	}
}

func TestOpenCodeParseUnreadable(t *testing.T) {
	if _, err := opencodeParse(&RunOutput{Stdout: []byte("Segmentation fault\n"), ExitCode: 139}); err == nil {
		t.Error("no events accepted")
	}
	if _, err := opencodeParse(&RunOutput{}); err == nil {
		t.Error("empty output accepted")
	}
	// Warnings `opencode run` prints between events are skipped.
	out := &RunOutput{Stdout: []byte("! permission requested: external_directory (/etc/*); auto-rejecting\n" +
		`{"type":"step_start","sessionID":"ses_2","part":{}}` + "\n" +
		`{"type":"text","sessionID":"ses_2","part":{"type":"text","text":"{}"}}` + "\n")}
	if p, err := opencodeParse(out); err != nil || p.Err != nil || string(p.Answer) != "{}" || p.SessionID != "ses_2" {
		t.Errorf("%v %+v", err, p)
	}
}

func TestOpenCodeStripANSI(t *testing.T) {
	if got := opencodeStripANSI("\x1b[91m\x1b[1mError: \x1b[0mSession not found"); got != "Error: Session not found" {
		t.Errorf("%q", got)
	}
}

// opencodeFake stands in for opencode: it records its arguments (NUL
// separated) and prints a one-step run.
const opencodeFake = `#!/bin/sh
for a in "$@"; do printf '%s\0' "$a"; done > "$LOGIST_WORKSPACE/args.txt"
echo '{"type":"step_start","sessionID":"ses_fake","part":{}}'
echo '{"type":"text","sessionID":"ses_fake","part":{"type":"text","text":"{\"action\":\"COMPLETED\"}"}}'
echo '{"type":"step_finish","sessionID":"ses_fake","part":{"cost":0,"tokens":{"input":10,"output":2,"reasoning":0,"cache":{"read":0,"write":0}}}}'
`

func TestOpenCodeCommandArgsBeforePrompt(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "opencode")
	if err := os.WriteFile(prog, []byte(opencodeFake), 0o700); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "job", "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	req := &Request{JobID: "j", Phase: "work", Role: "worker", JobDir: filepath.Join(dir, "job"), Workspace: ws, Interaction: 1,
		SystemPrompt: "Sys.", Prompt: "Sys.\n\n## Task\n- Do {\"it\": 1}."}
	p, _ := LookupPreset("opencode")
	c := &PresetCommand{Preset: p, Model: "gpt-4o-mini", Getenv: func(k string) string { return map[string]string{"PATH": os.Getenv("PATH")}[k] },
		Cfg: manifest.Command{Preset: "opencode", Program: prog, BaseURL: listeningURL(t, "/v1"), Args: []string{"--variant", "high"}}}
	res, err := c.Call(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Raw) != `{"action":"COMPLETED"}` || res.SessionID != "ses_fake" {
		t.Errorf("result %+v", res)
	}
	b, err := os.ReadFile(filepath.Join(ws, "args.txt"))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	dash := slices.Index(args, "--")
	if v := slices.Index(args, "--variant"); v < 0 || dash < v || args[v+1] != "high" {
		t.Errorf("command.args not among the options: %q", args)
	}
	if got := opencodeMessage(args); got != "## Task\n- Do {\"it\": 1}." {
		t.Errorf("message %q (args %q)", got, args)
	}
}
