package parliament

import (
	"fmt"
	"strings"

	"github.com/logist/logist/internal/deliberation"
)

// Prompts are built only from what the participant may see
// (deliberation.Visible), windowed (deliberation.Window: older rounds by
// their summaries, the current round in full), plus the config the
// participant is entitled to (a member's own motives and private brief).

func renderMsg(m deliberation.Message) string {
	head := fmt.Sprintf("[%s, round %d] %s", m.ID, m.Round, m.From)
	if m.To != "" {
		head += " → " + m.To
	}
	head += " " + m.Type
	c := m.Content
	switch m.Type {
	case tPaper:
		return fmt.Sprintf("%s %s %q:\n%s", head, str(c["paper_id"]), str(c["name"]), str(c["content"]))
	case tTool:
		return fmt.Sprintf("%s: %s %s (exit %v)\n%s", head, str(c["tool"]), jsonOf(c["args"]), c["exit_code"], str(c["output"]))
	case deliberation.Skipped:
		return fmt.Sprintf("%s: %s", head, str(c["line"]))
	case tRuling:
		return fmt.Sprintf("%s (%s/%s): %s", head, str(c["ruling_type"]), str(c["action"]), str(c["ruling"]))
	}
	if m.InReplyTo != "" {
		head += " (in reply to " + m.InReplyTo + ")"
	}
	return head + ": " + jsonOf(c)
}

func (st *state) context(p string) string {
	vis := deliberation.Visible(st.msgs, p)
	recent, older := deliberation.Window(vis, st.summaryText, st.round, 1)
	var b strings.Builder
	if len(older) > 0 {
		b.WriteString("## Earlier rounds (summaries)\n")
		for _, o := range older {
			b.WriteString("- " + o + "\n")
		}
		b.WriteString("\n")
	}
	b.WriteString("## Proceedings\n")
	if len(recent) == 0 {
		b.WriteString("(none yet)\n")
	}
	for _, m := range recent {
		b.WriteString(renderMsg(m) + "\n")
	}
	return b.String()
}

func (st *state) houseHeader() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Problem statement\n%s\n\n", st.problem())
	if len(st.cfg.ConstituentIssues) > 0 {
		b.WriteString("## Constituent issues\n")
		for _, i := range st.cfg.ConstituentIssues {
			b.WriteString("- " + i + "\n")
		}
		b.WriteString("\n")
	}
	if len(st.guidance) > 0 {
		b.WriteString("## The Prime Minister's decisions and guidance\n")
		for _, g := range st.guidance {
			fmt.Fprintf(&b, "- round %v, %s: reason: %s; guidance: %s\n", g["round"], str(g["decision"]), orDefault(str(g["reason"]), "-"), orDefault(str(g["guidance"]), "-"))
		}
		b.WriteString("\n")
	}
	b.WriteString("## Members\n")
	for _, r := range st.reps {
		q := ""
		if r.quiet(st.round) {
			q = " [quiet this round]"
		}
		fmt.Fprintf(&b, "%d. %s (%s) — motives: %s%s\n", r.num, r.Name, r.ID, strings.Join(r.Motives, ", "), q)
	}
	b.WriteString("\n")
	if st.bill.Version > 0 {
		fmt.Fprintf(&b, "## The bill (%s, version %d, drafter %s, tabled %v)\n%s\n", st.billID(), st.bill.Version, st.bill.Drafter, st.bill.Tabled,
			jsonOf(map[string]any{"title": st.bill.Title, "summary": st.bill.Summary, "sections": st.bill.Sections}))
		for _, a := range st.amendments {
			e, o, _ := st.endorsers(a)
			extra := ""
			if a.File != "" {
				extra = " (changes " + a.File + ")"
			}
			if a.Passed {
				extra += " passed"
			}
			if a.Enacted {
				extra += " enacted"
			}
			fmt.Fprintf(&b, "- %s by %s on %s%s: %s — status %s, %d endorse, %d oppose\n", a.ID, a.From, a.Target, extra, oneLine(a.Description), a.Status, e, o)
			// What the amendment changes, not only its one line: the
			// proposed text or the diff (later rounds see only
			// summaries of the message that moved it).
			if a.Diff != "" {
				fmt.Fprintf(&b, "  diff:\n%s\n", indent(clip(a.Diff, 2000), "    "))
			} else if a.Text != "" {
				fmt.Fprintf(&b, "  proposed text: %s\n", clip(oneLine(a.Text), 1000))
			}
		}
		b.WriteString("\n")
	}
	if st.round >= 1 {
		fmt.Fprintf(&b, "## Debate clock\nRound %d of %d; %d of %d exchanges spent this round; response budget %d sentences (longer speech is cut).\n\n",
			st.round, st.cfg.MaxRounds, st.exchanges, maxExchanges(st.round, st.seats()), responseBudget(st.round))
	}
	return b.String()
}

