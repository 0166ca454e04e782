package negotiation

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/schemas"
)

func pairCfg(pairs ...[]string) map[string]any {
	var ps []any
	for _, p := range pairs {
		ps = append(ps, []any{p[0], p[1]})
	}
	return map[string]any{"conversations": ps}
}

func TestRoundStructureAndConversationCaps(t *testing.T) {
	e := newEngine(t, setup(t, demoScenario(t), pairCfg([]string{"aster", "brenn"}, []string{"corvo", "riverkeepers"}), 1)).run()
	var rounds []string
	for _, m := range ofType(e.msgs, tRoundStart) {
		rounds = append(rounds, fmt.Sprint(m.Content["round"]))
	}
	if strings.Join(rounds, ",") != "1,2,3,4" {
		t.Fatalf("rounds %v", rounds)
	}
	// Round 1 makes no call: the first turn is a Round 2 message.
	if k := e.steps[0][0].Kind; k != kindConversation {
		t.Errorf("first turn is %s", k)
	}
	// Each conversation: start, 5 messages a side alternating, the
	// chair's interruption, one final each, end — all private to the pair.
	for c, pair := range [][]string{{"aster", "brenn"}, {"corvo", "riverkeepers"}} {
		var seq []string
		for _, m := range e.msgs {
			if m.Round == 2 && m.Type != tRoundStart && m.Content["conversation"] == float64(c+1) {
				seq = append(seq, m.Type+":"+m.From)
				if !reflect.DeepEqual(m.Audience, pair) {
					t.Errorf("%s audience %v", m.Type, m.Audience)
				}
			}
		}
		a, b := pair[0], pair[1]
		want := []string{tConvStart + ":chair"}
		for i := 0; i < 5; i++ {
			want = append(want, tMessage+":"+a, tMessage+":"+b)
		}
		want = append(want, tInterruption+":chair", tMessage+":"+a, tMessage+":"+b, tConvEnd+":chair")
		if !reflect.DeepEqual(seq, want) {
			t.Errorf("conversation %d:\n got %v\nwant %v", c+1, seq, want)
		}
	}
	// Only the active partner (Round 2) or the scheduled speaker (Round 3)
	// is called; a vote is a roll call of the voting parties only, each
	// in its own turn (seed 004: no bulk "query all agents").
	voters := []string{"aster", "brenn", "corvo", "delm"}
	var called []string
	for _, turns := range e.steps {
		switch turns[0].Kind {
		case kindConversation, kindFinal, kindSpeech, kindVote:
			if len(turns) != 1 {
				t.Errorf("%s step with %d turns", turns[0].Kind, len(turns))
			}
		}
		if turns[0].Kind == kindVote {
			called = append(called, turns[0].Participant)
		}
	}
	if want := append(append([]string{}, voters...), voters...); !reflect.DeepEqual(called, want) {
		t.Errorf("votes asked %v, want a roll call %v per issue", called, voters)
	}
	if e.outcome != "all_adopted" {
		t.Errorf("outcome %s", e.outcome)
	}
}

func TestDefaultConversationScheduleIsSeeded(t *testing.T) {
	pairsOf := func(seed int64) [][]any {
		e := newEngine(t, setup(t, demoScenario(t), nil, seed)).run()
		var out [][]any
		for _, m := range ofType(e.msgs, tConvStart) {
			out = append(out, m.Content["pair"].([]any))
		}
		return out
	}
	a, b := pairsOf(3), pairsOf(3)
	if !reflect.DeepEqual(a, b) || len(a) != 2 {
		t.Fatalf("schedule %v vs %v", a, b)
	}
	seen := map[any]bool{}
	for _, p := range a {
		for _, x := range p {
			if seen[x] {
				t.Errorf("%v in two conversations", x)
			}
			seen[x] = true
		}
	}
}

func openingsOf(e *engine) map[string]string {
	out := map[string]string{}
	for _, m := range ofType(e.msgs, tOpening) {
		out[m.From] = str(m, "variant_id") + "|" + str(m, "text")
	}
	return out
}

func TestOpeningsFromSortedVariantsBySeed(t *testing.T) {
	sc := demoScenario(t)
	e := newEngine(t, setup(t, sc, nil, 11)).run()
	var parsed Scenario
	b, _ := json.Marshal(sc)
	_ = json.Unmarshal(b, &parsed)
	got := openingsOf(e)
	for _, p := range parsed.Parties {
		vs := sortedVariants(p.Openings)
		v := vs[deliberation.Pick(11, "round1/opening/"+p.ID, len(vs))]
		if got[p.ID] != v.ID+"|"+v.Text {
			t.Errorf("%s opening %q, want %s", p.ID, got[p.ID], v.ID)
		}
	}
	if len(got) != len(parsed.Parties) {
		t.Errorf("%d openings", len(got))
	}
	// The order of the variants in the file does not matter.
	for _, p := range sc["parties"].([]any) {
		ops := p.(map[string]any)["openings"].([]any)
		slices.Reverse(ops)
	}
	if r := openingsOf(newEngine(t, setup(t, sc, nil, 11)).run()); !reflect.DeepEqual(r, got) {
		t.Errorf("reordered variants changed the openings:\n%v\n%v", r, got)
	}
	for _, tn := range e.turns {
		if strings.Contains(tn.Kind, "opening") {
			t.Errorf("an opening was a model call")
		}
	}
}

