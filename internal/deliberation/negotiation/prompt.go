package negotiation

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/logist/logist/internal/deliberation"
)

// turn writes the prompt of a turn. A party's prompt is built only from
// deliberation.Visible(messages, party), windowed, plus what the party is
// entitled to: the scenario's public part, its own brief and its own
// stances.
func (st *state) turn(sp turnSpec) deliberation.Turn {
	t := deliberation.Turn{Participant: sp.party, Kind: sp.kind, Data: map[string]any{"step": sp.key}}
	if sp.issue != "" {
		t.Data["issue"] = sp.issue
	}
	if sp.kind == kindHelper {
		t.Role, t.Schema, t.Background = st.g.cfg.Helper, SchemaHelper, true
		t.Data["target_index"] = sp.target
		t.Prompt = st.helperPrompt(sp.target)
		return t
	}
	t.Role = st.g.agent(sp.party)
	t.Schema = SchemaStatement
	if sp.kind == kindVote {
		t.Schema = SchemaVote
	}
	t.Prompt = st.partyPrompt(sp)
	return t
}

func (st *state) partyPrompt(sp turnSpec) string {
	g := st.g
	p := g.parties[sp.party]
	var b strings.Builder
	fmt.Fprintf(&b, "# Negotiation: %s\n\n", g.sc.Title)
	if g.sc.Description != "" {
		b.WriteString(g.sc.Description + "\n\n")
	}
	role := "You are a voting party: every issue needs your YES (unanimity of the voting parties)."
	if !p.Voting {
		role = "You do not vote: you may speak and persuade, the voting parties decide."
	}
	fmt.Fprintf(&b, "You are %s (id %s). %s %s chairs; the chair is procedural only.\n", p.Name, p.ID, role, g.sc.Chair.Name)
	b.WriteString("You may bluff, trade across issues and defend your red lines; do not agree just for the sake of consensus.\n\n")
	if p.Brief != "" {
		b.WriteString("## Your private brief\nFor you alone: never quote it, never expose its hidden facts or red lines as instructions, never attribute your positions to it.\n\n")
		b.WriteString(p.Brief + "\n\n")
	}
	b.WriteString("## Issues\n")
	for _, is := range g.sc.Issues {
		fmt.Fprintf(&b, "- %s: %s", is.ID, is.Title)
		if is.Description != "" {
			b.WriteString(" — " + is.Description)
		}
		b.WriteString("\n")
		for _, o := range is.Options {
			fmt.Fprintf(&b, "  - option %s: %s", o.ID, o.Title)
			if o.Description != "" {
				b.WriteString(" — " + o.Description)
			}
			b.WriteString("\n")
		}
		if len(is.Excerpts) > 0 {
			fmt.Fprintf(&b, "  - %s excerpts on this issue: %s\n", g.sc.Assessment.Title, strings.Join(is.Excerpts, ", "))
		}
	}
	b.WriteString(st.excerpts())
	b.WriteString("\n## Your current stance (private)\n")
	b.WriteString(st.stance(p.ID))
	b.WriteString("\n## What you have seen so far\n")
	b.WriteString(st.transcript(p.ID))
	b.WriteString("\n## Your turn\n")
	b.WriteString(st.instruction(sp))
	return b.String()
}

