// Package parliament is the parliament deliberation workflow (seeds 000
// and 001): representatives with motives debate a bill under a Speaker who
// acts only through the parliament-* tools, vote on it, and the Prime
// Minister (the steward) approves or vetoes it. Its state is replayed from
// the committed messages; see docs/parliament.md.
package parliament

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/schemas"
)

// Schema files.
const (
	schemaMessage   = "parliament-message.json"
	schemaOpening   = "parliament-answer-opening.json"
	schemaDraft     = "parliament-answer-draft.json"
	schemaFloor     = "parliament-answer-floor.json"
	schemaAnswer    = "parliament-answer-answer.json"
	schemaVote      = "parliament-answer-vote.json"
	schemaSpeaker   = "parliament-answer-speaker.json"
	schemaLedger    = "parliament-ledger.json"
	schemaSession   = "parliament-session.json"
	schemaBill      = "parliament-bill.json"
	schemaSummaries = "parliament-round-summaries.json"
	schemaSummary   = "parliament-answer-summary.json"
)

var kindSchema = map[string]string{
	kOpening: schemaOpening, kDraft: schemaDraft, kFloor: schemaFloor,
	kAnswer: schemaAnswer, kVote: schemaVote, kSpeaker: schemaSpeaker,
}

// ErrOutOfOrder is a steward input that is not acceptable now (exit code
// 2); ErrInvalidInput one that is malformed.
var (
	ErrOutOfOrder   = errors.New("out of order")
	ErrInvalidInput = deliberation.ErrInvalidInput
)

// Game is the parliament.
type Game struct{}

// Name is the workflow's name.
func (Game) Name() string { return "parliament" }

// Load replays a session from its committed messages.
func (Game) Load(env deliberation.Env) (deliberation.Session, error) {
	cfg, err := ParseConfig(env.Config)
	if err != nil {
		return nil, err
	}
	if cfg.ParliamentID == "" {
		cfg.ParliamentID = "parl-001"
		if env.Dir != "" {
			cfg.ParliamentID = "parl-" + filepath.Base(env.Dir)
		}
	}
	s := &Session{env: env, cfg: cfg, speaker: speakerAgent(cfg, env.Dir)}
	s.st = s.replay()
	return s, nil
}

// Session is a parliament replayed from its messages.
type Session struct {
	env     deliberation.Env
	cfg     *Config
	speaker string
	st      *state
}

func (s *Session) replay() *state {
	st := newState(s.cfg, s.env, s.speaker)
	for _, m := range s.env.Messages {
		st.reduce(m)
	}
	return st
}

// batch builds messages on a fork of the state: each is stamped,
// normalised to its JSON shape, checked against the message schema and
// applied, so the next one sees its effect.
type batch struct {
	st     *state
	now    string
	out    []deliberation.Message
	undone int // env.Undone: new ids follow the undone ones
}

func (s *Session) newBatch() *batch {
	now := time.Now
	if s.env.Now != nil {
		now = s.env.Now
	}
	return &batch{st: s.replay(), now: now().UTC().Format(time.RFC3339), undone: s.env.Undone()}
}

func (b *batch) add(m deliberation.Message) error { return b.addAt(m, b.st.round) }

func (b *batch) addAt(m deliberation.Message, round int) error {
	m.ID = deliberation.MessageID(len(b.st.msgs) + 1 + b.undone)
	m.Round = round
	m.Timestamp = b.now
	if m.Content == nil {
		m.Content = map[string]any{}
	}
	m = normalize(m)
	if err := schemas.Validate(schemaMessage, normalize(map[string]any{"m": m})["m"]); err != nil {
		return fmt.Errorf("parliament: message %s (%s) breaks its schema: %w", m.ID, m.Type, err)
	}
	b.st.reduce(m)
	b.out = append(b.out, m)
	return nil
}