func TestSeededReproducibility(t *testing.T) {
	run := func(seed int64) *engine {
		return newEngine(t, setup(t, demoScenario(t), map[string]any{"helper": "helper"}, seed)).run()
	}
	a, b := run(5), run(5)
	if ledgerJSON(t, a.msgs) != ledgerJSON(t, b.msgs) {
		t.Fatal("same seed, different ledgers")
	}
	base := openingsOf(a)
	differs := false
	for seed := int64(6); seed < 30 && !differs; seed++ {
		c := run(seed)
		differs = !reflect.DeepEqual(openingsOf(c), base)
		if differs && ledgerJSON(t, c.msgs) == ledgerJSON(t, a.msgs) {
			t.Error("different openings, same ledger")
		}
	}
	if !differs {
		t.Error("no seed changes the openings")
	}
}

func TestStewardEndsConversationEarly(t *testing.T) {
	env := setup(t, demoScenario(t), pairCfg([]string{"aster", "brenn"}, []string{"corvo", "delm"}), 1)
	e := newEngine(t, env)
	ended := false
	e.hook = func(e *engine, n int) {
		if !ended && len(ofType(e.msgs, tMessage)) == 3 {
			if err := e.input(deliberation.Input{Kind: "end_conversation", Content: map[string]any{"conversation": 2}}); err == nil {
				t.Error("ending conversation 2 while 1 is under way was accepted")
			}
			if err := e.input(deliberation.Input{Kind: "end_conversation", From: deliberation.Steward, Content: map[string]any{"conversation": 1}}); err != nil {
				t.Fatalf("end_conversation: %v", err)
			}
			ended = true
		}
	}
	e.run()
	ends := ofType(e.msgs, tConvEnd)
	if len(ends) != 2 || ends[0].Content["early"] != true || str(ends[0], "ended_by") != deliberation.Steward || ends[1].Content["early"] != nil {
		t.Fatalf("conversation ends %v", ends)
	}
	var c1 []string
	for _, m := range e.msgs {
		if m.Content["conversation"] == float64(1) {
			c1 = append(c1, m.Type)
		}
	}
	if strings.Join(c1, " ") != "CONVERSATION_START MESSAGE MESSAGE MESSAGE CONVERSATION_END" {
		t.Errorf("conversation 1: %v", c1)
	}
	if n := len(ofType(e.msgs, tInterruption)); n != 1 {
		t.Errorf("%d interruptions, want 1 (conversation 2 only)", n)
	}
	// Outside Round 2 the input is out of order.
	if err := e.input(deliberation.Input{Kind: "end_conversation"}); err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Errorf("after the end: %v", err)
	}
	if err := e.input(deliberation.Input{Kind: "pm_decision"}); err == nil {
		t.Error("unknown input accepted")
	}
	e2 := newEngine(t, env)
	e2.hook = func(e *engine, n int) {
		if len(ofType(e.msgs, tSpeech)) == 1 {
			if err := e.input(deliberation.Input{Kind: "end_conversation"}); err == nil || !strings.Contains(err.Error(), "out of order") {
				t.Errorf("in Round 3: %v", err)
			}
		}
	}
	e2.run()
}

