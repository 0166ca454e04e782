package parliament

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/schemas"
)

// A round's summary (seed 000: narrative, positions, key shifts,
// amendments, vote, open issues) is written by the summarizer agent
// (game.summarizer) when one is configured: once a round ends it is asked
// before anything else, so the next round's prompts and the Prime
// Minister's review carry its words. The ledger's facts (the amendments
// actioned, the vote) are the Clerk's, never the agent's; a failed or
// invalid answer leaves the Clerk's deterministic summary (summarize),
// recorded as the fallback so the round is not asked again.

// unsummarized is the first ended round the summarizer has not answered
// for (0: none, or no summarizer).
func (s *state) unsummarized() int {
	if s.cfg.Summarizer == "" {
		return 0
	}
	for _, r := range slices.Sorted(maps.Keys(s.ended)) {
		if r > 0 && s.ended[r] && !s.summarized[r] {
			return r
		}
	}
	return 0
}

func (s *Session) summaryTurn(st *state, round int) deliberation.Turn {
	return deliberation.Turn{Participant: "clerk", Role: st.cfg.Summarizer, Kind: kSummary, Schema: schemaSummary,
		Prompt: s.summaryPrompt(st, round), Data: map[string]any{"round": round}}
}

func (s *Session) summaryPrompt(st *state, round int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are the Clerk of the House. Round %d has ended. Write its summary for the members and the Prime Minister: what happened and why it matters, not counts.\n\n", round)
	b.WriteString(st.houseHeader())
	fmt.Fprintf(&b, "## Round %d's public proceedings\n", round)
	for _, m := range st.roundMsgs(round) {
		if len(m.Audience) == 0 {
			b.WriteString(renderMsg(m) + "\n")
		}
	}
	fmt.Fprintf(&b, "\n## The Clerk's record of the round (facts: keep them)\n%s\n", jsonOf(st.summaryOf(round)))
	b.WriteString("\nAnswer with one JSON object: {\"summary\": \"the narrative, a few sentences\", \"positions\": {\"MEMBER_ID\": {\"lean\": \"YES|NO|ABSTAIN\", \"key_concern\": \"...\"}}, \"key_shifts\": [\"...\"], \"open_issues\": [\"...\"]} with a position for every member.\n")
	return b.String()
}

// summaryOf is round's current summary (nil if it has none).
func (s *state) summaryOf(round int) map[string]any {
	for _, sum := range s.summaries {
		if r, _ := intOf(sum["round"]); r == round {
			return sum
		}
	}
	return nil
}

// summaryResult records the summarizer's answer for its round, or the
// fallback when it failed, is invalid or leaves a member out.
func (b *batch) summaryResult(r deliberation.Result) error {
	st := b.st
	round, _ := intOf(r.Turn.Data["round"])
	if round == 0 || round != st.unsummarized() {
		return fmt.Errorf("parliament: no summary of round %v is pending", r.Turn.Data["round"])
	}
	base := st.summaryOf(round)
	c := map[string]any{"round": round, "by": "fallback", "amendments_actioned": base["amendments_actioned"], "vote_result": base["vote_result"]}
	ans := normalize(r.Answer)
	why := r.Error
	if why == "" && len(ans) == 0 {
		why = "empty answer"
	}
	if why == "" {
		if err := schemas.Validate(schemaSummary, ans); err != nil {
			why = err.Error()
		}
	}
	if why == "" {
		pos := obj(ans["positions"])
		for _, rp := range st.reps {
			if _, ok := pos[rp.ID]; !ok {
				why = "no position for " + rp.ID
				break
			}
		}
	}
	if why == "" {
		c["by"] = "agent"
		for _, k := range []string{"summary", "positions", "key_shifts", "open_issues"} {
			c[k] = ans[k]
		}
	} else {
		for _, k := range []string{"summary", "positions", "key_shifts", "open_issues"} {
			c[k] = base[k]
		}
		c["reason"] = clip(oneLine(why), 500)
	}
	return b.add(deliberation.Message{Type: tSummary, From: "clerk", Content: c})
}

// reduceSummary makes a ROUND_SUMMARY the round's summary.
func (s *state) reduceSummary(m deliberation.Message) {
	c := m.Content
	round, _ := intOf(c["round"])
	s.summarized[round] = true
	sum := map[string]any{"round": round}
	for _, k := range []string{"summary", "positions", "key_shifts", "amendments_actioned", "vote_result", "open_issues"} {
		sum[k] = c[k]
	}
	for i, old := range s.summaries {
		if r, _ := intOf(old["round"]); r == round {
			s.summaries[i] = sum
		}
	}
	s.summaryText[round] = summaryText(sum)
}
