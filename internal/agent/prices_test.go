package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
)

func TestBuiltinPricesCoverPresetDefaults(t *testing.T) {
	// Dated snapshots resolve to their family; unknown models have no price.
	for model, in := range map[string]float64{
		"claude-sonnet-4-5-20250929": 3, "claude-opus-4-1-20250805": 15, "claude-haiku-4-5": 1,
		"gpt-4.1-2025-04-14": 2, "gpt-5-mini": 0.25, "gemini-2.5-flash": 0.3,
	} {
		p, ok := LookupPrice(model)
		if !ok || p.InputPerMTok != in {
			t.Errorf("%s: got %+v %v, want input %v", model, p, ok, in)
		}
	}
	if _, ok := LookupPrice("llama3:8b"); ok {
		t.Error("a local model has a price")
	}
}

func TestPriceOverrides(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "prices.json")
	if err := os.WriteFile(f, []byte(`{"_note": "ours", "gpt-4.1": {"input_per_mtok": 1, "output_per_mtok": 2}, "llama3": {"input_per_mtok": 0.01, "output_per_mtok": 0.02, "cached_input_per_mtok": 0}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPrices(f)
	if err != nil {
		t.Fatal(err)
	}
	SetPriceOverrides(p)
	t.Cleanup(func() { SetPriceOverrides(nil) })
	if got, _ := LookupPrice("gpt-4.1-2025-04-14"); got.InputPerMTok != 1 {
		t.Errorf("override not used: %+v", got)
	}
	if got, ok := LookupPrice("llama3-70b"); !ok || got.OutputPerMTok != 0.02 {
		t.Errorf("extension not used: %+v %v", got, ok)
	}
	if got, _ := LookupPrice("gpt-4o"); got.InputPerMTok != 2.5 {
		t.Errorf("built-in entry lost: %+v", got)
	}
	// Cached tokens are part of input and priced at the cached rate.
	c := TokenCost(history.Tokens{Input: 1000, Output: 100, Cache: 400}, manifest.Price{InputPerMTok: 3, OutputPerMTok: 15, CachedInputPerMTok: ptr(0.3)})
	if want := (600*3 + 400*0.3 + 100*15) / 1e6; c != want {
		t.Errorf("TokenCost = %v, want %v", c, want)
	}
}

func ptr(f float64) *float64 { return &f }

func TestLoadPricesErrorsNameFileModelReason(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"notjson":  `[1,2]`,
		"unknown":  `{"m": {"input_per_mtok": 1, "output_per_mtok": 1, "per_request": 3}}`,
		"negative": `{"m": {"input_per_mtok": -1, "output_per_mtok": 1}}`,
	} {
		f := filepath.Join(dir, name+".json")
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadPrices(f)
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("%s: error %v does not name the file", name, err)
		}
		if name != "notjson" && !strings.Contains(err.Error(), `"m"`) {
			t.Errorf("%s: error %v does not name the model", name, err)
		}
	}
	if _, err := LoadPrices(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestPhaseAnswerSchemaIsStrictAndFlat(t *testing.T) {
	s, err := PhaseAnswerSchema("protocol-answer-executor.json")
	if err != nil {
		t.Fatal(err)
	}
	props := s["properties"].(map[string]any)
	for _, k := range []string{"action", "evidence_files", "summary_for_supervisor", "tool_intents"} {
		if _, ok := props[k]; !ok {
			t.Errorf("flattened schema lacks %s: %v", k, props)
		}
	}
	if s["additionalProperties"] != false || len(s["required"].([]string)) != 4 {
		t.Errorf("not strict: %v", s)
	}
	item := props["tool_intents"].(map[string]any)["items"].(map[string]any)
	input := item["properties"].(map[string]any)["input"].(map[string]any)
	cmd := input["properties"].(map[string]any)["command"].(map[string]any)
	// Optional members stay in the strict form as nullable.
	if fmt.Sprint(cmd["type"]) != "[string null]" || input["additionalProperties"] != false {
		t.Errorf("optional member not nullable: %v", input)
	}
	base, _ := AnswerSchema()
	if _, ok := base["properties"].(map[string]any)["cost_usd"]; ok {
		t.Error("cost_usd in the strict base schema")
	}
	if _, err := PhaseAnswerSchema("no-such.json"); err == nil {
		t.Error("unknown schema accepted")
	}
}