// stance is party's own current stance, one line per issue.
func (st *state) stance(party string) string {
	var b strings.Builder
	for _, is := range st.g.sc.Issues {
		s := st.stances[party][is.ID]
		var acc []string
		for _, o := range is.Options {
			if a := s.Acceptance[o.ID]; a == nil {
				acc = append(acc, o.ID+" unacceptable")
			} else {
				acc = append(acc, fmt.Sprintf("%s %.2f", o.ID, *a))
			}
		}
		fmt.Fprintf(&b, "- %s: preferred %s, firmness %.2f; acceptance: %s", is.ID, s.Preferred, s.Firmness, strings.Join(acc, ", "))
		if len(s.Fallbacks) > 0 {
			b.WriteString("; fallbacks: " + strings.Join(s.Fallbacks, ", "))
		}
		if len(s.Conditions) > 0 {
			b.WriteString("; conditions: " + strings.Join(s.Conditions, "; "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// excerpts are the approved excerpts of the assessment, by id: the only
// part of it a prompt carries (seed 004 §3.2).
func (st *state) excerpts() string {
	g := st.g
	if g.sc.Assessment == nil || len(g.sc.Excerpts) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s: approved excerpts\n", g.sc.Assessment.Title)
	fmt.Fprintf(&b, "You may cite the %s only through these excerpts, by id; do not quote or claim anything else from it.\n", g.sc.Assessment.Title)
	for _, e := range g.sc.Excerpts {
		fmt.Fprintf(&b, "- [%s]", e.ID)
		if e.Section != "" {
			fmt.Fprintf(&b, " (%s)", e.Section)
		}
		fmt.Fprintf(&b, " %s\n", e.Text)
	}
	return b.String()
}

// transcript is what party may see, with rounds older than the window
// replaced by summaries built from those same visible messages.
func (st *state) transcript(party string) string {
	g := st.g
	vis := deliberation.Visible(st.msgs, party)
	summaries := map[int]string{}
	for r := 1; r < st.round; r++ {
		var parts []string
		for _, m := range vis {
			if m.Round != r {
				continue
			}
			switch m.Type {
			case tOpening, tMessage, tSpeech, tResult:
				text, _ := m.Content["text"].(string)
				first, _ := deliberation.Budget(text, 1)
				parts = append(parts, fmt.Sprintf("%s: %s", g.name(m.From), first))
			}
		}
		if len(parts) > 0 {
			summaries[r] = strings.Join(parts, " / ")
		}
	}
	recent, older := deliberation.Window(vis, summaries, st.round, g.cfg.Window)
	var b strings.Builder
	if len(older) > 0 {
		b.WriteString("Earlier rounds (summaries):\n")
		for _, o := range older {
			b.WriteString("- " + o + "\n")
		}
	}
	b.WriteString("Messages:\n")
	if len(recent) == 0 {
		b.WriteString("(nothing yet)\n")
	}
	for _, m := range recent {
		text, _ := m.Content["text"].(string)
		label := strings.ToLower(strings.ReplaceAll(m.Type, "_", " "))
		private := ""
		if len(m.Audience) > 0 {
			private = ", private"
		}
		fmt.Fprintf(&b, "- [round %d%s] %s (%s): %s\n", m.Round, private, g.name(m.From), label, text)
	}
	return b.String()
}

func (st *state) instruction(sp turnSpec) string {
	g := st.g
	answer := "\nAnswer with a JSON object: {\"text\": what you say, \"issues\": [issue ids your message addresses], " +
		"\"concessions\": [{\"issue\": id, \"option\": id, \"direction\": \"toward\" | \"away\"}] for any move of your own position}. " +
		"A concession changes your stance a little; only issues you name may change."
	switch sp.kind {
	case kindConversation:
		return fmt.Sprintf("Round 2, private conversation with %s (id %s): your message %d of at most %d before the chair interrupts. "+
			"Only you, %s and the steward will ever see it.%s\n",
			g.name(sp.other), sp.other, st.sent[sp.party]+1, g.cfg.MessagesPerSide, g.name(sp.other), answer)
	case kindFinal:
		return fmt.Sprintf("Round 2: the chair has called time. Give your one final message to %s (id %s); it stays private.%s\n",
			g.name(sp.other), sp.other, answer)
	case kindSpeech:
		is := g.issue(sp.issue)
		return fmt.Sprintf("Round 3, public debate on %s (%s): you have the floor for one speech, heard by every party. "+
			"The chair will then propose the option with the most support among the voting parties.\n"+
			"Answer with a JSON object: {\"text\": your speech, \"concessions\": [{\"issue\": %q, \"option\": id, \"direction\": \"toward\" | \"away\"}]}. "+
			"Only concessions on %s count now.\n", is.ID, is.Title, is.ID, is.ID)
	case kindVote:
		is := g.issue(sp.issue)
		s := st.stances[sp.party][is.ID]
		acc := "unacceptable to you"
		if a := s.Acceptance[st.proposal]; a != nil {
			acc = fmt.Sprintf("your acceptance %.2f", *a)
		}
		return fmt.Sprintf("Round 3, vote on %s (%s): the chair proposes option %s (%s; %s). "+
			"Adoption needs the YES of every voting party; a failed issue is closed for good.\n"+
			"Answer with a JSON object: {\"vote\": \"YES\" | \"NO\", \"reason\": optional public reason}.\n",
			is.ID, is.Title, st.proposal, g.optionTitle(is.ID, st.proposal), acc)
	}
	return ""
}

// helperPrompt is seed 004 §4.4's input: the author, the round, the issue
// (Round 3), the committed message and the author's stance on the issues
// it may change.
func (st *state) helperPrompt(target int) string {
	m := st.msgs[target]
	text, _ := m.Content["text"].(string)
	var b strings.Builder
	b.WriteString("You are the stance helper of a negotiation. Propose small stance changes for the author of the last committed message, or none.\n\n")
	fmt.Fprintf(&b, "role_id: %s\nround: %d\n", m.From, m.Round)
	allowed := st.allowedIssues(target)
	if m.Type == tSpeech && len(allowed) == 1 {
		fmt.Fprintf(&b, "issue_id: %s\n", allowed[0])
	}
	fmt.Fprintf(&b, "last_committed_message: %s\n\ncurrent_stance_snapshot:\n", text)
	for _, id := range allowed {
		s := st.stances[m.From][id]
		if s == nil {
			continue
		}
		var acc []string
		for _, o := range slices.Sorted(maps.Keys(s.Acceptance)) {
			if a := s.Acceptance[o]; a == nil {
				acc = append(acc, o+": null")
			} else {
				acc = append(acc, fmt.Sprintf("%s: %.2f", o, *a))
			}
		}
		fmt.Fprintf(&b, "- %s: preferred %s, firmness %.2f, acceptance {%s}\n", id, s.Preferred, s.Firmness, strings.Join(acc, ", "))
	}
	if len(allowed) == 0 {
		b.WriteString("(the message names no issue: nothing may change)\n")
	}
	b.WriteString("\nRules: only the issues above; never a null acceptance; at most ±0.10 per option and ±0.05 firmness; otherwise the whole proposal is ignored.\n")
	b.WriteString("Answer with a JSON object: {\"changed\": bool, \"deltas\": {issue_id: {\"acceptance\": {option_id: delta}, \"firmness\": delta}}, \"reasons\": [short strings]}.\n")
	return b.String()
}
