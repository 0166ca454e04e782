package negotiation

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/logist/logist/internal/deliberation"
)

// Issue 20 item 7: seed 004's structure as a shipped example. Six voting
// delegations, Japan as a non-voting chair whose lines all come from the
// scenario's script library, two non-voting NGOs, and the IMA Assessment
// cited only through its approved excerpts. It plays to its end on the
// scripted agents.
func TestMercuryExample(t *testing.T) {
	e := runExample(t, "demo-mercury")
	if e.outcome != "partially_adopted" {
		t.Errorf("outcome %q", e.outcome)
	}
	if sk := ofType(e.msgs, deliberation.Skipped); len(sk) > 0 {
		t.Errorf("a scripted answer does not fit its turn: %v", sk[0].Content)
	}
	res := ofType(e.msgs, tResult)
	if len(res) != 2 || str(res[0], "option") != "e2" || res[0].Content["adopted"] != true ||
		str(res[1], "option") != "g2" || res[1].Content["adopted"] != false {
		t.Fatalf("results: %v", res)
	}
	if no := res[1].Content["tally"].(map[string]any)["no_votes"].([]any); len(no) != 1 || no[0] != "caldera" {
		t.Errorf("mining no votes %v", no)
	}
	raw, _ := os.ReadFile("../../../jobs/demo-mercury/job.json")
	var man demoManifest
	_ = json.Unmarshal(raw, &man)
	for role, a := range man.Agents {
		if e.calls[role] != len(a.Script) {
			t.Errorf("%s: %d calls for %d scripted steps", role, e.calls[role], len(a.Script))
		}
	}

	g, err := load(e.env)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.voters) != 6 || len(g.ids) != 8 || g.sc.Chair.ID != "japan" || g.parties["japan"] != nil {
		t.Fatalf("voters %v, parties %v, chair %s", g.voters, g.ids, g.sc.Chair.ID)
	}
	// Japan is never called and never votes; the NGOs never vote.
	for _, tn := range e.turns {
		if tn.Participant == "japan" || (tn.Kind == kindVote && !g.parties[tn.Participant].Voting) {
			t.Errorf("turn %s of %s", tn.Kind, tn.Participant)
		}
	}
	// Every chair line is one of the scenario's library (none of the
	// game's defaults): its fixed words are there.
	for _, m := range e.msgs {
		if m.From != "japan" {
			continue
		}
		text := str(m, "text")
		if !fromLibrary(g.sc.Chair.Lines, text) {
			t.Errorf("chair's %s line %q is not from the scenario's library", m.Type, text)
		}
	}

	// Only approved excerpts reach a prompt: each of them reaches some,
	// the rest of the assessment none.
	doc, err := os.ReadFile("../../../jobs/demo-mercury/ima-assessment.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range e.turns {
		for _, secret := range []string{"UNAPPROVED-PASSAGE", "under-reports", "Shared monitoring of fish", "second largest source"} {
			if !strings.Contains(string(doc), secret) {
				t.Fatalf("the assessment lacks %q", secret)
			}
			if strings.Contains(tn.Prompt, secret) {
				t.Errorf("%s's %s prompt carries a passage that is not approved: %q", tn.Participant, tn.Kind, secret)
			}
		}
		if tn.Kind == kindHelper {
			continue
		}
		for _, x := range g.sc.Excerpts {
			if !strings.Contains(tn.Prompt, "["+x.ID+"] ("+x.Section+") "+x.Text) {
				t.Errorf("%s's %s prompt lacks approved excerpt %s", tn.Participant, tn.Kind, x.ID)
			}
		}
	}
}

// fromLibrary: text is one of lines' variants with its placeholders
// filled (each fixed part appears, in order).
func fromLibrary(lines deliberation.Lines, text string) bool {
	for _, vs := range lines {
		for _, v := range vs {
			rest, ok := text, true
			for _, part := range strings.FieldsFunc(v, func(r rune) bool { return r == '{' || r == '}' }) {
				if strings.Contains(v, "{"+part+"}") {
					continue // a placeholder
				}
				i := strings.Index(rest, part)
				if i < 0 {
					ok = false
					break
				}
				rest = rest[i+len(part):]
			}
			if ok {
				return true
			}
		}
	}
	return false
}

// Approved excerpts are the only way into a prompt: a scenario that
// refers to an excerpt not listed, lists one that is not a passage of the
// assessment, or lists excerpts of no assessment is refused, naming the
// field.
func TestExcerptsAreRefusedUnlessApproved(t *testing.T) {
	raw, err := os.ReadFile("../../../jobs/demo-mercury/scenario.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../../jobs/demo-mercury/ima-assessment.md")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		edit func(sc map[string]any)
		want string
	}{
		"as shipped": {func(map[string]any) {}, ""},
		"an issue cites an excerpt not listed": {func(sc map[string]any) {
			is := sc["issues"].([]any)[0].(map[string]any)
			is["excerpts"] = append(is["excerpts"].([]any), "ima-4-1")
		}, `issues[0].excerpts[2]: "ima-4-1" is not an approved excerpt`},
		"an excerpt that is not a passage": {func(sc map[string]any) {
			x := sc["ima_excerpts"].([]any)[0].(map[string]any)
			x["text"] = "Coal plants are the largest source of mercury."
		}, "ima_excerpts[0] (ima-1-2): not a passage of ima-assessment.md"},
		"excerpts of no assessment": {func(sc map[string]any) { delete(sc, "assessment") }, "ima_excerpts: excerpts of no assessment"},
		"a duplicate excerpt": {func(sc map[string]any) {
			xs := sc["ima_excerpts"].([]any)
			sc["ima_excerpts"] = append(xs, xs[0])
		}, `ima_excerpts[4].id: duplicate "ima-1-2"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var sc map[string]any
			if err := json.Unmarshal(raw, &sc); err != nil {
				t.Fatal(err)
			}
			c.edit(sc)
			b, _ := json.Marshal(sc)
			sub := t.TempDir()
			_ = os.WriteFile(sub+"/ima-assessment.md", doc, 0o600)
			if err := os.WriteFile(sub+"/scenario.json", b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Game{}.Load(deliberation.Env{Config: json.RawMessage(`{"scenario": "scenario.json"}`), Dir: sub})
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
