package parliament

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/schemas"
)

func (s *Session) memberTurns(st *state) []deliberation.Turn {
	p := st.pend
	turns := make([]deliberation.Turn, 0, len(p.Targets))
	for _, id := range p.Targets {
		r := st.byID[id]
		data := map[string]any{"kind": p.Kind, "instruction": p.Instruction}
		for k, v := range p.Data {
			data[k] = v
		}
		turns = append(turns, deliberation.Turn{Participant: id, Role: r.Agent, Kind: p.Kind, Schema: kindSchema[p.Kind],
			Prompt: s.memberPrompt(st, r, p), Data: normalize(data)})
	}
	return turns
}

func (s *Session) speakerTurn(st *state) deliberation.Turn {
	return deliberation.Turn{Participant: speakerID, Role: s.speaker, Kind: kSpeaker, Schema: schemaSpeaker, Prompt: s.speakerPrompt(st)}
}

// checkScores holds a member to scoring exactly its own motives (the
// schema cannot know them).
func checkScores(r *rep, v any) error {
	m := obj(v)
	var missing, unknown []string
	for _, mo := range r.Motives {
		if _, ok := m[mo]; !ok {
			missing = append(missing, fmt.Sprintf("%q", mo))
		}
	}
	known := map[string]bool{}
	for _, mo := range r.Motives {
		known[mo] = true
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !known[k] {
			unknown = append(unknown, fmt.Sprintf("%q", k))
		}
	}
	if len(missing) == 0 && len(unknown) == 0 {
		return nil
	}
	msg := "motive_scores must score exactly your motives"
	if len(missing) > 0 {
		msg += "; missing " + strings.Join(missing, ", ")
	}
	if len(unknown) > 0 {
		msg += "; unknown " + strings.Join(unknown, ", ")
	}
	return fmt.Errorf("%s", msg)
}

// budgeter cuts speech to the round's response budget (the debate clock)
// and records each cut in the message.
type budgeter struct {
	limit int
	cuts  []any
}

func (b *budgeter) cut(c map[string]any, field string) {
	text := str(c[field])
	out, did := deliberation.Budget(text, b.limit)
	if did {
		b.cuts = append(b.cuts, map[string]any{"field": field, "budget": b.limit, "sentences": deliberation.Sentences(text)})
		c[field] = out
	}
}

func (b *budgeter) record(c map[string]any) {
	if len(b.cuts) > 0 {
		c["budget_cut"] = b.cuts
	}
}

var sections = []string{"problem", "scope", "solution", "implementation"}

