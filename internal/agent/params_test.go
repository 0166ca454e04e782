package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/logist/logist/internal/manifest"
)

// Issue 17 item 6: what a preset records as sent (Params) is what its
// Build passes the program: the model after the model flag, as the program
// is given it (OpenCode names a base_url model as a model of Logist's own
// provider), none when the role has no model, and never a temperature or
// token limit, which no preset passes.
func TestPresetParamsAreWhatBuildPasses(t *testing.T) {
	for _, name := range PresetNames() {
		p, _ := LookupPreset(name)
		for _, tc := range []struct{ model, baseURL string }{
			{"m-test", ""}, {"m-test", "http://127.0.0.1:9/v1"}, {"", ""},
		} {
			dir := t.TempDir()
			inv := &Invocation{Program: "/bin/true", Model: tc.model, BaseURL: tc.baseURL, SystemPrompt: "sys", Prompt: "do it",
				Schema: []byte(`{}`), SchemaFile: filepath.Join(dir, "schema.json"), Workspace: dir,
				Home: filepath.Join(dir, "home"), CallDir: filepath.Join(dir, "call"), Env: map[string]string{}}
			if err := os.MkdirAll(inv.Home, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(inv.CallDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := p.Build(inv); err != nil {
				continue // a base_url without a model is refused at the call
			}
			sent := (&PresetCommand{Preset: p, Model: tc.model, Cfg: manifest.Command{Preset: name, BaseURL: tc.baseURL}}).Params()
			args := append(append([]string{}, inv.Args...), inv.TailArgs...)
			given := ""
			for i, a := range args {
				if (a == "--model" || a == "-m") && i+1 < len(args) {
					given = args[i+1]
				}
			}
			if sent.Model != given {
				t.Errorf("%s (model %q, base_url %q): records model %q, passes %q (args %q)", name, tc.model, tc.baseURL, sent.Model, given, args)
			}
			if sent.Temperature != nil || sent.MaxTokens != 0 || slices.ContainsFunc(args, func(a string) bool { return a == "--temperature" || a == "--max-tokens" }) {
				t.Errorf("%s: temperature %v, max_tokens %d, args %q", name, sent.Temperature, sent.MaxTokens, args)
			}
		}
	}
}

// The http provider's body carries exactly its Params.
func TestOpenAIParamsAreTheBody(t *testing.T) {
	temp := 0.0
	for _, cfg := range []manifest.HTTP{
		{Model: "a", Temperature: &temp, MaxTokens: 12},
		{Model: "b"},
	} {
		o := &OpenAI{Cfg: cfg}
		b, err := o.body(&Request{Prompt: "p", Metadata: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		meta := map[string]any{}
		o.Params().Record(meta)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{MetaModel, MetaTemperature, MetaMaxTokens} {
			got, ok := meta[k]
			want, sent := body[k]
			if ok != sent || (ok && toFloat(got) != toFloat(want)) {
				t.Errorf("%+v: %s recorded %v (%v), sent %v (%v)", cfg, k, got, ok, want, sent)
			}
		}
	}
}

func toFloat(v any) any {
	switch n := v.(type) {
	case int:
		return float64(n)
	case float64:
		return n
	}
	return v
}
