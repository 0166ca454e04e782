package parliament

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// summarize builds a round's summary from its messages, deterministically
// (no model call): positions from the latest votes and motive scores, key
// shifts from the stances taken, the amendments actioned, the bill vote,
// and what stays open. Summaries are not ledger messages (seed 000): they
// are rebuilt on replay and replace older rounds in the agents' context.
func (s *state) summarize(round int) map[string]any {
	msgs := s.roundMsgs(round)
	var story []string // the narrative, from public messages only
	questions, answers, proposed, skipped := 0, 0, 0, 0
	lastVote := map[string]map[string]any{}
	var voteResult any
	for _, m := range msgs {
		public := len(m.Audience) == 0
		switch m.Type {
		case tQuestion:
			questions++
			if public && len(story) < 12 {
				story = append(story, fmt.Sprintf("%s questioned %s.", s.name(m.From), s.name(m.To)))
			}
		case tAnswer:
			answers++
		case tAmendment:
			proposed++
			if public && len(story) < 12 {
				story = append(story, fmt.Sprintf("%s moved an amendment: %s.", s.name(m.From), strings.TrimSuffix(clip(oneLine(str(m.Content["description"])), 120), ".")))
			}
		case "SKIPPED":
			skipped++
		case tVote:
			if str(m.Content["subject"]) == subjectBill {
				lastVote[m.From] = m.Content
			}
		case tTally:
			if str(m.Content["subject"]) == subjectBill {
				voteResult = map[string]any{"passed": m.Content["passed"], "tally": m.Content["tally"], "bill_version": m.Content["bill_version"]}
			}
		}
	}
	positions := map[string]any{}
	var openIssues []string
	for _, r := range s.reps {
		lean := "YES"
		low, lowScore := "", 6
		for _, mo := range r.Motives {
			if sc := r.scores[mo]; sc < lowScore {
				low, lowScore = mo, sc
			}
			if r.scores[mo] < 3 {
				lean = "NO"
				openIssues = append(openIssues, fmt.Sprintf("%s: %s scored %d/5", r.Name, mo, r.scores[mo]))
			}
		}
		concern := fmt.Sprintf("%s (%d/5)", low, lowScore)
		if v := lastVote[r.ID]; v != nil {
			lean = strings.ToUpper(str(v["vote"]))
			if res := str(v["reservations"]); res != "" {
				concern = clip(oneLine(res), 200)
			}
		}
		positions[r.ID] = map[string]any{"lean": lean, "key_concern": concern}
	}
	shifts := []string{}
	for _, n := range s.stanceByRound[round] {
		topic := n.Topic
		if topic == "" {
			topic = "the question put"
		}
		switch n.Stance {
		case "concede":
			shifts = append(shifts, fmt.Sprintf("%s conceded on %s", s.name(n.Rep), topic))
		case "soften":
			shifts = append(shifts, fmt.Sprintf("%s softened on %s", s.name(n.Rep), topic))
		case "challenge":
			openIssues = append(openIssues, fmt.Sprintf("%s (challenged by %s)", topic, s.name(n.Rep)))
		}
	}
	actioned := []any{}
	for _, a := range s.amendments {
		for _, h := range a.history {
			if r, _ := intOf(h["round"]); r == round && str(h["status"]) != amProposed && str(h["status"]) != amDebating {
				actioned = append(actioned, map[string]any{"amendment_id": a.ID, "status": h["status"]})
			}
		}
	}
	if openIssues == nil {
		openIssues = []string{}
	}
	// The narrative first (who asked whom about what, what was moved, who
	// shifted), then the counts: the deterministic fallback of seed 000's
	// narrative summary.
	text := fmt.Sprintf("Round %d.", round)
	if len(story) > 0 {
		text += " " + strings.Join(story, " ")
	}
	if len(shifts) > 0 {
		text += " " + strings.Join(shifts, "; ") + "."
	}
	text += fmt.Sprintf(" In all: %d questions, %d answers, %d amendments proposed, %d amendments actioned, %d turns skipped.",
		questions, answers, proposed, len(actioned), skipped)
	if vr, ok := voteResult.(map[string]any); ok {
		t := obj(vr["tally"])
		verdict := "failed"
		if p, _ := vr["passed"].(bool); p {
			verdict = "passed"
		}
		y, _ := intOf(t["yes"])
		n, _ := intOf(t["no"])
		text += fmt.Sprintf(" The bill vote %s %d-%d.", verdict, y, n)
	} else {
		text += " No bill vote was taken."
	}
	if len(shifts) > 0 {
		text += fmt.Sprintf(" %d shift(s) of position.", len(shifts))
	} else {
		text += " No member shifted position."
	}
	return map[string]any{
		"round":               round,
		"summary":             text,
		"positions":           positions,
		"key_shifts":          shifts,
		"amendments_actioned": actioned,
		"vote_result":         voteResult,
		"open_issues":         openIssues,
	}
}

// summaryText is how a summary stands in for its round in a prompt.
func summaryText(sum map[string]any) string {
	var b strings.Builder
	b.WriteString(str(sum["summary"]))
	pos := obj(sum["positions"])
	var ps []string
	for _, k := range slices.Sorted(maps.Keys(pos)) {
		p := obj(pos[k])
		ps = append(ps, fmt.Sprintf("%s leans %s (%s)", k, str(p["lean"]), str(p["key_concern"])))
	}
	if len(ps) > 0 {
		b.WriteString(" Positions: " + strings.Join(ps, "; ") + ".")
	}
	if sh := strs(sum["key_shifts"]); len(sh) > 0 {
		b.WriteString(" Shifts: " + strings.Join(sh, "; ") + ".")
	}
	if oi := strs(sum["open_issues"]); len(oi) > 0 {
		b.WriteString(" Open: " + strings.Join(oi, "; ") + ".")
	}
	return b.String()
}
