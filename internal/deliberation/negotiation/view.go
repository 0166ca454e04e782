package negotiation

import (
	"fmt"
	"strings"

	"github.com/logist/logist/internal/deliberation"
)

var _ deliberation.Viewer = (*Session)(nil)

// View implements deliberation.Viewer: a party sees what its prompts are
// built from (deliberation.Visible of the committed messages, its own
// brief and its own stance), and nothing else: not the private
// conversations of others, not their briefs or stances, not the steward's
// audit messages.
func (s *Session) View(party string) (*deliberation.View, error) {
	g := s.g
	p := g.parties[party]
	if p == nil {
		return nil, fmt.Errorf("negotiation: %q is not a party (parties: %s)", party, strings.Join(g.ids, ", "))
	}
	var b strings.Builder
	role := "a voting party"
	if !p.Voting {
		role = "a party without a vote"
	}
	fmt.Fprintf(&b, "You are %s (%s), %s; %s chairs.\n", p.Name, p.ID, role, g.sc.Chair.Name)
	if p.Brief != "" {
		b.WriteString("\nYour private brief:\n" + p.Brief + "\n")
	}
	b.WriteString("\nYour current stance:\n")
	b.WriteString(s.st.stance(party))
	msgs := deliberation.Visible(s.committed, party)
	if msgs == nil {
		msgs = []deliberation.Message{}
	}
	v := &deliberation.View{Participant: party, Name: p.Name, Role: g.agent(party), Messages: msgs, Private: b.String(), State: s.State()}
	// What the party may do besides answering: what Input accepts from
	// it now (one decision, Input's).
	if _, err := s.Input(deliberation.Input{Kind: inputEndConversation, From: party}); err == nil {
		v.Inputs = []string{inputEndConversation}
	}
	return v, nil
}

var _ deliberation.Roler = (*Session)(nil)

// Roles implements deliberation.Roler: every party is played by an agent
// (game.agents, or the party's id), and so is the stance helper. The
// chair is never called.
func (s *Session) Roles() map[string]string {
	g := s.g
	out := map[string]string{}
	for _, id := range g.ids {
		f := "game.agents." + id
		if g.cfg.Agents[id] == "" {
			f = "party " + id + " (played by the agent of its id unless game.agents maps it)"
		}
		out[f] = g.agent(id)
	}
	if g.cfg.Helper != "" {
		out["game.helper"] = g.cfg.Helper
	}
	return out
}
