package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyDemo copies the shipped example job name into jobs as id, changing
// its manifest with edit.
func copyDemo(t *testing.T, jobs, name, id string, edit func(m map[string]any)) string {
	t.Helper()
	src := filepath.Join("..", "..", "jobs", name)
	dst := filepath.Join(jobs, id)
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dst, "job.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["job_id"] = id
	if edit != nil {
		edit(m)
	}
	if b, err = json.MarshalIndent(m, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dst, "job.json")
}

// logist validate holds a game's own configuration to the game, as the
// run would: a negotiation the run refuses is refused by validate first.
func TestValidateChecksTheGameConfig(t *testing.T) {
	jobs := t.TempDir()
	good := copyDemo(t, jobs, "demo-negotiation", "good", nil)
	if code, out, errs := runMain(t, nil, "validate", good); code != 0 {
		t.Fatalf("the demo is refused: exit %d\n%s%s", code, out, errs)
	}
	bad := copyDemo(t, jobs, "demo-negotiation", "bad", func(m map[string]any) {
		m["game"].(map[string]any)["messages_per_side"] = 6
	})
	code, out, errs := runMain(t, nil, "validate", bad)
	if code != 1 || !strings.Contains(out+errs, "messages_per_side") {
		t.Fatalf("validate of messages_per_side 6: exit %d\n%s%s", code, out, errs)
	}
	noScenario := copyDemo(t, jobs, "demo-negotiation", "noscenario", func(m map[string]any) {
		m["game"].(map[string]any)["scenario"] = "missing.json"
	})
	if code, out, errs := runMain(t, nil, "validate", noScenario); code != 1 || !strings.Contains(out+errs, "missing.json") {
		t.Fatalf("validate of a missing scenario: exit %d\n%s%s", code, out, errs)
	}
	parl := copyDemo(t, jobs, "demo-parliament", "parl", nil)
	if code, out, errs := runMain(t, nil, "validate", parl); code != 0 {
		t.Fatalf("the parliament demo is refused: exit %d\n%s%s", code, out, errs)
	}
}

// Issue 20: every agent name a workflow's configuration gives (a
// parliament's summarizer, speaker and members' agents, a negotiation's
// parties and helper) must name an agent of the manifest; logist validate
// refuses one that does not, naming the file, the field and the reason,
// with the check the run makes (deliberation.CheckRoles).
func TestValidateChecksAgentReferences(t *testing.T) {
	jobs := t.TempDir()
	for _, c := range []struct {
		demo, field string
		edit        func(m map[string]any)
	}{
		{"demo-parliament", "game.summarizer", func(m map[string]any) { m["game"].(map[string]any)["summarizer"] = "clerk" }},
		{"demo-parliament", "game.speaker", func(m map[string]any) { m["game"].(map[string]any)["speaker"] = "chairman" }},
		{"demo-parliament", "game.representatives[1].agent", func(m map[string]any) {
			m["game"].(map[string]any)["representatives"].([]any)[1].(map[string]any)["agent"] = "ghost"
		}},
		{"demo-negotiation", "game.helper", func(m map[string]any) { m["game"].(map[string]any)["helper"] = "ghost" }},
		{"demo-negotiation", "game.agents.aster", func(m map[string]any) { m["game"].(map[string]any)["agents"] = map[string]any{"aster": "ghost"} }},
		{"demo-negotiation", "party delm", func(m map[string]any) { delete(m["agents"].(map[string]any), "delm") }},
	} {
		id := strings.NewReplacer(".", "-", "[", "-", "]", "", " ", "-").Replace(c.field)
		f := copyDemo(t, jobs, c.demo, id, c.edit)
		code, out, errs := runMain(t, nil, "validate", f)
		if code != 1 || !strings.Contains(out+errs, f) || !strings.Contains(out+errs, c.field) || !strings.Contains(out+errs, "is not an agent of the manifest") {
			t.Errorf("%s: validate exit %d\n%s%s", c.field, code, out, errs)
		}
	}
}
