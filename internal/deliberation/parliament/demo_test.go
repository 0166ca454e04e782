package parliament

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/schemas"
)

// TestDemoJob plays jobs/demo-parliament as the engine will: its scripted
// agents (the n-th call of a role plays the n-th step, the last repeats)
// under the built-in Speaker, up to the Prime Minister's decision, then
// the steward approves.
func TestDemoJob(t *testing.T) {
	src := filepath.Join("..", "..", "..", "jobs", "demo-parliament")
	raw, err := os.ReadFile(filepath.Join(src, "job.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.ValidateJSON(schemas.Manifest, raw); err != nil {
		t.Fatalf("demo manifest: %v", err)
	}
	var job struct {
		Seed   int64           `json:"seed"`
		Game   json.RawMessage `json:"game"`
		Agents map[string]struct {
			Script []struct {
				Action  string         `json:"action"`
				Summary string         `json:"summary"`
				Fields  map[string]any `json:"fields"`
			} `json:"script"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(raw, &job); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(job.Game)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, *cfg)
	h.raw, h.seed = job.Game, job.Seed
	if err := os.WriteFile(filepath.Join(h.dir, "job.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(src, "workspace", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.ws, "README.md"), readme, 0o644); err != nil {
		t.Fatal(err)
	}
	h.answer = func(h *harness, turn deliberation.Turn) (map[string]any, string) {
		steps := job.Agents[turn.Role].Script
		if len(steps) == 0 {
			t.Fatalf("no agent %q in the demo", turn.Role)
		}
		st := steps[min(h.calls[turn.Role], len(steps)-1)]
		ans := map[string]any{"action": st.Action, "evidence_files": []any{}, "summary_for_supervisor": st.Summary}
		for k, v := range st.Fields {
			ans[k] = v
		}
		if err := schemas.Validate(turn.Schema, normalize(ans)); err != nil {
			t.Fatalf("%s's step %d does not fit its %s turn: %v", turn.Role, h.calls[turn.Role], turn.Kind, err)
		}
		return ans, ""
	}
	step := h.run(nil)
	if step.Wait == "" || !strings.Contains(step.Wait, "logist pm "+filepath.Base(h.dir)+" approve|veto|amend_and_approve") {
		t.Fatalf("the demo does not wait for the Prime Minister: %+v\n%v", step, h.toolCalls())
	}
	for _, m := range h.byType(deliberation.Skipped) {
		t.Errorf("skipped turn in the demo: %v", m.Content)
	}
	got, _ := os.ReadFile(filepath.Join(h.ws, "README.md"))
	if !strings.Contains(string(got), "sha256sum -c install.sh.sha256") || strings.Contains(string(got), "| sh") {
		t.Fatalf("the enacted amendment did not change README.md:\n%s", got)
	}
	calls := strings.Join(h.toolCalls(), "\n")
	for _, want := range []string{"parliament-share README.md", "parliament-table bill README.md", "parliament-table amendment AMDT-1", "parliament-edit README.md --enact AMDT-1 => 0"} {
		if !strings.Contains(calls, want) {
			t.Errorf("the demo never ran %q:\n%s", want, calls)
		}
	}
	if err := h.input("approve", "A safe, short install.", ""); err != nil {
		t.Fatal(err)
	}
	if step := h.run(nil); !step.Done || step.Outcome != "approved" {
		t.Fatalf("after approval: %+v", step)
	}
	files := checkFiles(t, h.load())
	if _, ok := files["parliament/amendments/AMDT-1.diff"]; !ok {
		t.Error("no amendment diff file")
	}
}