func TestSpeakerSchedule(t *testing.T) {
	fixed := []string{"delm", "aster", "riverkeepers"}
	e := newEngine(t, setup(t, demoScenario(t), map[string]any{"speakers": []any{"delm", "aster", "riverkeepers"}}, 1)).run()
	for _, intro := range ofType(e.msgs, tIssueIntro) {
		issue := str(intro, "issue")
		var got []string
		for _, tn := range e.turns {
			if tn.Kind == kindSpeech && tn.Data["issue"] == issue {
				got = append(got, tn.Participant)
			}
		}
		if !reflect.DeepEqual(got, fixed) || fmt.Sprint(intro.Content["speakers"]) != fmt.Sprint([]any{"delm", "aster", "riverkeepers"}) {
			t.Errorf("%s speakers %v", issue, got)
		}
	}
	// Default: the seeded order of all parties (sorted first), per issue.
	e = newEngine(t, setup(t, demoScenario(t), nil, 9)).run()
	ids := []string{"aster", "brenn", "corvo", "delm", "riverkeepers"}
	for _, intro := range ofType(e.msgs, tIssueIntro) {
		issue := str(intro, "issue")
		perm := deliberation.RNG(9, "round3/speakers/"+issue).Perm(len(ids))
		var want, got []string
		for _, i := range perm {
			want = append(want, ids[i])
		}
		for _, tn := range e.turns {
			if tn.Kind == kindSpeech && tn.Data["issue"] == issue {
				got = append(got, tn.Participant)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: speakers %v, want %v", issue, got, want)
		}
	}
}

func TestFailedOrEmptyTurnsAreSkipped(t *testing.T) {
	e := newEngine(t, setup(t, demoScenario(t), map[string]any{"speakers": []any{"aster", "riverkeepers", "delm"}, "conversations": []any{[]any{"aster", "brenn"}}}, 1))
	e.answer = func(e *engine, tn deliberation.Turn, call int) deliberation.Result {
		switch {
		case tn.Participant == "brenn" && tn.Kind == kindConversation && call == 0:
			return deliberation.Result{Turn: tn, Error: "agent crashed"}
		case tn.Participant == "riverkeepers" && tn.Kind == kindSpeech && tn.Data["issue"] == "allocation":
			return deliberation.Result{Turn: tn, Error: "timeout"}
		case tn.Participant == "aster" && tn.Kind == kindSpeech && tn.Data["issue"] == "allocation":
			return deliberation.Result{Turn: tn, Answer: map[string]any{"text": "   "}}
		case tn.Participant == "delm" && tn.Kind == kindVote && tn.Data["issue"] == "monitoring":
			return deliberation.Result{Turn: tn, Answer: map[string]any{"vote": "MAYBE"}} // fails the schema
		}
		return deliberation.Result{Turn: tn, Answer: defaultAnswer(tn, call)}
	}
	e.run()
	sk := ofType(e.msgs, deliberation.Skipped)
	if len(sk) != 4 {
		t.Fatalf("%d skipped: %v", len(sk), types(e.msgs))
	}
	line := "has not taken the turn. It is recorded as skipped; we move on." // the scenario's own skip line
	for _, m := range sk {
		if m.From != "chair" || !strings.Contains(str(m, "text"), line) || str(m, "reason") == "" {
			t.Errorf("skip %v", m.Content)
		}
	}
	if str(sk[0], "party") != "brenn" || !reflect.DeepEqual(sk[0].Audience, []string{"aster", "brenn"}) {
		t.Errorf("conversation skip %v %v", sk[0].Content, sk[0].Audience)
	}
	// The skip counts as brenn's message: still 5 slots a side.
	var c1 int
	for _, m := range e.msgs {
		if m.Round == 2 && (m.Type == tMessage || m.Type == deliberation.Skipped) && m.Content["stage"] != "final" {
			c1++
		}
	}
	if c1 != 10 {
		t.Errorf("%d exchange slots", c1)
	}
	if str(sk[1], "party") != "aster" || str(sk[1], "reason") != "empty answer" || str(sk[2], "party") != "riverkeepers" || str(sk[2], "reason") != "timeout" {
		t.Errorf("speech skips %v / %v", sk[1].Content, sk[2].Content)
	}
	// The cursor advanced: each scheduled speaker got exactly one slot.
	var calls []string
	for _, m := range ofType(e.msgs, tSpeakerCall) {
		calls = append(calls, str(m, "party"))
	}
	if strings.Join(calls, ",") != "aster,riverkeepers,delm,aster,riverkeepers,delm" {
		t.Errorf("speaker calls %v", calls)
	}
	// A skipped vote is a missing vote: unanimity fails.
	if str(sk[3], "party") != "delm" || str(sk[3], "kind") != kindVote {
		t.Errorf("vote skip %v", sk[3].Content)
	}
	res := ofType(e.msgs, tResult)
	if res[0].Content["adopted"] != true || res[1].Content["adopted"] != false {
		t.Errorf("results %v %v", res[0].Content, res[1].Content)
	}
}

// tinyGame is a game of voters v1, v2 (and the NGO ngo) on one issue
// whose options have the given acceptances (nil: unacceptable).
func tinyGame(t *testing.T, acc map[string][]*float64, ngo []*float64) (*game, *state) {
	t.Helper()
	opts := slices.Sorted(maps.Keys(acc))
	var options []any
	stance := func(i int, vals func(o string) *float64) map[string]any {
		a := map[string]any{}
		pref := ""
		for _, o := range opts {
			if v := vals(o); v != nil {
				a[o] = *v
				if pref == "" {
					pref = o
				}
			} else {
				a[o] = nil
			}
		}
		return map[string]any{"x": map[string]any{"preferred": pref, "firmness": 0.5, "acceptance": a}}
	}
	for _, o := range opts {
		options = append(options, map[string]any{"id": o, "title": strings.ToUpper(o)})
	}
	var parties []any
	for i, id := range []string{"v1", "v2"} {
		parties = append(parties, map[string]any{"id": id, "name": id, "voting": true, "openings": []any{map[string]any{"id": "o", "text": "hi"}},
			"stances": stance(i, func(o string) *float64 { return acc[o][i] })})
	}
	parties = append(parties, map[string]any{"id": "ngo", "name": "ngo", "voting": false, "openings": []any{map[string]any{"id": "o", "text": "hi"}},
		"stances": stance(0, func(o string) *float64 { return ngo[slices.Index(opts, o)] })})
	doc := map[string]any{"title": "t", "chair": map[string]any{"id": "chair", "name": "Chair"}, "parties": parties,
		"issues": []any{map[string]any{"id": "x", "title": "X", "options": options}}}
	raw, _ := json.Marshal(doc)
	sc, err := ParseScenario("tiny.json", raw)
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGame(&Config{Scenario: "tiny.json", MessagesPerSide: 5, Window: 2}, sc, 1, raw)
	if err != nil {
		t.Fatal(err)
	}
	return g, newState(g)
}

func f(x float64) *float64 { return &x }

func TestProposalBySupportTiesAndNulls(t *testing.T) {
	cases := []struct {
		name     string
		acc      map[string][]*float64
		ngo      []*float64
		want     string
		excluded []string
	}{
		{"most support", map[string][]*float64{"a": {f(0.2), f(0.3)}, "b": {f(0.9), f(0.8)}, "c": {f(0.5), f(0.5)}}, []*float64{f(1), f(0), f(0)}, "b", nil},
		{"tie goes to the lowest id", map[string][]*float64{"a": {f(0.1), f(0.1)}, "b": {f(0.5), f(0.5)}, "c": {f(0.6), f(0.4)}}, []*float64{f(0), f(0), f(1)}, "b", nil},
		{"float noise is no tie breaker", map[string][]*float64{"a": {f(0.3), f(0)}, "b": {f(0.1), f(0.2)}}, []*float64{f(0), f(1)}, "a", nil},
		{"a null is never proposed while another exists", map[string][]*float64{"a": {f(1), nil}, "b": {f(0.2), f(0.2)}, "c": {f(0.1), f(0.1)}}, []*float64{f(1), f(0), f(0)}, "b", []string{"a"}},
		{"only nulls: the best of them", map[string][]*float64{"a": {f(1), nil}, "b": {nil, f(0.5)}}, []*float64{f(1), f(1)}, "a", []string{"a", "b"}},
		{"the NGO's acceptance is no support", map[string][]*float64{"a": {f(0.5), f(0.5)}, "b": {f(0.4), f(0.5)}}, []*float64{nil, f(1)}, "a", nil},
	}
	for _, c := range cases {
		g, st := tinyGame(t, c.acc, c.ngo)
		got, _, excl := st.propose(g.sc.Issues[0])
		if got != c.want || !reflect.DeepEqual(excl, c.excluded) {
			t.Errorf("%s: proposed %s excluded %v, want %s %v", c.name, got, excl, c.want, c.excluded)
		}
	}
}

func TestVotesOfVotersOnlyUnanimity(t *testing.T) {
	e := newEngine(t, setup(t, demoScenario(t), nil, 2))
	e.answer = func(e *engine, tn deliberation.Turn, call int) deliberation.Result {
		if tn.Kind == kindVote && tn.Data["issue"] == "monitoring" && tn.Participant == "delm" {
			return deliberation.Result{Turn: tn, Answer: map[string]any{"vote": "NO"}}
		}
		return deliberation.Result{Turn: tn, Answer: defaultAnswer(tn, call)}
	}
	// The NGO answers a vote nobody asked it for: ignored and logged.
	e.extra = func(e *engine, turns []deliberation.Turn) []deliberation.Result {
		if turns[0].Kind != kindVote || turns[0].Participant != "aster" {
			return nil
		}
		tn := deliberation.Turn{Participant: "riverkeepers", Role: "riverkeepers", Kind: kindVote, Schema: SchemaVote,
			Data: map[string]any{"step": fmt.Sprintf("r3/%s/vote/riverkeepers", turns[0].Data["issue"])}}
		return []deliberation.Result{{Turn: tn, Answer: map[string]any{"vote": "NO"}}}
	}
	e.run()
	for _, tn := range e.turns {
		if tn.Kind == kindVote && tn.Participant == "riverkeepers" {
			t.Error("the NGO was asked to vote")
		}
	}
	for _, m := range ofType(e.msgs, tVote) {
		if m.From == "riverkeepers" {
			t.Error("an NGO vote was recorded")
		}
	}
	ign := ofType(e.msgs, tIgnored)
	if len(ign) != 2 || !strings.Contains(str(ign[0], "reason"), "non-voting") || !reflect.DeepEqual(ign[0].Audience, []string{deliberation.Steward}) {
		t.Errorf("ignored %v", ign)
	}
	res := ofType(e.msgs, tResult)
	tally := res[0].Content["tally"].(map[string]any)
	if res[0].Content["adopted"] != true || tally["rule"] != deliberation.RuleUnanimity || tally["needed"] != float64(4) {
		t.Errorf("allocation %v", res[0].Content)
	}
	if res[1].Content["adopted"] != false || fmt.Sprint(res[1].Content["tally"].(map[string]any)["no_votes"]) != "[delm]" {
		t.Errorf("monitoring %v", res[1].Content)
	}
}

func TestFailedIssueIsNeverRevisited(t *testing.T) {
	e := newEngine(t, setup(t, demoScenario(t), nil, 4))
	e.answer = func(e *engine, tn deliberation.Turn, call int) deliberation.Result {
		if tn.Kind == kindVote && tn.Data["issue"] == "allocation" {
			return deliberation.Result{Turn: tn, Answer: map[string]any{"vote": "NO"}}
		}
		return deliberation.Result{Turn: tn, Answer: defaultAnswer(tn, call)}
	}
	e.run()
	for _, typ := range []string{tIssueIntro, tProposal, tVoteCall, tResult} {
		var issues []string
		for _, m := range ofType(e.msgs, typ) {
			issues = append(issues, str(m, "issue"))
		}
		if strings.Join(issues, ",") != "allocation,monitoring" {
			t.Errorf("%s for %v", typ, issues)
		}
	}
	closed := false
	for _, m := range e.msgs {
		if m.Type == tResult && str(m, "issue") == "allocation" {
			closed = true
		} else if closed && str(m, "issue") == "allocation" {
			t.Errorf("allocation revisited: %s %v", m.Type, m.Content)
		}
	}
	if e.outcome != "partially_adopted" {
		t.Errorf("outcome %s", e.outcome)
	}
}

// checkStances asserts the stance rules over a whole ledger: each update
// changes only the author of its message, only allowed issues, within the
// bounds, never a null; values stay in [0,1].
func checkStances(t *testing.T, e *engine, sc *Scenario) {
	t.Helper()
	nulls := map[string]bool{}
	for _, p := range sc.Parties {
		for is, s := range p.Stances {
			for o, a := range s.Acceptance {
				if a == nil {
					nulls[p.ID+"/"+is+"/"+o] = true
				}
			}
		}
	}
	for _, m := range ofType(e.msgs, tStanceUpdate) {
		if !reflect.DeepEqual(m.Audience, []string{deliberation.Steward}) || m.From != system {
			t.Errorf("stance update visible to %v from %s", m.Audience, m.From)
		}
		target := int(m.Content["target_index"].(float64))
		src := e.msgs[target]
		party := str(m, "party")
		if src.From != party {
			t.Errorf("update of %s after a message of %s", party, src.From)
		}
		allowed := map[string]bool{str(src, "issue"): src.Type == tSpeech}
		if src.Type == tMessage {
			xs, _ := src.Content["issues"].([]any)
			for _, x := range xs {
				allowed[x.(string)] = true
			}
		}
		changes, _ := m.Content["changes"].([]any)
		for _, x := range changes {
			ch := x.(map[string]any)
			is, _ := ch["issue"].(string)
			if !allowed[is] {
				t.Errorf("%s changed on %s after %s %v", party, is, src.Type, src.Content)
			}
			switch ch["field"] {
			case "acceptance":
				if nulls[party+"/"+is+"/"+ch["option"].(string)] {
					t.Errorf("null acceptance changed: %v", ch)
				}
				if d := math.Abs(ch["delta"].(float64)); d > stepAcceptance+eps || ch["to"].(float64) < 0 || ch["to"].(float64) > 1 {
					t.Errorf("out of bounds: %v", ch)
				}
			case "firmness":
				if d := math.Abs(ch["delta"].(float64)); d > stepFirmness+eps || ch["to"].(float64) < 0 || ch["to"].(float64) > 1 {
					t.Errorf("firmness out of bounds: %v", ch)
				}
			}
		}
	}
	s := e.load().(*Session)
	for key := range nulls {
		parts := strings.Split(key, "/")
		if s.st.stances[parts[0]][parts[1]].Acceptance[parts[2]] != nil {
			t.Errorf("%s is no longer null", key)
		}
	}
}

func TestStanceUpdateRules(t *testing.T) {
	sc := demoScenario(t)
	e := newEngine(t, setup(t, sc, map[string]any{"conversations": []any{[]any{"aster", "brenn"}}, "messages_per_side": 1, "speakers": []any{"corvo", "brenn"}}, 1))
	cs := func(xs ...string) []any {
		var out []any
		for i := 0; i < len(xs); i += 3 {
			out = append(out, map[string]any{"issue": xs[i], "option": xs[i+1], "direction": xs[i+2]})
		}
		return out
	}
	e.answer = func(e *engine, tn deliberation.Turn, call int) deliberation.Result {
		a := map[string]any{"text": "Words."}
		switch {
		case tn.Participant == "aster" && tn.Kind == kindConversation:
			// Twice toward a1 is one step; monitoring is not named.
			a["issues"] = []any{"allocation"}
			a["concessions"] = cs("allocation", "a1", "toward", "allocation", "a1", "toward", "monitoring", "m1", "toward", "allocation", "a9", "toward")
		case tn.Participant == "brenn" && tn.Kind == kindConversation:
			a["issues"] = []any{"allocation", "monitoring"}
			a["concessions"] = cs("allocation", "a3", "toward", "monitoring", "m1", "toward", "allocation", "a2", "toward")
		case tn.Participant == "corvo" && tn.Kind == kindSpeech && tn.Data["issue"] == "allocation":
			a["concessions"] = cs("allocation", "a3", "away", "monitoring", "m2", "toward")
		case tn.Participant == "brenn" && tn.Kind == kindSpeech && tn.Data["issue"] == "monitoring":
			a["concessions"] = cs("monitoring", "m1", "toward", "monitoring", "m2", "away")
		case tn.Kind == kindVote:
			return deliberation.Result{Turn: tn, Answer: map[string]any{"vote": "YES"}}
		}
		return deliberation.Result{Turn: tn, Answer: a}
	}
	e.run()
	var parsed Scenario
	b, _ := json.Marshal(sc)
	_ = json.Unmarshal(b, &parsed)
	checkStances(t, e, &parsed)
	ups := ofType(e.msgs, tStanceUpdate)
	if len(ups) != 4 {
		t.Fatalf("%d updates: %v", len(ups), types(e.msgs))
	}
	want := []string{
		// aster: a1 0.6→0.7 once; monitoring not named; a9 unknown.
		"aster: allocation a1 0.6→0.7; allocation firmness 0.8→0.75; ignored monitoring/m1: issue not named in the message; ignored allocation/a9: unknown option",
		// brenn: a3 is null (immutable); m1 is its preferred at 0.9 → 1.0 (firmer).
		"brenn: allocation a2 0.6→0.7; monitoring m1 0.9→1; allocation firmness 0.7→0.65; monitoring firmness 0.9→0.95; ignored allocation/a3: unacceptable (null) acceptance is immutable",
		// corvo in the allocation debate, away from its preferred a3
		// (softer); monitoring is not the active issue.
		"corvo: allocation a3 0.9→0.8; allocation firmness 0.6→0.55; ignored monitoring/m2: not the active issue",
		// brenn: m1 already at 1.0; away from m2 hardens.
		"brenn: monitoring m2 0.3→0.2; monitoring firmness 0.95→1; ignored monitoring/m1: acceptance already at 1",
	}
	for i, m := range ups {
		if got := str(m, "text"); got != want[i] {
			t.Errorf("update %d:\n got %s\nwant %s", i, got, want[i])
		}
		if len(m.Content["reasons"].([]any)) == 0 {
			t.Errorf("update %d without reasons", i)
		}
	}
	// The stances in force feed the proposal and the vote prompts.
	basis := ofType(e.msgs, tBasis)[0]
	if s := basis.Content["support"].(map[string]any); s["a1"] != 2.6 || s["a2"] != 3.1 || str(basis, "option") != "a2" ||
		str(ofType(e.msgs, tProposal)[0], "option") != "a2" || !reflect.DeepEqual(basis.Audience, []string{deliberation.Steward}) {
		t.Errorf("basis %v", basis)
	}
	for _, tn := range e.turns {
		if tn.Kind == kindVote && tn.Participant == "brenn" && tn.Data["issue"] == "allocation" && !strings.Contains(tn.Prompt, "your acceptance 0.70") {
			t.Errorf("brenn's vote prompt lacks its current acceptance:\n%s", tn.Prompt)
		}
	}
}

// TestStanceInvariantsUnderRandomConcessions: whatever the parties
// concede, the bounds, the null rule and the scope rules hold.
func TestStanceInvariantsUnderRandomConcessions(t *testing.T) {
	sc := demoScenario(t)
	var parsed Scenario
	b, _ := json.Marshal(sc)
	_ = json.Unmarshal(b, &parsed)
	issues := []string{"allocation", "monitoring", "nope"}
	opts := []string{"a1", "a2", "a3", "m1", "m2", "m3"}
	for seed := uint64(1); seed <= 4; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		e := newEngine(t, setup(t, sc, map[string]any{"messages_per_side": 3}, int64(seed)))
		e.answer = func(e *engine, tn deliberation.Turn, call int) deliberation.Result {
			if tn.Kind == kindVote {
				return deliberation.Result{Turn: tn, Answer: map[string]any{"vote": []string{"YES", "NO"}[r.IntN(2)]}}
			}
			var cs, is []any
			for i := r.IntN(6); i > 0; i-- {
				cs = append(cs, map[string]any{"issue": issues[r.IntN(3)], "option": opts[r.IntN(6)], "direction": []string{"toward", "away"}[r.IntN(2)]})
			}
			for _, x := range issues[:2] {
				if r.IntN(2) == 0 {
					is = append(is, x)
				}
			}
			a := map[string]any{"text": "Words.", "concessions": cs}
			if is != nil {
				a["issues"] = is
			}
			return deliberation.Result{Turn: tn, Answer: a}
		}
		e.run()
		checkStances(t, e, &parsed)
	}
}

