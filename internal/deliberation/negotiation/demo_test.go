package negotiation

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/schemas"
)

type demoManifest struct {
	Workflow string          `json:"workflow"`
	Seed     int64           `json:"seed"`
	Game     json.RawMessage `json:"game"`
	Agents   map[string]struct {
		Provider string `json:"provider"`
		Script   []struct {
			Action  string         `json:"action"`
			Summary string         `json:"summary"`
			Fields  map[string]any `json:"fields"`
		} `json:"script"`
	} `json:"agents"`
}

// runDemo plays jobs/demo-negotiation with its scripted agents the way the
// script provider does: the n-th call of a role plays the n-th step (the
// last repeats), answering {action, evidence_files, summary_for_supervisor,
// ...fields}.
func runDemo(t *testing.T) *engine {
	t.Helper()
	return runExample(t, "demo-negotiation")
}

// runExample plays the example job jobs/<name> so.
func runExample(t *testing.T, name string) *engine {
	t.Helper()
	raw, err := os.ReadFile("../../../jobs/" + name + "/job.json")
	if err != nil {
		t.Fatal(err)
	}
	var man demoManifest
	if err := json.Unmarshal(raw, &man); err != nil {
		t.Fatal(err)
	}
	if man.Workflow != Name {
		t.Fatalf("workflow %q", man.Workflow)
	}
	env := deliberation.Env{Config: man.Game, Seed: man.Seed, Dir: "../../../jobs/" + name}
	e := newEngine(t, env)
	e.answer = func(e *engine, tn deliberation.Turn, call int) deliberation.Result {
		a, ok := man.Agents[tn.Role]
		if !ok || a.Provider != "script" {
			t.Fatalf("no scripted agent %q", tn.Role)
		}
		st := a.Script[min(call, len(a.Script)-1)]
		ans := map[string]any{"action": st.Action, "evidence_files": []any{}, "summary_for_supervisor": st.Summary}
		for k, v := range st.Fields {
			ans[k] = v
		}
		return deliberation.Result{Turn: tn, Answer: ans}
	}
	return e.run()
}

func TestDemoJob(t *testing.T) {
	e := runDemo(t)
	if e.outcome != "partially_adopted" {
		t.Errorf("outcome %q", e.outcome)
	}
	if sk := ofType(e.msgs, deliberation.Skipped); len(sk) > 0 {
		t.Errorf("a scripted answer does not fit its turn: %v", sk[0].Content)
	}
	res := ofType(e.msgs, tResult)
	if len(res) != 2 || str(res[0], "issue") != "allocation" || str(res[0], "option") != "a2" || res[0].Content["adopted"] != true ||
		str(res[1], "issue") != "monitoring" || str(res[1], "option") != "m2" || res[1].Content["adopted"] != false {
		t.Fatalf("results: %v", res)
	}
	no := res[1].Content["tally"].(map[string]any)["no_votes"].([]any)
	if len(no) != 1 || no[0] != "brenn" {
		t.Errorf("monitoring no votes %v", no)
	}
	// Every script is used up exactly (the last step never repeats).
	raw, _ := os.ReadFile("../../../jobs/demo-negotiation/job.json")
	var man demoManifest
	_ = json.Unmarshal(raw, &man)
	for role, a := range man.Agents {
		if e.calls[role] != len(a.Script) {
			t.Errorf("%s: %d calls for %d scripted steps", role, e.calls[role], len(a.Script))
		}
	}
	// The manifest is valid for the manifest schema once "game" is known.
	var doc map[string]any
	_ = json.Unmarshal(raw, &doc)
	delete(doc, "game")
	if err := schemas.Validate(schemas.Manifest, doc); err != nil {
		t.Errorf("job.json: %v", err)
	}
	files, err := e.load().Files()
	if err != nil {
		t.Fatal(err)
	}
	var sn Snapshot
	if err := json.Unmarshal(files["negotiation/state.json"], &sn); err != nil {
		t.Fatal(err)
	}
	if !sn.Done || sn.Phase != "done" || len(sn.Results) != 2 || sn.Round != roundReview {
		t.Errorf("state.json: %+v", sn)
	}
	// brenn's two concessions toward a2 moved it 0.6 → 0.8.
	if a := sn.Stances["brenn"]["allocation"].Acceptance["a2"]; a == nil || *a != 0.8 {
		t.Errorf("brenn a2 = %v", a)
	}
	var ledger struct {
		Messages []deliberation.Message `json:"messages"`
	}
	if err := json.Unmarshal(files["negotiation/ledger.json"], &ledger); err != nil || len(ledger.Messages) != len(e.msgs) {
		t.Errorf("ledger.json: %v, %d messages", err, len(ledger.Messages))
	}
	if !strings.Contains(e.load().State(), "partially_adopted") {
		t.Errorf("State() = %q", e.load().State())
	}
}
