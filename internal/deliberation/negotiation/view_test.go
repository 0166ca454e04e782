package negotiation

import (
	"slices"
	"strings"
	"testing"

	"github.com/logist/logist/internal/deliberation"
)

// Issue 20 item 6: the view of a party played by a person holds what its
// prompts may hold and nothing more: no private conversation it was not
// part of, no other party's brief or stance, no steward-only message.
func TestPartyViewHidesWhatItMayNotSee(t *testing.T) {
	e := runExample(t, "demo-mercury")
	s := e.load()
	g := s.(*Session).g
	hidden := 0
	for _, party := range g.ids {
		v, err := s.(deliberation.Viewer).View(party)
		if err != nil {
			t.Fatal(err)
		}
		if v.Role != g.agent(party) || v.Participant != party {
			t.Errorf("view of %s: participant %s, role %s", party, v.Participant, v.Role)
		}
		seen := map[string]bool{}
		for _, m := range v.Messages {
			seen[m.ID] = true
			if !m.VisibleTo(party) || (len(m.Audience) > 0 && !slices.Contains(m.Audience, party)) {
				t.Errorf("%s sees %s %s (audience %v)", party, m.Type, m.ID, m.Audience)
			}
			switch m.Type {
			case tStanceUpdate, tBasis, tHelperIgnored, tIgnored:
				t.Errorf("%s sees the steward's %s", party, m.Type)
			}
		}
		// Everything it may see is there.
		for _, m := range e.msgs {
			if m.VisibleTo(party) && !seen[m.ID] {
				t.Errorf("%s does not see %s %s", party, m.Type, m.ID)
			}
			if !m.VisibleTo(party) {
				hidden++
			}
		}
		if !strings.Contains(v.Private, g.parties[party].Brief) {
			t.Errorf("%s's view lacks its brief", party)
		}
		for _, o := range g.ids {
			if o != party && strings.Contains(v.Private, g.parties[o].Brief) {
				t.Errorf("%s's view holds %s's brief", party, o)
			}
		}
		if want := s.(*Session).st.stance(party); !strings.Contains(v.Private, want) {
			t.Errorf("%s's view lacks its own stance:\n%s", party, v.Private)
		}
	}
	if hidden == 0 {
		t.Fatal("no message was hidden from anyone: the test proves nothing")
	}
	if _, err := s.(deliberation.Viewer).View("japan"); err == nil {
		t.Error("the chair has a view: a person could play it")
	}
}

// A party ends only the private conversation it is part of; its name is
// on the chair's line.
func TestPartyEndsOnlyItsOwnConversation(t *testing.T) {
	env := setup(t, demoScenario(t), pairCfg([]string{"aster", "brenn"}, []string{"corvo", "delm"}), 1)
	e := newEngine(t, env)
	ended := false
	e.hook = func(e *engine, n int) {
		if !ended && len(ofType(e.msgs, tMessage)) == 1 {
			if err := e.input(deliberation.Input{Kind: "end_conversation", From: "corvo"}); err == nil || !strings.Contains(err.Error(), "corvo is not in conversation 1") {
				t.Errorf("corvo ended aster and brenn's conversation: %v", err)
			}
			if err := e.input(deliberation.Input{Kind: "end_conversation", From: "brenn"}); err != nil {
				t.Fatalf("brenn ends its conversation: %v", err)
			}
			ended = true
		}
	}
	e.run()
	end := ofType(e.msgs, tConvEnd)[0]
	if str(end, "ended_by") != "brenn" || !strings.Contains(str(end, "text"), "at the request of Brenn Province") {
		t.Errorf("early end %v", end.Content)
	}
}
