package parliament

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/logist/logist/internal/deliberation"
)

// Files are the job-folder files in the seeds' shapes: the ledger, the
// session, the bill, the round summaries, and the bill, amendment and
// issue papers of seed 001.
func (s *Session) Files() (map[string][]byte, error) {
	st := s.st
	out := map[string][]byte{}
	msgs := st.msgs
	if msgs == nil {
		msgs = []deliberation.Message{}
	}
	ledger := map[string]any{"parliament_id": st.cfg.ParliamentID, "problem_statement": st.problem(), "messages": msgs}
	out["parliament/ledger.json"] = pretty(ledger)
	out["parliament/session.json"] = pretty(s.sessionDoc())
	if st.bill.Version > 0 {
		out["parliament/bill.json"] = pretty(s.billDoc())
		out["parliament/bills/"+st.billID()+".md"] = []byte(s.billMarkdown())
	}
	sums := st.summaries
	if sums == nil {
		sums = []map[string]any{}
	}
	out["parliament/round-summaries.json"] = pretty(sums)
	for _, a := range st.amendments {
		if a.Diff != "" {
			out["parliament/amendments/"+a.ID+".diff"] = []byte(strings.TrimSuffix(a.Diff, "\n") + "\n")
		}
	}
	for _, is := range st.issues {
		out["parliament/issues/"+is.ID+".md"] = []byte(fmt.Sprintf("# %s: %s\n\n- **Status**: %s\n- **Round**: %d\n\n%s\n", is.ID, is.Title, is.Status, is.Round, is.Description))
	}
	return out, nil
}

func (s *Session) sessionDoc() map[string]any {
	st := s.st
	reps := []any{}
	for _, r := range st.reps {
		var qu any
		if r.quiet(st.round) {
			qu = r.quietUntil
		}
		rec := r.record
		if rec == nil {
			rec = []map[string]any{}
		}
		reps = append(reps, map[string]any{
			"agent_id": r.ID, "name": r.Name, "temperature": r.temp, "temperature_history": r.tempHistory,
			"motives": r.Motives, "motive_satisfaction": r.scores, "is_quiet": r.quiet(st.round), "quiet_until_round": qu,
			"voting_record": rec,
		})
	}
	vh := st.voteHistory
	if vh == nil {
		vh = []map[string]any{}
	}
	issues := []any{}
	for _, is := range st.issues {
		issues = append(issues, map[string]any{"id": is.ID, "title": is.Title, "status": is.Status})
	}
	papers := []any{}
	for _, p := range st.papers {
		papers = append(papers, map[string]any{"id": p.ID, "name": p.Name, "round": p.Round})
	}
	speaker := builtinName
	if s.speaker != "" {
		speaker = "agent:" + s.speaker
	}
	var pend any
	if st.pend != nil {
		pend = map[string]any{"kind": st.pend.Kind, "members": st.pend.Targets, "instruction": st.pend.Instruction}
	}
	ci := st.cfg.ConstituentIssues
	if ci == nil {
		ci = []string{}
	}
	return normalize(map[string]any{
		"parliament_id":      st.cfg.ParliamentID,
		"problem_statement":  st.problem(),
		"constituent_issues": ci,
		"current_round":      st.round,
		"max_rounds":         st.cfg.MaxRounds,
		"bill_version":       st.bill.Version,
		"drafter":            st.drafter,
		"status":             st.status,
		"next_message_id":    len(st.msgs) + 1,
		"representatives":    reps,
		"debate_clock": map[string]any{
			"max_exchanges_per_round": maxExchanges(st.round, st.seats()),
			"response_budget":         responseBudget(st.round),
			"exchanges_this_round":    st.exchanges,
		},
		"vote_history":  vh,
		"vote_rule":     st.cfg.VoteRule,
		"speaker":       speaker,
		"active_motion": st.activeMotion,
		"pending_turns": pend,
		"papers":        papers,
		"issues":        issues,
		"outcome":       st.outcome,
	})
}

func (s *Session) billDoc() map[string]any {
	st := s.st
	ams := []any{}
	for _, a := range st.amendments {
		pos := a.Positions
		if pos == nil {
			pos = []position{}
		}
		am := map[string]any{
			"amendment_id": a.ID, "proposed_by": a.From, "round": a.Round, "target_section": a.Target,
			"action": a.Action, "description": a.Description, "rationale": a.Rationale, "proposed_text": a.Text,
			"status": a.Status, "endorsements": pos, "voted": a.Voted, "passed": a.Passed, "enacted": a.Enacted,
		}
		if a.File != "" {
			am["file"] = a.File
		}
		ams = append(ams, am)
	}
	secs := normalize(st.bill.Sections)
	if secs == nil {
		secs = map[string]any{}
	}
	return normalize(map[string]any{
		"bill_id": st.billID(), "title": st.bill.Title, "summary": st.bill.Summary, "version": st.bill.Version,
		"drafter": st.bill.Drafter, "tabled": st.bill.Tabled, "target_file": st.bill.Target,
		"sections": secs, "amendments": ams,
	})
}

func (s *Session) billMarkdown() string {
	st := s.st
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: %s\n\n- **Version**: %d\n- **Drafter**: %s\n", st.billID(), st.bill.Title, st.bill.Version, st.bill.Drafter)
	if st.bill.Target != "" {
		fmt.Fprintf(&b, "- **Target**: %s\n", st.bill.Target)
	}
	fmt.Fprintf(&b, "\n%s\n", st.bill.Summary)
	for _, k := range sections {
		v := st.bill.Sections[k]
		fmt.Fprintf(&b, "\n## %s\n\n", strings.ToUpper(k[:1])+k[1:])
		if sc := obj(v); sc != nil {
			for _, sk := range []string{"in_scope", "out_of_scope", "assumptions", "definitions"} {
				if items := strs(sc[sk]); len(items) > 0 {
					fmt.Fprintf(&b, "%s:\n", sk)
					for _, it := range items {
						fmt.Fprintf(&b, "- %s\n", it)
					}
				}
			}
		} else {
			fmt.Fprintf(&b, "%s\n", str(v))
		}
	}
	return b.String()
}

// pretty is v as an indented JSON file.
func pretty(v any) []byte {
	b, _ := json.MarshalIndent(v, "", "  ")
	return append(b, '\n')
}