// defaultLines is the Speaker's procedural line library; game.lines adds
// to or replaces it.
var defaultLines = deliberation.Lines{
	"open":           {"Order, order. The House is in session on: {problem}. We begin with opening statements."},
	"round_start":    {"Order. Round {round} of the debate on \"{bill}\" begins.", "The House resumes: round {round} on \"{bill}\"."},
	"round_end":      {"That concludes round {round}.", "Round {round} is closed."},
	"skip":           {"{name} did not answer ({reason}); the House moves on.", "The Chair notes that {name} yields the floor ({reason})."},
	"skip_speaker":   {"The Chair's turn lapsed ({reason})."},
	"call_vote":      {"The question is that the bill be passed. Division!", "Order. The House will now divide on the bill."},
	"forced_vote":    {"The {forced} forces the question: the House will divide on the bill."},
	"amendment_vote": {"The question is that Amendment {id} be made. Division!"},
	"evaluate":       {"The Chair has heard {count} opening statements. {drafter} will draft the bill."},
	"progress":       {"The Chair notes progress: {shifts}."},
	"deadlock":       {"The Chair warns the House that debate is going in circles: no member has shifted position this round."},
	"adjourn":        {"The House stands adjourned: {reason}."},
}

// line picks the Speaker's line for a situation (salted by the ledger
// position, so a replay picks the same one).
func (s *state) line(situation string, round int, vars map[string]string) string {
	l := deliberation.Lines{}
	for k, v := range defaultLines {
		l[k] = v
	}
	for k, v := range s.cfg.Lines {
		l[k] = v
	}
	return l.Line(s.seed, fmt.Sprintf("line/%d/%d", len(s.msgs), round), situation, vars)
}

// Next is what happens now: the Clerk's own messages first (opening the
// House, tallies, rewritten bill text), then pending member turns, the
// Prime Minister's review, or the Speaker's next action.
func (s *Session) Next() (*deliberation.Step, error) {
	b := s.newBatch()
	st := b.st
	switch {
	case st.status == stComplete:
		return &deliberation.Step{Done: true, Outcome: st.outcome}, nil
	case st.pend != nil:
		// Turns asked are answered first: a refusal between them would
		// make them a new step, asked again, and a member that writes on
		// every call would hold the House in that loop for ever. Nothing
		// is shared while they are pending; the check runs right after.
		return &deliberation.Step{Turns: s.memberTurns(st)}, nil
	case st.tampered() != nil:
		if err := b.add(*st.tampered()); err != nil {
			return nil, err
		}
	case st.unsummarized() > 0:
		// An ended round is summarized before anything else happens: the
		// next round's prompts and the Prime Minister's review carry it.
		return &deliberation.Step{Turns: []deliberation.Turn{s.summaryTurn(st, st.unsummarized())}}, nil
	case st.status == stSetup:
		if st.cfg.AwaitOpeningGuidance && len(st.guidance) == 0 {
			return &deliberation.Step{Wait: fmt.Sprintf("the Prime Minister gives opening guidance: logist pm %s opening_guidance --guidance ...", s.jobName())}, nil
		}
		if err := b.addAt(ruling("procedure", "round_start", st.line("open", 0, map[string]string{"problem": clip(oneLine(st.problem()), 300)}), "", nil), 0); err != nil {
			return nil, err
		}
	case st.status == stVoting && len(st.vote.Done) == len(st.reps):
		if err := s.tally(b); err != nil {
			return nil, err
		}
	case s.needsText(st) != nil:
		if err := s.rewriteBill(b, s.needsText(st)); err != nil {
			return nil, err
		}
	case st.status == stDrafting && !st.bill.Drafted && st.draftSkips >= 2:
		if err := s.skeletonBill(b); err != nil {
			return nil, err
		}
	case st.status == stPMReview:
		return &deliberation.Step{Wait: s.pmWait(st)}, nil
	case s.speaker != "" && st.speakerFails < 3 && st.speakerStreak < 8:
		return &deliberation.Step{Turns: []deliberation.Turn{s.speakerTurn(st)}}, nil
	default:
		// The built-in Speaker (or its fallback after an agent Speaker
		// failed three times running or acted eight times without giving
		// anyone the floor).
		tool, args, hint := st.builtin()
		if err := b.runTool(tool, args, hint, "builtin"); err != nil {
			return nil, err
		}
	}
	return &deliberation.Step{Emit: b.out}, nil
}

func (s *Session) jobName() string {
	if s.env.Dir != "" {
		return filepath.Base(s.env.Dir)
	}
	return "JOB"
}

