package negotiation

import (
	"fmt"
	"strings"

	"github.com/logist/logist/internal/deliberation"
)

// The game's transitions (seed 004 §7.1) and safe boundaries (§2.2):
// which chair messages move the game from one status to another, and
// which of them end a private conversation, a round or a vote, where the
// engine records a recovery point.

var _ deliberation.Marker = (*Session)(nil)

// status is the game's status in seed 004's state-machine words.
func (st *state) status() string {
	switch {
	case st.done:
		return "GAME_OVER"
	case st.round == 0:
		return "SETUP"
	case st.round == 1:
		return "ROUND_1_OPENINGS"
	case st.round == 2 && st.conv < 0:
		return "ROUND_2_SETUP"
	case st.round == 2:
		return fmt.Sprintf("ROUND_2_CONVO_%d_%s", st.conv+1, strings.ToUpper(st.convStage))
	case st.round == 3 && st.issue < 0:
		return "ROUND_3_SETUP"
	case st.round == 3:
		return fmt.Sprintf("ROUND_3_ISSUE_%d_%s", st.issue+1, strings.ToUpper(st.issueStage))
	}
	return "REVIEW"
}

// Marks implements deliberation.Marker: msgs replayed after the committed
// messages, each chair message that changes the status a transition.
func (s *Session) Marks(msgs []deliberation.Message) ([]deliberation.Mark, error) {
	st, err := s.g.replay(s.committed, s.parsed)
	if err != nil {
		return nil, err
	}
	var out []deliberation.Mark
	for _, m := range msgs {
		from := st.status()
		if err := st.apply(m); err != nil {
			return nil, err
		}
		ev := event(m)
		if ev == "" {
			continue
		}
		actor := m.From
		if by, _ := m.Content["ended_by"].(string); by != "" {
			actor = by
		}
		out = append(out, deliberation.Mark{From: from, To: st.status(), Event: ev, Actor: actor, Boundary: s.Boundary(m)})
	}
	return out, nil
}

// event is the transition a message makes ("" for none).
func event(m deliberation.Message) string {
	switch m.Type {
	case tRoundStart:
		return fmt.Sprintf("ROUND_%v_START", m.Content["round"])
	case tConvStart, tInterruption, tIssueIntro, tReview:
		return m.Type
	case tConvEnd:
		if early, _ := m.Content["early"].(bool); early {
			return "CONVERSATION_ENDED_EARLY"
		}
		return tConvEnd
	case tVoteCall:
		return "VOTE_START"
	case tResult:
		if a, _ := m.Content["adopted"].(bool); a {
			return "RESULT_ADOPTED"
		}
		return "RESULT_FAILED"
	}
	return ""
}

// Boundary implements deliberation.Marker: the end of a private
// conversation, the end of a vote (its result) and the end of a round
// (the next one's start) are safe boundaries.
func (s *Session) Boundary(m deliberation.Message) string {
	switch m.Type {
	case tConvEnd:
		return fmt.Sprintf("r2-c%v-end", m.Content["conversation"])
	case tResult:
		return fmt.Sprintf("r3-%v-result", m.Content["issue"])
	case tRoundStart:
		if r, _ := m.Content["round"].(float64); r >= 2 {
			return fmt.Sprintf("r%d-end", int(r)-1)
		}
	}
	return ""
}