func TestStanceHelper(t *testing.T) {
	env := setup(t, demoScenario(t), map[string]any{"helper": "helper", "conversations": []any{[]any{"aster", "brenn"}}, "messages_per_side": 3}, 1)
	e := newEngine(t, env)
	e.answer = func(e *engine, tn deliberation.Turn, call int) deliberation.Result {
		if tn.Kind != kindHelper {
			return deliberation.Result{Turn: tn, Answer: defaultAnswer(tn, call)}
		}
		target := e.msgs[tn.Data["target_index"].(int)]
		issue := str(target, "issue")
		if issue == "" {
			issue = "allocation" // default conversation answers name it
		}
		opt := map[string]string{"allocation": "a1", "monitoring": "m2"}[issue]
		switch call {
		case 0: // valid
			return deliberation.Result{Turn: tn, Answer: map[string]any{"changed": true, "reasons": []any{"sounded softer"},
				"deltas": map[string]any{issue: map[string]any{"acceptance": map[string]any{opt: 0.05}, "firmness": -0.05}}}}
		case 1: // touches brenn's null a3
			return deliberation.Result{Turn: tn, Answer: map[string]any{"changed": true, "reasons": []any{"x"},
				"deltas": map[string]any{"allocation": map[string]any{"acceptance": map[string]any{"a3": 0.05}}}}}
		case 2: // beyond the bound
			return deliberation.Result{Turn: tn, Answer: map[string]any{"changed": true, "reasons": []any{"x"},
				"deltas": map[string]any{issue: map[string]any{"acceptance": map[string]any{opt: 0.3}}}}}
		case 3:
			return deliberation.Result{Turn: tn, Error: "helper timed out"}
		case 4: // an issue the message does not name
			return deliberation.Result{Turn: tn, Answer: map[string]any{"changed": true, "reasons": []any{"x"},
				"deltas": map[string]any{"monitoring": map[string]any{"firmness": 0.01}}}}
		}
		return deliberation.Result{Turn: tn, Answer: map[string]any{"changed": false}}
	}
	// A stale helper result (of an earlier target) arrives late.
	e.extra = func(e *engine, turns []deliberation.Turn) []deliberation.Result {
		if len(ofType(e.msgs, tSpeech)) != 1 || turns[0].Kind != kindSpeech {
			return nil
		}
		tn := deliberation.Turn{Participant: kindHelper, Role: "helper", Kind: kindHelper, Data: map[string]any{"step": "helper/9"}}
		return []deliberation.Result{{Turn: tn, Answer: map[string]any{"changed": true, "reasons": []any{"late"},
			"deltas": map[string]any{"allocation": map[string]any{"firmness": 0.05}}}}}
	}
	e.run()
	for _, turns := range e.steps {
		for _, tn := range turns {
			if tn.Kind == kindHelper && (len(turns) < 2 || tn.Schema != SchemaHelper || tn.Role != "helper") {
				t.Errorf("helper turn alone or misconfigured: %+v", tn)
			}
		}
	}
	applied := []deliberation.Message{}
	for _, m := range ofType(e.msgs, tStanceUpdate) {
		if str(m, "source") == sourceHelper {
			applied = append(applied, m)
		}
	}
	if len(applied) != 1 || !strings.Contains(str(applied[0], "text"), "0.6→0.65") {
		t.Fatalf("helper updates applied: %v", applied)
	}
	var reasons []string
	for _, m := range ofType(e.msgs, tHelperIgnored) {
		reasons = append(reasons, str(m, "reason"))
		if !reflect.DeepEqual(m.Audience, []string{deliberation.Steward}) {
			t.Errorf("helper log visible to %v", m.Audience)
		}
	}
	for _, want := range []string{"null acceptance", "exceeds", "failed: helper timed out", "outside the message's scope", "late", "no change proposed"} {
		found := false
		for _, r := range reasons {
			found = found || strings.Contains(r, want)
		}
		if !found {
			t.Errorf("no helper result ignored for %q: %v", want, reasons)
		}
	}
	var parsed Scenario
	b, _ := json.Marshal(demoScenario(t))
	_ = json.Unmarshal(b, &parsed)
	checkStances(t, e, &parsed)

	// Helpers that never help leave the game as it is without them.
	strip := func(ms []deliberation.Message) string {
		var out []string
		for _, m := range ms {
			if m.From != system {
				b, _ := json.Marshal([]any{m.Type, m.From, m.Audience, m.Content})
				out = append(out, string(b))
			}
		}
		return strings.Join(out, "\n")
	}
	without := newEngine(t, setup(t, demoScenario(t), map[string]any{"conversations": []any{[]any{"aster", "brenn"}}}, 1)).run()
	failing := newEngine(t, setup(t, demoScenario(t), map[string]any{"helper": "helper", "conversations": []any{[]any{"aster", "brenn"}}}, 1))
	failing.answer = func(e *engine, tn deliberation.Turn, call int) deliberation.Result {
		if tn.Kind == kindHelper {
			return deliberation.Result{Turn: tn, Error: "down"}
		}
		return deliberation.Result{Turn: tn, Answer: defaultAnswer(tn, call)}
	}
	failing.run()
	if strip(without.msgs) != strip(failing.msgs) {
		t.Error("a failing helper changed the game")
	}
}

