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

// clineSample reads a captured run of cline 3.0.65 against the model stub
// (testdata/presets/cline/README.txt says how each was made). With a
// NAME.cline.log, the run's home gets it as Cline's log.
func clineSample(t *testing.T, name string, exit int) *RunOutput {
	t.Helper()
	out := capturedRun(t, "cline", name, exit)
	out.Inv = &Invocation{Home: t.TempDir()}
	// Cline reports HTTP statuses only in its log file.
	if b, err := os.ReadFile(filepath.Join("testdata", "presets", "cline", name+".cline.log")); err == nil {
		logs := filepath.Join(out.Inv.Home, ".cline", "data", "logs")
		if err := os.MkdirAll(logs, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(logs, "cline.log"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func clineInvocation(t *testing.T) *Invocation {
	t.Helper()
	return &Invocation{Program: "cline", Model: "gpt-4o-mini", SystemPrompt: "Answer with one JSON object.",
		Prompt: "## Task\nWrite hello.txt.", Workspace: t.TempDir(), Home: t.TempDir(), CallDir: t.TempDir(),
		BaseURL: "http://127.0.0.1:8080/v1/", Env: map[string]string{}}
}

func TestClineBuild(t *testing.T) {
	inv := clineInvocation(t)
	if err := clineBuild(inv); err != nil {
		t.Fatal(err)
	}
	if want := []string{"--json", "--provider", "openai-compatible", "--model", "gpt-4o-mini"}; !slices.Equal(inv.Args, want) {
		t.Errorf("args %q", inv.Args)
	}
	if !slices.Equal(inv.TailArgs, []string{"--", inv.Prompt}) {
		t.Errorf("tail %q", inv.TailArgs)
	}
	if inv.Env["CLINE_SESSION_BACKEND_MODE"] != "local" || inv.Env["CLINE_NO_AUTO_UPDATE"] != "1" {
		t.Errorf("env %v", inv.Env)
	}
	settings := filepath.Join(inv.Home, ".cline", "data", "settings")
	var prov struct {
		LastUsedProvider string `json:"lastUsedProvider"`
		Providers        map[string]struct {
			Settings  map[string]string `json:"settings"`
			UpdatedAt string            `json:"updatedAt"`
		} `json:"providers"`
	}
	b, err := os.ReadFile(filepath.Join(settings, "providers.json"))
	if err != nil || json.Unmarshal(b, &prov) != nil {
		t.Fatalf("providers.json %s: %v", b, err)
	}
	oc := prov.Providers["openai-compatible"]
	if prov.LastUsedProvider != "openai-compatible" || oc.Settings["baseUrl"] != "http://127.0.0.1:8080/v1" || oc.Settings["model"] != "gpt-4o-mini" ||
		oc.Settings["provider"] != "openai-compatible" || oc.UpdatedAt == "" {
		t.Errorf("providers.json %s", b)
	}
	// The key stays in the environment, not in the job folder.
	if _, ok := oc.Settings["apiKey"]; ok {
		t.Errorf("a key in providers.json: %s", b)
	}
	if b, err := os.ReadFile(filepath.Join(settings, "global-settings.json")); err != nil ||
		!strings.Contains(string(b), `"telemetryOptOut": true`) || !strings.Contains(string(b), `"autoUpdateEnabled": false`) {
		t.Errorf("global-settings.json %s: %v", b, err)
	}
	rule := filepath.Join(inv.Home, "Documents", "Cline", "Rules", "logist.md")
	if b, err := os.ReadFile(rule); err != nil || strings.TrimSpace(string(b)) != inv.SystemPrompt {
		t.Errorf("rule %q: %v", b, err)
	}
	// Without a system prompt the rule is gone.
	inv.SystemPrompt = ""
	if err := clineBuild(inv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(rule); !os.IsNotExist(err) {
		t.Errorf("stale rule: %v", err)
	}
}

func TestClineBuildRefuses(t *testing.T) {
	inv := clineInvocation(t)
	inv.MaxTurns = 5
	if err := clineBuild(inv); err == nil || !strings.Contains(err.Error(), "max_turns") {
		t.Errorf("max_turns accepted: %v", err)
	}
	inv = clineInvocation(t)
	inv.Model = ""
	if err := clineBuild(inv); err == nil {
		t.Error("base_url without a model accepted")
	}
	// Without base_url: Cline's own provider settings; no providers.json.
	inv = clineInvocation(t)
	inv.BaseURL = ""
	if err := clineBuild(inv); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(inv.Args, "--provider") {
		t.Errorf("args %q", inv.Args)
	}
	if _, err := os.Stat(filepath.Join(inv.Home, ".cline", "data", "settings", "providers.json")); !os.IsNotExist(err) {
		t.Errorf("providers.json written: %v", err)
	}
}

func TestClineBuildLongPrompt(t *testing.T) {
	inv := clineInvocation(t)
	inv.Prompt = strings.Repeat("z", maxPromptArg+1)
	if err := clineBuild(inv); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(inv.CallDir, "prompt.md")
	if b, err := os.ReadFile(f); err != nil || string(b) != inv.Prompt {
		t.Fatalf("prompt file: %v", err)
	}
	if msg := inv.TailArgs[1]; len(msg) > 1000 || !strings.Contains(msg, f) {
		t.Errorf("message %.200q", msg)
	}
}

func TestClineParseSuccess(t *testing.T) {
	out := clineSample(t, "success", 0)
	// The session record the run left in its home.
	dir := filepath.Join(out.Inv.Home, ".cline", "data", "sessions", "1795292783183_ab12c")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(out.Inv.Home, ".cline", "data", "sessions", "1795000000000_old00")
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "1795000000000_old00.json"), []byte(`{"session_id":"1795000000000_old00","started_at":"2026-11-20T10:00:00.000Z"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	first := jsonLines(out.Stdout)[0]
	var ev struct {
		TS string `json:"ts"`
	}
	if err := json.Unmarshal(first, &ev); err != nil {
		t.Fatal(err)
	}
	ts, _ := time.Parse(time.RFC3339Nano, ev.TS)
	rec := `{"session_id":"1795292783183_ab12c","started_at":"` + ts.Add(-200*time.Millisecond).UTC().Format(time.RFC3339Nano) + `"}`
	if err := os.WriteFile(filepath.Join(dir, "1795292783183_ab12c.json"), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := clineParse(out)
	if err != nil || p.Err != nil {
		t.Fatalf("%v %+v", err, p.Err)
	}
	if want := `{"action":"COMPLETED","evidence_files":["hello.txt"],"summary_for_supervisor":"done"}`; string(p.Answer) != want {
		t.Errorf("answer %q", p.Answer)
	}
	if tk := p.Tokens; tk == nil || tk.Input != 200 || tk.Output != 40 || tk.Cache != 20 {
		t.Errorf("tokens %+v", p.Tokens)
	}
	if p.Turns != 2 || p.Model != "gpt-4o-mini" || p.CostReported || p.SessionID != "1795292783183_ab12c" {
		t.Errorf("parsed %+v", p)
	}
}

func TestClineParseErrors(t *testing.T) {
	for _, c := range []struct {
		sample    string
		exit      int
		code      string
		transient bool
		after     time.Duration
		msg       string
	}{
		{"auth-401", 1, codes.AuthFailed, false, 0, "HTTP 401"},
		{"rate-limit-429", 1, codes.RateLimited, true, time.Second, "HTTP 429"},
		// The message has no status; Cline's log has it.
		{"server-500", 1, codes.APIError, true, time.Second, "HTTP 500"},
		{"malformed", 1, codes.APIMalformed, true, 0, "JSON parsing failed"},
		{"cut-7", 1, codes.StreamCut, true, 0, "socket connection was closed"},
		{"connection-refused", 1, codes.APIError, true, 0, "Cannot connect to API"},
		// A failed run is an error whatever the exit status.
		{"auth-401", 0, codes.AuthFailed, false, 0, "HTTP 401"},
		{"server-500", 0, codes.APIError, true, time.Second, "HTTP 500"},
	} {
		p, err := clineParse(clineSample(t, c.sample, c.exit))
		if err != nil {
			t.Errorf("%s: %v", c.sample, err)
			continue
		}
		e := p.Err
		if e == nil {
			t.Errorf("%s (exit %d): no error; answer %q", c.sample, c.exit, p.Answer)
			continue
		}
		if e.Code != c.code || e.Transient != c.transient || e.RetryAfter != c.after || !strings.Contains(e.Msg, c.msg) {
			t.Errorf("%s (exit %d): %+v", c.sample, c.exit, e)
		}
		if len(p.Answer) != 0 {
			t.Errorf("%s: answer %q next to an error", c.sample, p.Answer)
		}
	}
	// Without the log a 500 is only its message.
	out := clineSample(t, "server-500", 1)
	out.Inv = nil
	if p, err := clineParse(out); err != nil || p.Err == nil || p.Err.Code != codes.AgentFailed {
		t.Errorf("%v %+v", err, p)
	}
}

func TestClineParseFinishReasons(t *testing.T) {
	for reason, code := range map[string]string{"max_iterations": codes.MaxTurns, "mistake_limit": codes.AgentFailed, "aborted": codes.AgentFailed} {
		out := &RunOutput{Stdout: []byte(`{"ts":"2026-11-21T20:26:23.529Z","type":"run_result","finishReason":"` + reason +
			`","iterations":50,"usage":{"inputTokens":900,"outputTokens":90,"cacheReadTokens":0,"cacheWriteTokens":0,"totalCost":0.02},"text":"partial"}` + "\n")}
		p, err := clineParse(out)
		if err != nil || p.Err == nil || p.Err.Code != code || string(p.Err.Partial) != "partial" {
			t.Errorf("%s: %v %+v", reason, err, p)
			continue
		}
		if !p.CostReported || p.CostUSD != 0.02 || p.Tokens.Input != 900 {
			t.Errorf("%s: cost %v tokens %+v", reason, p.CostUSD, p.Tokens)
		}
	}
	if _, err := clineParse(&RunOutput{Stdout: []byte("segfault\n"), ExitCode: 139}); err == nil {
		t.Error("no run_result accepted")
	}
}
