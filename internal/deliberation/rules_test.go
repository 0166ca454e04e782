package deliberation

import (
	"fmt"
	"testing"
)

func TestCountVoteRules(t *testing.T) {
	voters := []string{"a", "b", "c", "d", "e"}
	cases := []struct {
		votes  map[string]string
		rule   VoteRule
		passed bool
		tie    bool
		needed int
	}{
		{map[string]string{"a": "YES", "b": "YES", "c": "NO"}, VoteRule{Rule: RuleMajority}, true, false, 2},
		{map[string]string{"a": "YES", "b": "NO", "c": "ABSTAIN"}, VoteRule{Rule: RuleMajority}, false, true, 2},
		{map[string]string{"a": "YES", "b": "NO"}, VoteRule{Rule: RuleMajority, Tie: TiePasses}, true, true, 2},
		// quorum: floor(5/2)+1 = 3 YES of the 5 voters, whoever else votes.
		{map[string]string{"a": "YES", "b": "YES", "c": "ABSTAIN", "d": "ABSTAIN"}, VoteRule{Rule: RuleQuorum}, false, false, 3},
		{map[string]string{"a": "YES", "b": "YES", "c": "YES", "d": "NO", "e": "NO"}, VoteRule{Rule: RuleQuorum}, true, false, 3},
		// unanimity: an abstention or a missing voter defeats it.
		{map[string]string{"a": "YES", "b": "YES", "c": "YES", "d": "YES", "e": "ABSTAIN"}, VoteRule{Rule: RuleUnanimity}, false, false, 5},
		{map[string]string{"a": "YES", "b": "YES", "c": "YES", "d": "YES", "e": "YES", "japan": "NO"}, VoteRule{Rule: RuleUnanimity}, true, false, 5},
	}
	for i, c := range cases {
		got := Count(c.votes, voters, c.rule)
		if got.Passed != c.passed || got.Tie != c.tie || got.Needed != c.needed {
			t.Errorf("case %d: %+v", i, got)
		}
	}
	got := Count(map[string]string{"a": "YES", "x": "YES"}, voters, VoteRule{Rule: RuleMajority})
	if fmt.Sprint(got.Missing) != "[b c d e]" || len(got.Yes) != 1 {
		t.Errorf("non-voter counted or missing voters wrong: %+v", got)
	}
}

func TestVisibility(t *testing.T) {
	msgs := []Message{
		{ID: "1", From: "usa"},
		{ID: "2", From: "usa", Audience: []string{"usa", "china"}},
		{ID: "3", From: "india", Audience: []string{"india", "usa"}},
	}
	ids := func(ms []Message) string {
		s := ""
		for _, m := range ms {
			s += m.ID
		}
		return s
	}
	for p, want := range map[string]string{"usa": "123", "china": "12", "india": "13", "brazil": "1", Steward: "123"} {
		if got := ids(Visible(msgs, p)); got != want {
			t.Errorf("%s sees %s, want %s", p, got, want)
		}
	}
}

func TestBudget(t *testing.T) {
	s := "One. Two! Three? Four. Five"
	if n := Sentences(s); n != 5 {
		t.Errorf("Sentences = %d", n)
	}
	got, cut := Budget(s, 3)
	if !cut || got != "One. Two! Three?" {
		t.Errorf("Budget = %q %v", got, cut)
	}
	if got, cut := Budget("Version 2.1 is fine. Yes.", 2); cut || got != "Version 2.1 is fine. Yes." {
		t.Errorf("a decimal point is not a sentence end: %q %v", got, cut)
	}
}

func TestRNGIsReproducibleAndIndependent(t *testing.T) {
	a, b := Pick(42, "opening/usa", 10), Pick(42, "opening/usa", 10)
	if a != b {
		t.Error("same seed and salt, different choice")
	}
	diff := false
	for s := int64(0); s < 20; s++ {
		diff = diff || Pick(s, "opening/usa", 1000) != Pick(s, "opening/china", 1000)
	}
	if !diff {
		t.Error("salts do not separate choices")
	}
	l := Lines{"skip": {"{role} passes.", "{role} yields the floor."}}
	first := l.Line(1, "t3", "skip", map[string]string{"role": "Brazil"})
	if again := l.Line(1, "t3", "skip", map[string]string{"role": "Brazil"}); again != first {
		t.Error("line choice not reproducible")
	}
	if got := l.Line(1, "t3", "unknown", nil); got != "[unknown]" {
		t.Errorf("missing line = %q", got)
	}
}

func TestWindow(t *testing.T) {
	msgs := []Message{{ID: "a", Round: 1}, {ID: "b", Round: 2}, {ID: "c", Round: 3}, {ID: "d", Round: 4}}
	recent, older := Window(msgs, map[int]string{1: "r1", 2: "r2", 3: "r3"}, 4, 2)
	if len(recent) != 2 || recent[0].ID != "c" || fmt.Sprint(older) != "[Round 1: r1 Round 2: r2]" {
		t.Errorf("recent %v older %v", recent, older)
	}
	// A round without a summary stays in full.
	recent, _ = Window(msgs, map[int]string{2: "r2"}, 4, 1)
	if len(recent) != 3 {
		t.Errorf("unsummarised rounds dropped: %v", recent)
	}
}
