package parliament

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/schemas"
)

// happyAnswers: rep_1's first question carries a motion, rep_2's first
// floor turn moves an amendment to the solution, rep_1 endorses it.
func happyAnswers(h *harness, t deliberation.Turn) (map[string]any, string) {
	switch {
	case t.Kind == kFloor && t.Participant == "rep_1" && len(h.byType(tQuestion)) == 0:
		q := askQ("rep_2", "security of the levy", "How is the levy money protected?")
		q["motion"] = map[string]any{"motion_type": "request_compromise", "reason": "Let us meet halfway."}
		return q, ""
	case t.Kind == kFloor && t.Participant == "rep_2" && len(h.byType(tAmendment)) == 0:
		return map[string]any{"type": "AMENDMENT", "content": map[string]any{"target_section": "solution", "action": "add",
			"description": "Audit the levy", "rationale": "Money must be audited.", "proposed_text": "The levy is audited every year."}}, ""
	case t.Kind == kAnswer && t.Participant == "rep_1" && len(h.byType(tAmendment)) > 0:
		a := h.answerWith("rep_1", 4, "soften")
		obj(a["content"])["amendment_position"] = map[string]any{"amendment_id": "AMDT-1", "position": "endorse", "reason": "Fine."}
		return a, ""
	}
	return h.defaultAnswer(t)
}

func TestBuiltinSpeakerFullSession(t *testing.T) {
	h := newHarness(t, testConfig())
	h.answer = happyAnswers
	if files := checkFiles(t, h.load()); len(files) != 3 {
		t.Errorf("files of a new session: %d", len(files))
	}
	if st := h.load().State(); !strings.HasSuffix(st, ": setup, round 0/3") {
		t.Errorf("State() = %q", st)
	}
	st := h.run(nil)
	if st.Wait == "" || !strings.Contains(st.Wait, "the Prime Minister decides: logist pm") || !strings.Contains(st.Wait, "approve|veto|amend_and_approve --reason ... --guidance ...") {
		t.Fatalf("want the PM's wait, got %+v", st)
	}
	if err := h.input("approve", "Good bill.", ""); err != nil {
		t.Fatal(err)
	}
	st = h.run(nil)
	if !st.Done || st.Outcome != "approved" {
		t.Fatalf("want done/approved, got %+v", st)
	}
	// The phases in order (each may repeat; debate and voting alternate).
	order := []string{stSetup, stOpening, stEvaluating, stDrafting, stDebate, stVoting, stPMReview, stSynthesis, stComplete}
	var seen []string
	for _, s := range h.statuses {
		if len(seen) == 0 || seen[len(seen)-1] != s {
			seen = append(seen, s)
		}
	}
	idx := -1
	for _, s := range seen {
		i := slices.Index(order, s)
		if i < idx && !(s == stDebate && idx == slices.Index(order, stVoting)) {
			t.Fatalf("phase %s after %s: %v", s, order[idx], seen)
		}
		idx = max(idx, i)
	}
	if idx != len(order)-1 {
		t.Fatalf("phases %v", seen)
	}
	for _, typ := range []string{tBill, tOpening, tQuestion, tAnswer, tAmendment, tMotion, tVote, tRuling, tTally, tPM} {
		if len(h.byType(typ)) == 0 {
			t.Errorf("no %s message", typ)
		}
	}
	// The motion attachment became its own entry right after the question.
	for i, m := range h.msgs {
		if m.Type == tMotion && m.From == "rep_1" {
			if h.msgs[i-1].Type != tQuestion || str(m.Content["attached_to"]) != h.msgs[i-1].ID || str(m.Content["motion_type"]) != "request_compromise" {
				t.Errorf("motion not extracted after its question: %+v", m)
			}
		}
	}
	// The amendment met the threshold (proposer + rep_1) and the Clerk wrote
	// it into a new bill version.
	var clerkDraft *deliberation.Message
	for _, m := range h.byType(tBill) {
		if m.From == speakerID {
			clerkDraft = &m
		}
	}
	if clerkDraft == nil || str(clerkDraft.Content["incorporates"]) != "AMDT-1" ||
		!strings.Contains(str(obj(clerkDraft.Content["sections"])["solution"]), "A levy.\n\nThe levy is audited every year.") {
		t.Fatalf("incorporated amendment not written into the bill: %+v", clerkDraft)
	}
	tally := h.last(tTally)
	if p, _ := tally.Content["passed"].(bool); !p || str(tally.Content["next_action"]) != "advance_to_pm" {
		t.Errorf("tally %v", tally.Content)
	}
	if v, _ := intOf(tally.Content["bill_version"]); v != 2 {
		t.Errorf("voted bill version %d", v)
	}
	// Every ANSWER and VOTE carries motive scores (the schema requires them).
	for _, m := range append(h.byType(tAnswer), h.byType(tVote)...) {
		if len(obj(m.Content["motive_scores"])) == 0 {
			t.Errorf("%s without motive scores", m.ID)
		}
	}
	checkFiles(t, h.load())
	if st := h.load().State(); !strings.Contains(st, "complete") || !strings.Contains(st, "outcome approved") {
		t.Errorf("State() = %q", st)
	}
}

// checkFiles validates the materialised files against their schemas.
func checkFiles(t *testing.T, s *Session) map[string][]byte {
	t.Helper()
	files, err := s.Files()
	if err != nil {
		t.Fatal(err)
	}
	for name, schema := range map[string]string{
		"parliament/ledger.json": schemaLedger, "parliament/session.json": schemaSession,
		"parliament/bill.json": schemaBill, "parliament/round-summaries.json": schemaSummaries,
	} {
		b, ok := files[name]
		if !ok {
			if name == "parliament/bill.json" && s.st.bill.Version == 0 {
				continue
			}
			t.Fatalf("no %s", name)
		}
		if err := schemas.ValidateJSON(schema, b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	return files
}

var tsRe = regexp.MustCompile(`"timestamp":\s*"[^"]*"`)

func ledgerBytes(t *testing.T, h *harness) []byte {
	b, err := json.Marshal(h.msgs)
	if err != nil {
		t.Fatal(err)
	}
	return tsRe.ReplaceAll(b, []byte(`"timestamp":""`))
}

func TestSameSeedSameLedger(t *testing.T) {
	play := func(seed int64, drafter string) (*harness, []byte) {
		cfg := testConfig()
		cfg.Drafter = drafter
		h := newHarness(t, cfg)
		h.seed = seed
		h.answer = happyAnswers
		h.run(nil)
		if err := h.input("veto", "Not yet.", "Add a sunset clause."); err != nil {
			t.Fatal(err)
		}
		h.run(nil)
		return h, ledgerBytes(t, h)
	}
	_, a := play(5, "")
	_, b := play(5, "")
	if !bytes.Equal(a, b) {
		t.Fatal("same seed, same answers: different ledgers")
	}
	// The seed decides the drafter when the config does not.
	drafters := map[string]bool{}
	for seed := int64(0); seed < 12; seed++ {
		h, _ := play(seed, "")
		drafters[h.load().st.bill.Drafter] = true
	}
	if len(drafters) < 2 {
		t.Errorf("the seed never changes the drafter: %v", drafters)
	}
}