func TestInformationBoundaries(t *testing.T) {
	const convMarker, briefMarker = "ZEBRA-7731-PRIVATE", "BRIEF-MARKER-5521"
	for _, window := range []int{1, 2} {
		sc := demoScenario(t)
		aster := sc["parties"].([]any)[0].(map[string]any)
		aster["brief"] = aster["brief"].(string) + " " + briefMarker
		cfg := pairCfg([]string{"aster", "brenn"}, []string{"corvo", "delm"})
		cfg["window"] = window
		cfg["helper"] = "helper"
		e := newEngine(t, setup(t, sc, cfg, 1))
		e.answer = func(e *engine, tn deliberation.Turn, call int) deliberation.Result {
			if tn.Participant == "aster" && tn.Kind == kindConversation && call == 0 {
				return deliberation.Result{Turn: tn, Answer: map[string]any{"text": convMarker + " is our secret offer.", "issues": []any{"allocation"},
					"concessions": []any{map[string]any{"issue": "allocation", "option": "a1", "direction": "toward"}}}}
			}
			return deliberation.Result{Turn: tn, Answer: defaultAnswer(tn, call)}
		}
		e.run()
		update := str(ofType(e.msgs, tStanceUpdate)[0], "text")
		basis := str(ofType(e.msgs, tBasis)[0], "text")
		seenByBrenn := false
		for _, tn := range e.turns {
			if tn.Kind == kindHelper {
				continue // the helper is Logist's tool, not a party
			}
			p := tn.Participant
			if p != "aster" && p != "brenn" && strings.Contains(tn.Prompt, convMarker) {
				t.Errorf("window %d: %s's %s prompt holds the private conversation", window, p, tn.Kind)
			}
			if p == "brenn" && tn.Kind == kindSpeech && strings.Contains(tn.Prompt, convMarker) {
				seenByBrenn = true
			}
			if p == "aster" && !strings.Contains(tn.Prompt, briefMarker) {
				t.Errorf("window %d: aster's prompt lacks its own brief", window)
			}
			if p != "aster" && strings.Contains(tn.Prompt, briefMarker) {
				t.Errorf("window %d: %s's prompt holds aster's brief", window, p)
			}
			if strings.Contains(tn.Prompt, update) || strings.Contains(tn.Prompt, basis) {
				t.Errorf("window %d: %s's prompt holds a stance update or the proposal's basis", window, p)
			}
		}
		if !seenByBrenn {
			t.Errorf("window %d: brenn's Round 3 prompt lost its own conversation", window)
		}
		if !strings.Contains(ledgerJSON(t, e.msgs), convMarker) {
			t.Error("the steward's ledger lacks the private message")
		}
	}
}