func (s *Session) pmWait(st *state) string {
	res := "failed"
	if st.billPassed {
		res = "passed"
	}
	t := obj(st.lastTally["tally"])
	y, _ := intOf(t["yes"])
	n, _ := intOf(t["no"])
	w := fmt.Sprintf("Bill %s v%d %q %s the House %d-%d; the Prime Minister decides: logist pm %s approve|veto|amend_and_approve --reason ... --guidance ...",
		st.billID(), st.bill.Version, st.bill.Title, res, y, n, s.jobName())
	if sum := st.summaryText[st.round]; sum != "" {
		// What the PM reviews: the round that passed the bill, told.
		w += " Round " + strconv.Itoa(st.round) + " summary: " + clip(sum, 1500)
	}
	return w
}

// runTool executes a Speaker tool call and records it: a TOOL_CALL message
// (seen by the Speaker and the steward only) with the arguments, exit
// code, Markdown output and effect, then the House's messages it makes.
func (b *batch) runTool(tool string, args []string, hint map[string]any, by string) error {
	o := b.st.exec(tool, args, hint)
	c := map[string]any{"tool": tool, "args": args, "exit_code": o.exit, "output": o.markdown(), "by": by}
	if o.exit == exitOK && o.effect != nil {
		c["effect"] = o.effect
	}
	if o.write != nil {
		c[deliberation.FileWriteKey] = o.write
	}
	if err := b.add(deliberation.Message{Type: tTool, From: speakerID, Content: c, Audience: []string{speakerID}}); err != nil {
		return err
	}
	if o.exit != exitOK {
		return nil
	}
	if err := b.addDerived(o.derived); err != nil {
		return err
	}
	if tool == toolAdjourn {
		// The House's own record of the adjournment (the tool call is the
		// Speaker's), closing the last round.
		return b.add(ruling("procedure", "round_end", b.st.line("adjourn", b.st.round, map[string]string{"reason": str(o.effect["reason"])}), "", map[string]any{"adjourned": true}))
	}
	return nil
}

// tally counts the division once every member has voted or been skipped.
func (s *Session) tally(b *batch) error {
	st := b.st
	v := st.vote
	voters := make([]string, len(st.reps))
	for i, r := range st.reps {
		voters[i] = r.ID
	}
	t := deliberation.Count(v.Votes, voters, st.cfg.VoteRule)
	if t.Missing == nil {
		t.Missing = []string{}
	}
	objections := []any{}
	for _, id := range t.No {
		objections = append(objections, map[string]any{"from": id, "concern": clip(oneLine(v.Notes[id]), 500)})
	}
	next := "resume_debate"
	if v.Subject == subjectBill {
		switch {
		case t.Passed || st.round >= st.cfg.MaxRounds:
			next = "advance_to_pm"
		default:
			next = "next_round"
		}
	}
	c := map[string]any{
		"subject": v.Subject, "bill_version": st.bill.Version,
		"yes_votes": t.Yes, "no_votes": t.No, "abstentions": t.Abstain, "missing": t.Missing,
		"tally":  map[string]any{"yes": len(t.Yes), "no": len(t.No), "abstain": len(t.Abstain), "total": len(voters)},
		"passed": t.Passed, "tie": t.Tie, "rule": t.Rule, "needed": t.Needed, "forced": v.Forced,
		"key_objections": objections, "next_action": next,
	}
	if v.Subject != subjectBill {
		c["amendment_id"] = v.Subject
	}
	if err := b.add(deliberation.Message{Type: tTally, From: speakerID, Content: c}); err != nil {
		return err
	}
	if next == "advance_to_pm" {
		// The round ends with the vote that sends the bill to the Prime
		// Minister, so its summary is there when the PM decides.
		return b.add(ruling("procedure", "round_end", st.line("round_end", st.round, map[string]string{"round": strconv.Itoa(st.round)}), "", nil))
	}
	if next != "next_round" {
		return nil
	}
	return b.addDerived(st.newRound(""))
}

func (b *batch) addDerived(ds []derived) error {
	for _, d := range ds {
		r := b.st.round
		if d.hasRound {
			r = d.round
		}
		if err := b.addAt(d.msg, r); err != nil {
			return err
		}
	}
	return nil
}

func (s *Session) needsText(st *state) *amendment {
	for _, a := range st.amendments {
		if a.NeedsText {
			return a
		}
	}
	return nil
}

