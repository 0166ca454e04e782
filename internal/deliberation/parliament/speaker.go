package parliament

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/logist/logist/internal/deliberation"
)

// builtin is the deterministic Speaker: the same tool calls an agent
// Speaker would make, chosen by fixed rules (docs/parliament.md).
func (s *state) builtin() (string, []string, map[string]any) {
	switch s.status {
	case stOpening:
		if f, c, ok := s.staleFile(); ok {
			return toolShare, []string{f, c}, nil
		}
		return toolRecognize, []string{"all", "Make your opening statement on the problem before the House."}, nil
	case stEvaluating:
		d := s.pickDrafter()
		if !s.evaluated {
			n := 0
			for _, m := range s.msgs {
				if m.Type == tOpening {
					n++
				}
			}
			return toolRule, []string{"progress_note", s.line("evaluate", s.round, map[string]string{"count": strconv.Itoa(n), "drafter": fmt.Sprintf("%s (%s)", d.Name, d.ID)})}, nil
		}
		return toolRecognize, []string{strconv.Itoa(d.num), "Draft the bill from the opening statements."}, nil
	case stDrafting:
		d := s.byID[s.drafter]
		if d == nil {
			d = s.pickDrafter()
		}
		if !s.bill.Drafted {
			instr := "Draft the bill from the opening statements."
			if g := s.lastPMGuidance(); s.pmDecision == "veto" {
				instr = "Revise the bill after the Prime Minister's veto: " + orDefault(g, "see the Prime Minister's reason")
			}
			return toolRecognize, []string{strconv.Itoa(d.num), instr}, nil
		}
		desc := "Bill: " + orDefault(s.bill.Title, "untitled")
		for _, f := range s.cfg.Files {
			if _, code, _ := s.readFile(f); code == exitOK {
				return toolTable, []string{"bill", f, desc}, nil
			}
		}
		return toolTable, []string{"bill", desc}, nil
	case stDebate:
		return s.debatePolicy()
	case stVoting:
		subject := "the bill"
		if s.vote.Subject != subjectBill {
			subject = "Amendment " + s.vote.Subject
		}
		return toolRecognize, []string{"all", fmt.Sprintf("Vote now on %s: YES or NO.", subject)}, nil
	case stSynthesis:
		if d := s.byID[s.bill.Drafter]; d != nil && s.pmDecision == "amend_and_approve" && !s.finalDrafted && !s.finalSkipped {
			return toolRecognize, []string{strconv.Itoa(d.num), "Write the Prime Minister's amendments into the bill: " + s.lastPMGuidance()}, nil
		}
		if s.pmDecision == "veto" {
			return toolAdjourn, []string{"The Prime Minister vetoed the bill in the last round; no round is left to debate a revision."}, nil
		}
		return toolAdjourn, []string{"The Prime Minister approved the bill; business concluded."}, nil
	}
	// Not reached: Next handles the other statuses before asking.
	return toolOrderPaper, nil, nil
}

func (s *state) pickDrafter() *rep {
	if r := s.byID[s.drafter]; r != nil {
		return r
	}
	sorted := s.sortedReps()
	return sorted[deliberation.Pick(s.seed, "drafter", len(sorted))]
}

// staleFile is a governed (or enacted) file whose current content the
// House has not been shown.
func (s *state) staleFile() (string, string, bool) {
	files := append([]string(nil), s.cfg.Files...)
	for _, a := range s.amendments {
		if a.Enacted {
			files = append(files, a.File)
		}
	}
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f] {
			continue
		}
		seen[f] = true
		c, code, _ := s.readFile(f)
		if code == exitOK && c != "" && s.shared[f] != c {
			return f, c, true
		}
	}
	return "", "", false
}

func (s *state) debatePolicy() (string, []string, map[string]any) {
	if q := s.question; q != nil {
		return toolRecognize, []string{strconv.Itoa(s.byID[q.To].num), fmt.Sprintf("Answer %s's question (%s) on %s.", s.name(q.From), q.MsgID, orDefault(q.Topic, "the bill"))}, nil
	}
	for _, a := range s.amendments {
		if a.Passed && !a.Enacted && a.Diff != "" {
			if c, code, _ := s.readFile(a.File); code == exitOK {
				if _, err := applyDiff(c, a.Diff); err == nil {
					return toolEdit, []string{a.File, "--enact", a.ID}, nil
				}
			}
		}
	}
	if f, c, ok := s.staleFile(); ok {
		return toolShare, []string{f, c}, nil
	}
	low := len(s.lowScores()) > 0
	last := s.round >= s.cfg.MaxRounds
	cap := s.capReached()
	wantVote := (!low && s.exchanges >= 1) || (cap && (!low || last))
	wantEnd := cap && !wantVote
	for _, a := range s.amendments {
		fileUnvoted := a.Diff != "" && !a.Voted && (a.open() || a.Status == amIncorporated)
		if !a.open() && !fileUnvoted {
			continue
		}
		since := s.floor - a.AtFloor
		if wantVote || (fileUnvoted && (wantEnd || since >= 1)) || since >= 2 {
			return toolTable, []string{"amendment", a.ID, "Put to the House: " + oneLine(a.Description)}, nil
		}
	}
	if wantVote {
		return toolRule, []string{"call_vote", s.voteLine()}, nil
	}
	if wantEnd {
		return s.endRoundPolicy()
	}
	qr, to := s.nextQuestioner()
	if qr == nil {
		if last {
			return toolRule, []string{"call_vote", s.voteLine()}, nil
		}
		return s.endRoundPolicy()
	}
	return toolRecognize, []string{strconv.Itoa(qr.num), fmt.Sprintf("Put one question to %s (%s) on the bill, or propose an amendment.", to.Name, to.ID)}, map[string]any{"to": to.ID}
}

func (s *state) voteLine() string {
	if f := s.forcedBy(); f != "" && len(s.lowScores()) > 0 {
		what := map[string]string{"clock": "debate clock", "round_limit": "round limit"}[f]
		return s.line("forced_vote", s.round, map[string]string{"forced": what})
	}
	return s.line("call_vote", s.round, nil)
}

// endRoundPolicy observes the round once (progress when someone shifted,
// a deadlock warning otherwise), then ends it.
func (s *state) endRoundPolicy() (string, []string, map[string]any) {
	if s.observed != s.round {
		var shifts []string
		for _, n := range s.stanceByRound[s.round] {
			if n.Stance == "soften" || n.Stance == "concede" {
				shifts = append(shifts, fmt.Sprintf("%s %s", s.name(n.Rep), map[string]string{"soften": "softened", "concede": "conceded"}[n.Stance]))
			}
		}
		if len(shifts) > 0 {
			return toolRule, []string{"progress_note", s.line("progress", s.round, map[string]string{"shifts": strings.Join(shifts, ", ")})}, nil
		}
		return toolRule, []string{"deadlock_warning", s.line("deadlock", s.round, nil)}, nil
	}
	return toolRule, []string{"round_end", s.line("round_end", s.round, map[string]string{"round": strconv.Itoa(s.round)})}, nil
}

// nextQuestioner is the fixed rotation: the n-th floor turn of the session
// goes to member n mod seats, who questions the next member; quiet
// members are passed over.
func (s *state) nextQuestioner() (*rep, *rep) {
	n := len(s.reps)
	for i := 0; i < n; i++ {
		q := s.reps[(s.floor+i)%n]
		if q.quiet(s.round) {
			continue
		}
		for j := 1; j < n; j++ {
			to := s.reps[(s.floor+i+j)%n]
			if !to.quiet(s.round) {
				return q, to
			}
		}
	}
	return nil, nil
}
