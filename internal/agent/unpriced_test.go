package agent

import (
	"reflect"
	"strings"
	"testing"

	"github.com/logist/logist/internal/manifest"
)

func TestUnpricedAgents(t *testing.T) {
	preset := func(name, model, base string, price *manifest.Price) manifest.AgentConfig {
		return manifest.AgentConfig{Provider: "command", Model: model, Command: &manifest.Command{Preset: name, BaseURL: base, Price: price}}
	}
	price := &manifest.Price{InputPerMTok: 1, OutputPerMTok: 2}
	budget := 500.0
	m := &manifest.Manifest{CostThreshold: &budget, Agents: map[string]manifest.AgentConfig{
		// The qwen-code example of docs/presets/qwen-code.md.
		"worker":   preset("qwen-code", "qwen3-coder-plus", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1", nil),
		"priced":   preset("qwen-code", "qwen3-coder-plus", "", price),
		"table":    preset("codex", "gpt-5.5-2026-01-01", "", nil),
		"own":      preset("claude-code", "", "", nil),
		"gateway":  preset("opencode", "llama-3.3-70b", "http://127.0.0.1:8000/v1", nil),
		"nomodel":  preset("gemini-cli", "", "", nil),
		"local":    {Provider: "http", HTTP: &manifest.HTTP{BaseURL: "http://127.0.0.1:11434/v1", Model: "llama3.2"}},
		"openai":   {Provider: "http", HTTP: &manifest.HTTP{BaseURL: "https://api.openai.com/v1", Model: "gpt-4o-mini"}},
		"script":   {Provider: "script"},
		"human":    {Provider: "human"},
		"command":  {Provider: "command", Command: &manifest.Command{Argv: []string{"my-agent"}}},
		"unknownp": preset("no-such-preset", "m", "", nil),
	}}
	want := []Unpriced{
		{Role: "gateway", Via: "opencode", Model: "llama-3.3-70b"},
		{Role: "local", Via: "http", Model: "llama3.2"},
		{Role: "nomodel", Via: "gemini-cli"},
		{Role: "worker", Via: "qwen-code", Model: "qwen3-coder-plus"},
	}
	if got := UnpricedAgents(m); !reflect.DeepEqual(got, want) {
		t.Fatalf("UnpricedAgents = %+v\nwant %+v", got, want)
	}
	w := CostWarning(m)
	for _, s := range []string{"cost unknown: the metering proxy refuses a model it cannot price", `worker: qwen-code model "qwen3-coder-plus" has no price: set /agents/worker/command/price`,
		"nomodel: gemini-cli names no model, so its price is unknown: set /agents/nomodel/command/price"} {
		if !strings.Contains(w, s) {
			t.Errorf("warning %q lacks %q", w, s)
		}
	}
	// An http agent sends its model as named: the proxy's refusal is
	// certain, so it is an error naming http.price, not a warning.
	if strings.Contains(w, "local") {
		t.Errorf("the unpriced http agent is only warned about: %q", w)
	}
	es := CheckPrices("job.json", m)
	if len(es) != 1 || es[0].Pointer != "/agents/local/http/price" || es[0].File != "job.json" ||
		!strings.Contains(es[0].Reason, `http model "llama3.2" has no price`) || !strings.Contains(es[0].Reason, "set http.price") {
		t.Fatalf("CheckPrices = %v", es)
	}
	found := func(string) (string, error) { return "/bin/true", nil }
	if es := (ProgramCheck{LookPath: found, Metered: true}).Check("job.json", m); len(es) != 1 || es[0].Pointer != "/agents/local/http/price" {
		t.Fatalf("ProgramCheck.Check does not hold the prices: %v", es)
	}
	m.Agents = map[string]manifest.AgentConfig{"worker": preset("qwen-code", "gpt-4o-mini", "http://127.0.0.1:8000/v1", nil)}
	if w := CostWarning(m); w != "" {
		t.Errorf("every agent priced, yet %q", w)
	}
	// The daemon's --prices count.
	SetPriceOverrides(map[string]manifest.Price{"qwen3-coder-plus": *price})
	defer SetPriceOverrides(nil)
	m.Agents["worker"] = preset("qwen-code", "qwen3-coder-plus", "", nil)
	if w := CostWarning(m); w != "" {
		t.Errorf("priced by the overrides, yet %q", w)
	}
}