// rewriteBill writes an incorporated amendment into the bill's text: a new
// BILL_DRAFT version from the Clerk (the Speaker's office).
func (s *Session) rewriteBill(b *batch, a *amendment) error {
	st := b.st
	secs := normalize(st.bill.Sections)
	if secs == nil {
		secs = map[string]any{}
	}
	text := a.Text
	if a.Target == "scope" {
		sc := obj(secs["scope"])
		if sc == nil {
			sc = map[string]any{}
		}
		items := strs(sc["in_scope"])
		switch a.Action {
		case "add":
			items = append(items, text)
		case "remove":
			var keep []string
			for _, it := range items {
				if it != text {
					keep = append(keep, it)
				}
			}
			items = keep
		default:
			items = []string{text}
		}
		if items == nil {
			items = []string{}
		}
		sc["in_scope"] = items
		secs["scope"] = sc
	} else {
		cur := str(secs[a.Target])
		switch a.Action {
		case "add":
			if cur != "" {
				text = cur + "\n\n" + text
			}
		case "remove":
			text = strings.TrimSpace(strings.ReplaceAll(cur, a.Text, ""))
		}
		secs[a.Target] = text
	}
	return b.add(deliberation.Message{Type: tBill, From: speakerID, Content: map[string]any{
		"bill_version": st.bill.Version + 1, "title": st.bill.Title, "summary": st.bill.Summary,
		"sections": secs, "incorporates": a.ID}})
}

// skeletonBill is the Clerk's bill when the drafter failed twice: the
// problem statement and the opening directions, so the House can debate.
func (s *Session) skeletonBill(b *batch) error {
	st := b.st
	var dirs []string
	for _, m := range st.msgs {
		if m.Type == tOpening {
			if a := str(obj(m.Content["direction"])["approach"]); a != "" {
				dirs = append(dirs, fmt.Sprintf("%s: %s", m.From, oneLine(a)))
			}
		}
	}
	sol := strings.Join(dirs, "\n")
	if sol == "" {
		sol = "To be settled in debate."
	}
	return b.add(deliberation.Message{Type: tBill, From: speakerID, Content: map[string]any{
		"bill_version": st.bill.Version + 1, "title": "Bill on: " + clip(oneLine(st.problem()), 80), "summary": "The Clerk's skeleton: the drafter did not answer.",
		"skeleton": "drafter_failed",
		"sections": map[string]any{"problem": st.problem(), "scope": map[string]any{"in_scope": []string{}, "out_of_scope": []string{}, "assumptions": []string{}, "definitions": []string{}},
			"solution": sol, "implementation": "To be settled in debate."}}})
}