// memberResult turns one member's answer into messages; an answer that
// fails its schema or the game's rules is SKIPPED with the reason.
func (b *batch) memberResult(rp *rep, r deliberation.Result, kind string, data map[string]any) error {
	st := b.st
	if r.Error != "" || len(r.Answer) == 0 {
		return b.skip(rp.ID, kind, orDefault(r.Error, "empty answer"))
	}
	ans := normalize(r.Answer)
	if err := schemas.Validate(kindSchema[kind], ans); err != nil {
		return b.skip(rp.ID, kind, err.Error())
	}
	c := normalize(obj(ans["content"]))
	bud := &budgeter{limit: responseBudget(st.round)}
	switch kind {
	case kOpening:
		return b.add(deliberation.Message{Type: tOpening, From: rp.ID, Content: c})
	case kDraft:
		secs := obj(c["sections"])
		sc := obj(secs["scope"])
		for _, k := range []string{"in_scope", "out_of_scope", "assumptions", "definitions"} {
			if sc[k] == nil {
				sc[k] = []any{}
			}
		}
		out := map[string]any{"bill_version": st.bill.Version + 1, "title": c["title"], "summary": c["summary"], "sections": secs}
		return b.add(deliberation.Message{Type: tBill, From: rp.ID, Content: out})
	case kFloor:
		if str(ans["type"]) == tAmendment {
			return b.memberAmendment(rp, c, bud)
		}
		to := str(ans["to"])
		ok := func(id string) bool { t := st.byID[id]; return t != nil && id != rp.ID && !t.quiet(st.round) }
		if !ok(to) {
			if hint := str(data["to"]); ok(hint) && to == "" {
				to = hint
			} else {
				return b.skip(rp.ID, kind, fmt.Sprintf("a question must be put to another member who is not quiet (to: %q)", to))
			}
		}
		bud.cut(c, "question")
		bud.record(c)
		if err := b.add(deliberation.Message{Type: tQuestion, From: rp.ID, To: to, Content: c}); err != nil {
			return err
		}
		return b.motion(rp, ans)
	case kAnswer:
		if err := checkScores(rp, c["motive_scores"]); err != nil {
			return b.skip(rp.ID, kind, err.Error())
		}
		if ap := obj(c["amendment_position"]); ap != nil {
			a := st.amendment(str(ap["amendment_id"]))
			if a == nil || !(a.open() || a.Status == amIncorporated) {
				// The answer stands; a position on no open amendment is not
				// recorded.
				delete(c, "amendment_position")
				c["amendment_position_ignored"] = fmt.Sprintf("no open amendment %q", str(ap["amendment_id"]))
			} else {
				ap["amendment_id"] = a.ID
			}
		}
		bud.cut(c, "answer")
		bud.record(c)
		q := st.question
		m := deliberation.Message{Type: tAnswer, From: rp.ID, Content: c}
		if q != nil {
			m.To, m.InReplyTo = q.From, q.MsgID
		}
		if err := b.add(m); err != nil {
			return err
		}
		return b.motion(rp, ans)
	case kVote:
		if err := checkScores(rp, c["motive_scores"]); err != nil {
			return b.skip(rp.ID, kind, err.Error())
		}
		c["vote"] = strings.ToUpper(str(c["vote"]))
		c["subject"] = st.vote.Subject
		c["bill_version"] = st.bill.Version
		if st.vote.Subject != subjectBill {
			c["amendment_id"] = st.vote.Subject
		}
		if c["conditions"] == nil {
			c["conditions"] = []any{}
		}
		bud.cut(c, "reasoning")
		bud.record(c)
		return b.add(deliberation.Message{Type: tVote, From: rp.ID, Content: c})
	}
	return fmt.Errorf("parliament: unknown turn kind %q", kind)
}

func (b *batch) memberAmendment(rp *rep, c map[string]any, bud *budgeter) error {
	st := b.st
	c["amendment_id"] = st.nextAmendmentID(0)
	if str(c["target_section"]) == "file" || str(c["diff"]) != "" {
		f, d := str(c["file"]), str(c["diff"])
		if f == "" || d == "" {
			return b.skip(rp.ID, kFloor, "a file amendment needs file and diff")
		}
		cur, code, msg := st.readFile(f)
		if code != exitOK {
			return b.skip(rp.ID, kFloor, msg)
		}
		if _, err := applyDiff(cur, d); err != nil {
			return b.skip(rp.ID, kFloor, fmt.Sprintf("the diff does not apply to %s: %v", f, err))
		}
		c["target_section"], c["file"] = "file", cleanPath(f)
		if str(c["proposed_text"]) == "" {
			c["proposed_text"] = d
		}
	} else {
		delete(c, "file")
		delete(c, "diff")
	}
	bud.cut(c, "rationale")
	bud.record(c)
	return b.add(deliberation.Message{Type: tAmendment, From: rp.ID, Content: c})
}

// motion extracts a QUESTION's or ANSWER's motion attachment as its own
// MOTION entry (seed 000).
func (b *batch) motion(rp *rep, ans map[string]any) error {
	mo := obj(ans["motion"])
	if mo == nil {
		return nil
	}
	att := b.out[len(b.out)-1].ID
	return b.add(deliberation.Message{Type: tMotion, From: rp.ID, Content: map[string]any{
		"motion_type": mo["motion_type"], "reason": str(mo["reason"]), "attached_to": att}})
}

// sortedReps is the representatives by id (stable input for the RNG).
func (s *state) sortedReps() []*rep {
	out := append([]*rep(nil), s.reps...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
