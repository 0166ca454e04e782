package meter

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/testbed/modelstub"
)

// Real agent CLIs (installed by scripts/install-agents.sh into
// .cache/agents, or LOGIST_AGENTS_DIR) run through their presets against
// the proxy in front of the model stub: the preset's base-URL setting
// reaches the proxy, the CLI's "API key" is the call's token, the stub
// sees only the real key, and the proxy's figures are the stub's usage.
// A missing program skips its test (with CI=true it fails).

func agentProgram(t *testing.T, name, bin string) string {
	t.Helper()
	dir := os.Getenv("LOGIST_AGENTS_DIR")
	if dir == "" {
		dir, _ = filepath.Abs("../../.cache/agents")
	}
	p := filepath.Join(dir, name, "node_modules", ".bin", bin)
	if _, err := os.Stat(p); err != nil {
		msg := "agent CLI " + name + " is not installed (" + p + "); run: sh scripts/install-agents.sh " + name
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED LOUDLY: " + msg)
	}
	return p
}

// cliCase is one CLI and the family its preset speaks.
type cliCase struct {
	preset, pkg, bin string
	model            string
	family           Family
	upstream         string
	keyVar           string
	args             []string
}

var cliCases = []cliCase{
	{preset: "claude-code", pkg: "claude-code", bin: "claude", model: "claude-sonnet-4-5", family: Anthropic, upstream: "anthropic", keyVar: "ANTHROPIC_API_KEY"},
	// Codex's own sandbox needs user namespaces; the traffic is what this
	// test is about.
	{preset: "codex", pkg: "codex", bin: "codex", model: "gpt-5.5", family: OpenAI, upstream: "openai", keyVar: "OPENAI_API_KEY",
		args: []string{"-c", `sandbox_mode="danger-full-access"`}},
	{preset: "opencode", pkg: "opencode", bin: "opencode", model: "gpt-4o-mini", family: OpenAI, upstream: "openai", keyVar: "OPENAI_API_KEY"},
}

func TestRealCLIsThroughTheProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real agent CLIs")
	}
	for _, cc := range cliCases {
		t.Run(cc.preset, func(t *testing.T) {
			bin := agentProgram(t, cc.pkg, cc.bin)
			answer, _ := json.Marshal(map[string]any{"action": "COMPLETED", "evidence_files": []string{"hello.txt"},
				"summary_for_supervisor": "Wrote hello.txt."})
			h := newHarness(t, modelstub.Options{Write: modelstub.FileWrite{Path: "hello.txt", Content: "hello\n"},
				Answer: string(answer), Usage: stubUsage}, nil)
			tok, err := h.proxy.Issue(Grant{Job: "job-" + cc.preset, Call: "000001", Role: "worker", Upstreams: []string{cc.upstream}})
			if err != nil {
				t.Fatal(err)
			}
			preset, ok := agent.LookupPreset(cc.preset)
			if !ok {
				t.Fatalf("no preset %s", cc.preset)
			}
			jobDir := t.TempDir()
			ws := filepath.Join(jobDir, "workspace")
			if err := os.MkdirAll(ws, 0o700); err != nil {
				t.Fatal(err)
			}
			pc := &agent.PresetCommand{Preset: preset, Model: cc.model,
				Cfg: manifest.Command{Preset: cc.preset, Program: bin, Args: cc.args,
					// What the engine will do: the proxy as the base URL,
					// the call's token as the key.
					BaseURL: BaseURL(h.root, cc.family), Env: map[string]string{cc.keyVar: tok}},
				Getenv: func(k string) string {
					if k == "PATH" {
						return os.Getenv("PATH")
					}
					return "" // none of the daemon's keys
				}}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := pc.Call(ctx, &agent.Request{JobID: "job-" + cc.preset, Phase: "work", Role: "worker",
				SystemPrompt: "Answer with JSON.", Prompt: "Create the file the model asks for, then answer.",
				Workspace: ws, JobDir: jobDir, Interaction: 1})
			if err != nil {
				t.Fatalf("%s failed: %v\nproxy log:\n%s", cc.preset, err, tail(h.logs.String()))
			}
			tot, _ := h.proxy.Revoke(tok)
			// Every model request the stub saw went through the proxy
			// with the real key, and each was metered at the stub's usage.
			n := 0
			for _, l := range h.stub.Requests() {
				if l.Turn == nil || strings.Contains(l.Path, "count") || l.Path == "/api/hello" {
					continue
				}
				n++
				if got := apiKeyOf(cc.family, l.Header); got != apiKeyFor(cc.family) {
					t.Errorf("%s %s reached the stub with key %.12q", l.Method, l.Path, got)
				}
			}
			if n == 0 || tot.Requests != n {
				t.Fatalf("the stub saw %d model requests, the proxy metered %d (%+v)", n, tot.Requests, tot)
			}
			want := Usage{Input: int64(n) * wantUsage.Input, CacheRead: int64(n) * wantUsage.CacheRead, Output: int64(n) * wantUsage.Output}
			if tot.Tokens != want || tot.Estimated || tot.USD <= 0 {
				t.Errorf("totals %+v, want tokens %+v", tot, want)
			}
			t.Logf("%s: %d requests, %s; agent tokens %+v", cc.preset, n, Compare(tot, res.CostUSD, DefaultTolerance), res.Tokens)
			if res.Tokens != nil && (res.Tokens.Input != want.Input || res.Tokens.Output != want.Output) {
				t.Errorf("the CLI counted %+v, the proxy %+v", res.Tokens, want)
			}
			if c := Compare(tot, res.CostUSD, DefaultTolerance); c.Disagree {
				t.Errorf("the CLI's cost disagrees with the proxy's: %s", c)
			}
		})
	}
}

func apiKeyOf(f Family, h map[string][]string) string {
	get := func(k string) string {
		if v := h[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	switch f {
	case Anthropic:
		return get("X-Api-Key")
	case Gemini:
		return get("X-Goog-Api-Key")
	}
	return strings.TrimPrefix(get("Authorization"), "Bearer ")
}

func apiKeyFor(f Family) string {
	switch f {
	case Anthropic:
		return anthropicKey
	case Gemini:
		return geminiKey
	}
	return openaiKey
}
