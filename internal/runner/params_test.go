package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/testbed/modelstub"
	"github.com/logist/logist/internal/testkit"
)

// Issue 17 item 6: request.metadata records the model, temperature and
// max_tokens the http provider actually sent (the stub sees the request),
// not what the role's configuration says elsewhere, and nothing for a
// parameter that was not sent.
func TestRequestMetadataRecordsTheParametersSent(t *testing.T) {
	const answer = `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"done over http"}`
	for _, tc := range []struct {
		name string
		http map[string]any
	}{
		{"all set", map[string]any{"model": "stub-model-a", "temperature": 0.3, "max_tokens": 777}},
		{"server defaults", map[string]any{"model": "stub-model-b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub, err := modelstub.Start(modelstub.Options{Answer: answer})
			if err != nil {
				t.Fatal(err)
			}
			defer stub.Close()
			f := newFixture(t)
			h := map[string]any{"base_url": stub.URL + "/v1"}
			for k, v := range tc.http {
				h[k] = v
			}
			// The role's own model field is not what goes on the wire.
			worker := map[string]any{"provider": "http", "model": "not-sent", "http": h}
			f.WriteJob("j", job(worker, okSupervisor()))
			f.Run("j")
			if m := f.Load("j"); m.Status != lifecycle.Success {
				t.Fatalf("status %s (%s)", m.Status, m.Run.Reason)
			}
			var sent map[string]any
			for _, l := range stub.Requests() {
				if l.Turn != nil && !l.Turn.Side {
					if err := json.Unmarshal(l.Body, &sent); err != nil {
						t.Fatal(err)
					}
				}
			}
			if sent == nil {
				t.Fatal("the stub saw no request")
			}
			intents := testkit.OfType(f.Records("j"), history.TypeIntent)
			meta := intents[0].Request.Metadata
			for _, k := range []string{"model", "temperature", "max_tokens"} {
				got, recorded := meta[k]
				want, onWire := sent[k]
				if recorded != onWire || got != want {
					t.Errorf("metadata %s = %v (recorded %v); sent %v (on the wire %v)", k, got, recorded, want, onWire)
				}
			}
			if meta["model"] != tc.http["model"] {
				t.Errorf("metadata model %v, want %v", meta["model"], tc.http["model"])
			}
			// jobHistory.json says the same.
			b, err := os.ReadFile(filepath.Join(f.Dir, "j", history.JobHistoryFile))
			if err != nil {
				t.Fatal(err)
			}
			var jh history.JobHistory
			if err := json.Unmarshal(b, &jh); err != nil {
				t.Fatal(err)
			}
			if jm := jh.Interactions[0].Request.Metadata; jm["model"] != sent["model"] || jm["temperature"] != sent["temperature"] || jm["max_tokens"] != sent["max_tokens"] {
				t.Errorf("jobHistory.json metadata %v; sent %v", jm, sent)
			}
		})
	}
}

// Issue 17 item 6, an agent CLI preset: the model is recorded as the preset
// passes it to the program (the program saw the same), and no temperature
// or max_tokens, which no preset passes (the program's defaults apply).
func TestPresetRequestMetadataRecordsWhatThePresetPasses(t *testing.T) {
	out := t.TempDir()
	prog := filepath.Join(out, "claude")
	script := `#!/bin/sh
printf '%s\n' "$@" > "` + filepath.Join(out, "argv") + `"
echo '{"type":"result","subtype":"success","is_error":false,"session_id":"s-1","num_turns":1,"result":"{\"action\":\"COMPLETED\",\"evidence_files\":[],\"summary_for_supervisor\":\"ok\"}"}'
`
	if err := os.WriteFile(prog, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	worker := map[string]any{"provider": "command", "model": "claude-test-model",
		"command": map[string]any{"preset": "claude-code", "program": prog}}
	f.WriteJob("j", job(worker, okSupervisor()))
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("status %s (%s)", m.Status, m.Run.Reason)
	}
	argv, err := os.ReadFile(filepath.Join(out, "argv"))
	if err != nil {
		t.Fatal(err)
	}
	meta := testkit.OfType(f.Records("j"), history.TypeIntent)[0].Request.Metadata
	if meta["model"] != "claude-test-model" || !strings.Contains(string(argv), "--model\nclaude-test-model\n") {
		t.Errorf("metadata model %v; the program was given:\n%s", meta["model"], argv)
	}
	for _, k := range []string{"temperature", "max_tokens"} {
		if v, ok := meta[k]; ok {
			t.Errorf("metadata %s = %v, but the preset passes none", k, v)
		}
	}
}