func TestSentenceBudget(t *testing.T) {
	e := newEngine(t, setup(t, demoScenario(t), map[string]any{"max_sentences": 2, "messages_per_side": 1}, 1))
	e.answer = func(e *engine, tn deliberation.Turn, call int) deliberation.Result {
		if tn.Kind == kindVote {
			return deliberation.Result{Turn: tn, Answer: map[string]any{"vote": "YES"}}
		}
		return deliberation.Result{Turn: tn, Answer: map[string]any{"text": "One. Two. Three. Four.", "issues": []any{"allocation"}}}
	}
	e.run()
	for _, m := range append(ofType(e.msgs, tMessage), ofType(e.msgs, tSpeech)...) {
		if str(m, "text") != "One. Two." || m.Content["truncated"] != true {
			t.Fatalf("%s %v", m.Type, m.Content)
		}
	}
}

func TestFilesShape(t *testing.T) {
	e := newEngine(t, setup(t, demoScenario(t), pairCfg([]string{"aster", "brenn"}), 1))
	for n := 0; n < 3; n++ {
		e.step(n)
	}
	files, err := e.load().Files()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(files["negotiation/state.json"], &doc); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(doc))
	if strings.Join(keys, ",") != "conversations,done,game,issue,openings,phase,results,round,scenario,seed,stances" {
		t.Errorf("state.json keys %v", keys)
	}
	conv := doc["conversations"].([]any)[0].(map[string]any)
	if doc["round"] != float64(2) || doc["phase"] != "conversations" || conv["status"] != "exchange" || doc["issue"] != nil {
		t.Errorf("state.json %v", doc)
	}
	if !strings.HasPrefix(e.load().State(), "round 2: conversation 1/1 (aster–brenn), exchange") {
		t.Errorf("State %q", e.load().State())
	}
	if !strings.Contains(string(files["negotiation/state.json"]), "\n  \"") {
		t.Error("state.json is not pretty")
	}
	var ledger map[string]any
	_ = json.Unmarshal(files["negotiation/ledger.json"], &ledger)
	if ledger["game"] != Name || len(ledger["messages"].([]any)) != len(e.msgs) {
		t.Errorf("ledger.json %v", ledger["game"])
	}
}