const scoreHelp = "motive_scores: every one of your motives, each 1-5 (1 unaddressed, 2 inadequate, 3 partial, 4 mostly, 5 fully addressed by the bill)."

func scoresTemplate(r *rep) string {
	parts := make([]string, len(r.Motives))
	for i, m := range r.Motives {
		parts[i] = fmt.Sprintf("%q: 3", m)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func (s *Session) memberPrompt(st *state, r *rep, p *pendingTurns) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are %s (%s), Member %d of the parliament %s.\n", r.Name, r.ID, r.num, st.cfg.ParliamentID)
	fmt.Fprintf(&b, "Your constituents' motives: %s.\n", strings.Join(r.Motives, "; "))
	fmt.Fprintf(&b, "Your temperature is %d/100: how hard you push back (it rises when you challenge, falls when you soften or concede).\n", r.temp)
	if r.Brief != "" {
		fmt.Fprintf(&b, "Your private brief (only you see it):\n%s\n", r.Brief)
	}
	b.WriteString("\n" + st.houseHeader())
	b.WriteString(st.context(r.ID))
	// A redirect since the member last spoke is repeated to them.
	for i := len(st.msgs) - 1; i >= 0; i-- {
		m := st.msgs[i]
		if m.From == r.ID {
			break
		}
		if m.Type == tRuling && m.To == r.ID && str(m.Content["action"]) == "redirect" {
			fmt.Fprintf(&b, "\nThe Speaker directs you: %s\n", str(m.Content["ruling"]))
			break
		}
	}
	fmt.Fprintf(&b, "\n## The Speaker recognizes you\n%s\n\n", p.Instruction)
	budget := responseBudget(st.round)
	switch p.Kind {
	case kOpening:
		b.WriteString(`Give your opening statement. Answer with one JSON object:
{"type": "OPENING_STATEMENT", "content": {"briefing": {"facts": ["..."], "constraints": ["..."], "precedents": ["..."], "open_questions": ["..."]}, "direction": {"approach": "3-5 sentences", "principle": "one sentence", "trade_offs": "what this sacrifices and why"}}}
`)
	case kDraft:
		if st.status == stSynthesis {
			fmt.Fprintf(&b, "The Prime Minister approved the bill with amendments: %s\nWrite them into the bill.\n", st.lastPMGuidance())
		} else if g := st.lastPMGuidance(); g != "" && st.pmDecision == "veto" {
			fmt.Fprintf(&b, "The Prime Minister vetoed the bill. Guidance: %s\nRevise the bill accordingly.\n", g)
		}
		b.WriteString(`Draft the bill. Answer with one JSON object:
{"type": "BILL_DRAFT", "content": {"title": "...", "summary": "...", "sections": {"problem": "...", "scope": {"in_scope": ["..."], "out_of_scope": ["..."], "assumptions": ["..."], "definitions": []}, "solution": "...", "implementation": "..."}}}
`)
	case kFloor:
		to := str(p.Data["to"])
		if to != "" {
			fmt.Fprintf(&b, "The Speaker suggests you question %s (%s).\n", st.name(to), to)
		}
		fmt.Fprintf(&b, `You have the floor: put ONE question to another member, or propose an amendment. At most %d sentences. Answer with one JSON object, either
{"type": "QUESTION", "to": "rep_id", "content": {"topic": "...", "question": "...", "motive_context": "why your constituents ask"}}
or
{"type": "AMENDMENT", "content": {"target_section": "problem|scope|solution|implementation|file", "action": "add|modify|remove|replace", "description": "...", "rationale": "...", "proposed_text": "...", "file": "only for target_section file: a workspace path", "diff": "only for target_section file: a unified diff"}}
A question may carry a procedural motion: "motion": {"motion_type": "call_vote|table_discussion|request_amendment|point_of_order|request_compromise", "reason": "..."}.
`, budget)
	case kAnswer:
		if q := st.question; q != nil {
			for _, m := range st.msgs {
				if m.ID == q.MsgID {
					fmt.Fprintf(&b, "%s asks you (%s) about %s: %s\n", st.name(q.From), q.MsgID, q.Topic, str(m.Content["question"]))
				}
			}
		}
		fmt.Fprintf(&b, `Answer the question in at most %d sentences. Answer with one JSON object:
{"type": "ANSWER", "content": {"answer": "...", "concessions": "...", "stance": "maintain|soften|concede|challenge", "motive_scores": %s, "amendment_position": {"amendment_id": "AMDT-1", "position": "endorse|oppose|abstain", "reason": "..."}}}
amendment_position is optional (include it to register a position on an open amendment); a "motion" may be attached as for questions.
%s
`, budget, scoresTemplate(r), scoreHelp)
	case kVote:
		subject := "the bill " + st.billID()
		if st.vote != nil && st.vote.Subject != subjectBill {
			subject = "Amendment " + st.vote.Subject
		}
		fmt.Fprintf(&b, `The House divides on %s. Reasoning at most %d sentences. Answer with one JSON object:
{"type": "VOTE", "content": {"vote": "YES|NO|ABSTAIN", "reasoning": "...", "motive_scores": %s, "reservations": "...", "conditions": ["what would change your vote"]}}
%s
`, subject, budget, scoresTemplate(r), scoreHelp)
	}
	return b.String()
}

const toolsHelp = `## Your tools (answer with exactly one call: {"tool": "NAME", "args": ["...", "..."]})
- parliament-recognize all|MEMBER "instruction": give the floor; the ONLY way members speak. Openings and votes: all (in parallel). Evaluation/drafting: the drafter. Debate: one member at a time; a member with a pending question must answer it first.
- parliament-table bill [FILE] "description": table the drafted bill (starts the debate round) | motion TYPE "description" | amendment ID ["description"]: put an amendment to the vote.
- parliament-share NAME "content": share a paper with every member.
- parliament-edit FILE --view | --view-amendment ID | FILE --propose "unified diff" (makes amendment AMDT-N) | FILE --enact ID (only after the amendment passed a vote) | FILE --create "content".
- parliament-order-paper: the current business.
- parliament-issue create "title" ["description"] | close ID (once the bill passed) | list.
- parliament-rule redirect|quiet|next_speaker MEMBER "text" | call_vote|deadlock_warning|progress_note|round_end "text".
- parliament-adjourn ["reason"]: end the session (after the Prime Minister's approval).
Exit codes: 0 ok, 1 invalid arguments, 2 out of order, 3 permission denied, 4 not found.
Rules: no bill vote while any member's motive scores below 3, unless the clock (this round's exchanges spent) or the round limit forces it. When the exchanges are spent, call the vote or end the round. Votes are tallied and the bill goes to the Prime Minister automatically.
`

func (s *Session) speakerPrompt(st *state) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are the Speaker of the parliament %s. You keep order and move business forward; you never vote or argue.\n\n", st.cfg.ParliamentID)
	b.WriteString(toolsHelp + "\n")
	b.WriteString(st.houseHeader())
	b.WriteString("## Motive scores\n")
	for _, r := range st.reps {
		var ps []string
		for _, m := range r.Motives {
			ps = append(ps, fmt.Sprintf("%s %d/5", m, r.scores[m]))
		}
		fmt.Fprintf(&b, "- %s: %s\n", r.ID, strings.Join(ps, ", "))
	}
	b.WriteString("\n## Order paper\n" + st.orderPaper().markdown() + "\n")
	if st.lastTool != nil {
		fmt.Fprintf(&b, "## Your last command: %s %s (exit %v)\n%s\n", str(st.lastTool.Content["tool"]), jsonOf(st.lastTool.Content["args"]), st.lastTool.Content["exit_code"], str(st.lastTool.Content["output"]))
	}
	b.WriteString(st.context(speakerID))
	b.WriteString("\nWhat is your next command?\n")
	return b.String()
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}
