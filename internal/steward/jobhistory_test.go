package steward_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
)

// Issue 17 item 5: steward commands are events of jobHistory.json, not
// interactions with an empty raw_response, and take no interaction number:
// the interactions are the agent calls, numbered 0, 1, 2... each with the
// answer seed 002's replay checks.
func TestStewardCommandsAreEventsNotInteractions(t *testing.T) {
	f := newFixture(t)
	f.WriteJob("j", map[string]any{"agents": map[string]any{
		"worker":     testkit.Script(testkit.Step("STUCK", "need help"), testkit.Step("COMPLETED", "done")),
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "fine")),
	}})
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.InterventionRequired {
		t.Fatalf("status %s", m.Status)
	}
	if _, err := f.St.Resume("j", steward.ResumeOptions{Guidance: "try harder"}); err != nil {
		t.Fatal(err)
	}
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("status %s (%s)", m.Status, m.Run.Reason)
	}
	for _, r := range testkit.OfType(f.Records("j"), history.TypeSteward) {
		if r.Interaction != nil {
			t.Errorf("steward record %d takes interaction number %d", r.Seq, *r.Interaction)
		}
	}
	b, err := os.ReadFile(filepath.Join(f.Dir, "j", history.JobHistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	var jh history.JobHistory
	if err := json.Unmarshal(b, &jh); err != nil {
		t.Fatal(err)
	}
	if jh.FormatVersion != 2 {
		t.Errorf("format_version %d", jh.FormatVersion)
	}
	if len(jh.Interactions) != 3 {
		t.Fatalf("%d interactions, want the 3 agent calls: %+v", len(jh.Interactions), jh.Interactions)
	}
	for i, in := range jh.Interactions {
		if in.Sequence != i || in.Role == "Steward" || in.Response == nil || in.Response.RawResponse == "" {
			t.Errorf("interaction %d: sequence %d role %s response %+v", i, in.Sequence, in.Role, in.Response)
		}
	}
	var cmds []string
	for _, ev := range jh.Events {
		if ev.Steward != nil {
			cmds = append(cmds, ev.Steward.Command)
			if ev.StateBefore != string(lifecycle.InterventionRequired) || ev.Steward.Guidance != "try harder" {
				t.Errorf("steward event %+v", ev)
			}
		}
	}
	if len(cmds) != 1 || cmds[0] != "resume" {
		t.Errorf("steward events %v, want [resume]", cmds)
	}
}