// Apply turns the answers of the pending turns into messages.
func (s *Session) Apply(results []deliberation.Result) ([]deliberation.Message, error) {
	b := s.newBatch()
	st := b.st
	// The ledger order is the turn order, whatever order answers came in.
	order := map[string]int{}
	kind, data := "", map[string]any(nil)
	if st.pend != nil {
		for i, t := range st.pend.Targets {
			order[t] = i
		}
		kind, data = st.pend.Kind, st.pend.Data
	}
	sorted := make([]deliberation.Result, len(results))
	copy(sorted, results)
	for i := 1; i < len(sorted); i++ {
		for j := i; j > 0 && order[sorted[j].Turn.Participant] < order[sorted[j-1].Turn.Participant]; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	for _, r := range sorted {
		if r.Turn.Kind == kSummary {
			if err := b.summaryResult(r); err != nil {
				return nil, err
			}
			continue
		}
		if r.Turn.Kind == kSpeaker {
			if st.pend != nil || s.speaker == "" {
				return nil, fmt.Errorf("parliament: no Speaker turn is pending")
			}
			if err := b.speakerResult(r); err != nil {
				return nil, err
			}
			continue
		}
		rp := st.byID[r.Turn.Participant]
		pending := false
		if st.pend != nil {
			for _, t := range st.pend.Targets {
				pending = pending || t == r.Turn.Participant
			}
		}
		if rp == nil || !pending {
			return nil, fmt.Errorf("parliament: no turn of %q is pending", r.Turn.Participant)
		}
		if err := b.memberResult(rp, r, kind, data); err != nil {
			return nil, err
		}
	}
	return b.out, nil
}

func (b *batch) skip(who, kind, reason string) error {
	line := "skip"
	if who == speakerID {
		line = "skip_speaker"
	}
	reason = clip(oneLine(reason), 300)
	return b.add(deliberation.Message{Type: deliberation.Skipped, From: who, Content: map[string]any{
		"participant": who, "kind": kind, "reason": reason,
		"line": b.st.line(line, b.st.round, map[string]string{"name": b.st.name(who), "id": who, "reason": reason})}})
}

func (b *batch) speakerResult(r deliberation.Result) error {
	if r.Error != "" || len(r.Answer) == 0 {
		return b.skip(speakerID, kSpeaker, orDefault(r.Error, "empty answer"))
	}
	ans := normalize(r.Answer)
	if err := schemas.Validate(schemaSpeaker, ans); err != nil {
		return b.skip(speakerID, kSpeaker, err.Error())
	}
	return b.runTool(str(ans["tool"]), strs(ans["args"]), nil, "agent")
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Input applies the Prime Minister's decision.
func (s *Session) Input(in deliberation.Input) ([]deliberation.Message, error) {
	if in.Kind != "pm_decision" {
		return nil, fmt.Errorf("%w: the parliament takes pm_decision inputs, not %q", ErrInvalidInput, in.Kind)
	}
	d := str(in.Content["decision"])
	reason, guidance := strings.TrimSpace(str(in.Content["reason"])), strings.TrimSpace(str(in.Content["guidance"]))
	b := s.newBatch()
	st := b.st
	switch d {
	case "approve", "veto", "amend_and_approve":
		if st.status != stPMReview {
			return nil, fmt.Errorf("%w: the Prime Minister decides on a bill in pm_review; the session is %s", ErrOutOfOrder, st.status)
		}
		if d == "amend_and_approve" && guidance == "" {
			return nil, fmt.Errorf("%w: amend_and_approve needs --guidance stating the amendments", ErrInvalidInput)
		}
	case "opening_guidance":
		switch st.status {
		case stSetup, stOpening, stEvaluating, stDrafting:
		default:
			return nil, fmt.Errorf("%w: opening guidance is given before the debate; the session is %s", ErrOutOfOrder, st.status)
		}
		if guidance == "" {
			return nil, fmt.Errorf("%w: opening_guidance needs --guidance", ErrInvalidInput)
		}
	default:
		return nil, fmt.Errorf("%w: decision %q is not approve, veto, amend_and_approve or opening_guidance", ErrInvalidInput, d)
	}
	if err := b.add(deliberation.Message{Type: tPM, From: pmID, Content: map[string]any{"decision": d, "reason": reason, "guidance": guidance}}); err != nil {
		return nil, err
	}
	return b.out, nil
}

// State is a one-line description for logist status.
func (s *Session) State() string {
	st := s.st
	d := fmt.Sprintf("parliament %s: %s, round %d/%d", st.cfg.ParliamentID, st.status, st.round, st.cfg.MaxRounds)
	if st.bill.Version > 0 {
		d += fmt.Sprintf(", bill v%d", st.bill.Version)
	}
	if st.status == stDebate {
		d += fmt.Sprintf(", %d/%d exchanges", st.exchanges, maxExchanges(st.round, st.seats()))
	}
	if st.pend != nil {
		d += ", waiting for " + strings.Join(st.pend.Targets, ", ")
	}
	if st.outcome != "" {
		d += ", outcome " + st.outcome
	}
	return d
}

// jsonOf is a compact rendering used in prompts.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

var _ deliberation.Roler = (*Session)(nil)

// Roles implements deliberation.Roler: each representative's agent, the
// Speaker's when an agent plays it, and the summarizer's. The Prime
// Minister is the steward.
func (s *Session) Roles() map[string]string {
	out := map[string]string{}
	for i, r := range s.cfg.Representatives {
		out[fmt.Sprintf("game.representatives[%d].agent", i)] = r.Agent
	}
	if s.speaker != "" {
		out["game.speaker"] = s.speaker
	}
	if s.cfg.Summarizer != "" {
		out["game.summarizer"] = s.cfg.Summarizer
	}
	return out
}