func TestApplyEdges(t *testing.T) {
	e := newEngine(t, setup(t, demoScenario(t), nil, 1))
	// No result for the awaited turn: SKIPPED, never stuck.
	s := e.load()
	st, _ := s.Next()
	e.commit(st.Emit)
	ms, err := s.Apply(nil)
	if err != nil || len(ms) != 1 || ms[0].Type != deliberation.Skipped || ms[0].Content["reason"] != "no result for this turn" {
		t.Fatalf("Apply(nil) = %v, %v", ms, err)
	}
	e.commit(ms)
	// A stale result (an earlier slot) is logged, the slot skipped.
	ms, err = e.load().Apply([]deliberation.Result{{Turn: st.Turns[0], Answer: map[string]any{"text": "again"}}})
	if err != nil || types(ms) != "SKIPPED IGNORED_RESULT" {
		t.Fatalf("stale: %v %v", types(ms), err)
	}
	e.run()
	if _, err := e.load().Apply(nil); err == nil {
		t.Error("Apply after the end accepted")
	}
}

func TestScenarioChangedMidRun(t *testing.T) {
	env := setup(t, demoScenario(t), nil, 1)
	e := newEngine(t, env)
	e.step(0)
	sc := demoScenario(t)
	sc["title"] = "Another"
	b, _ := json.Marshal(sc)
	if err := os.WriteFile(filepath.Join(env.Dir, "scenario.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	env.Messages = e.msgs
	if _, err := (Game{}).Load(env); err == nil || !strings.Contains(err.Error(), "changed since the negotiation started") {
		t.Errorf("Load = %v", err)
	}
}

func TestLineSituationsMatchSchema(t *testing.T) {
	raw, err := schemas.Raw(SchemaScenario)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			Chair struct {
				Properties struct {
					Lines struct {
						PropertyNames struct {
							Enum []string `json:"enum"`
						} `json:"propertyNames"`
					} `json:"lines"`
				} `json:"properties"`
			} `json:"chair"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(doc.Properties.Chair.Properties.Lines.PropertyNames.Enum, situations) || !reflect.DeepEqual(slices.Sorted(maps.Keys(defaultLines)), sorted(situations)) {
		t.Error("line situations differ between the schema, the list and the defaults")
	}
	// The chair's lines never come from an agent: no turn is the chair's.
	e := newEngine(t, setup(t, demoScenario(t), nil, 1)).run()
	for _, tn := range e.turns {
		if tn.Participant == "chair" {
			t.Error("the chair was called")
		}
	}
}

func sorted(xs []string) []string {
	out := append([]string(nil), xs...)
	slices.Sort(out)
	return out
}
