// Package negotiation is the negotiation game (seed 004's mechanics, the
// content from a scenario file) on the deliberation core: Round 1
// prewritten openings picked by the seeded RNG, Round 2 private
// conversations, Round 3 public debate with the chair's proposal and a
// unanimous vote of the voting parties per issue, then the review. Its
// state is replayed from the committed messages; docs/negotiation.md
// describes the rules, the config and the files.
package negotiation

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/logist/logist/internal/deliberation"
)

// Name is the workflow name.
const Name = "negotiation"

// Game is the negotiation game.
type Game struct{}

var _ deliberation.Game = Game{}

// Name implements deliberation.Game.
func (Game) Name() string { return Name }

// Load implements deliberation.Game: config, scenario, then the replay of
// the committed messages.
func (Game) Load(env deliberation.Env) (deliberation.Session, error) {
	g, err := load(env)
	if err != nil {
		return nil, err
	}
	parsed, err := parse(env.Messages)
	if err != nil {
		return nil, err
	}
	st, err := g.replay(env.Messages, parsed)
	if err != nil {
		return nil, err
	}
	return &Session{g: g, committed: env.Messages, parsed: parsed, st: st}, nil
}

// Session is a negotiation replayed from its committed messages.
type Session struct {
	g         *game
	committed []deliberation.Message
	parsed    []content // their contents, decoded once
	st        *state    // of the committed messages
}

// advance replays the committed messages and adds the messages the chair
// and the orchestrator emit without a call, up to the next turns or the
// end. Next, Apply and Input all start from it, so it does not matter
// whether the engine committed a step's Emit before calling Apply.
func (s *Session) advance() (*state, []deliberation.Message, []turnSpec, error) {
	st, err := s.g.replay(s.committed, s.parsed)
	if err != nil {
		return nil, nil, nil, err
	}
	var emits []deliberation.Message
	for n := 0; n < 100000; n++ {
		m, specs := st.next()
		if m == nil {
			// The helper rides along with a party's turn (never a step
			// of its own), for a message that may change something.
			if len(specs) > 0 && s.g.cfg.Helper != "" && st.lastEligible >= 0 && !st.helperDone[st.lastEligible] &&
				len(st.allowedIssues(st.lastEligible)) > 0 {
				specs = append(specs, turnSpec{party: kindHelper, kind: kindHelper, target: st.lastEligible,
					key: fmt.Sprintf("helper/%d", st.lastEligible)})
			}
			return st, emits, specs, nil
		}
		if err := st.apply(*m); err != nil {
			return nil, nil, nil, err
		}
		emits = append(emits, *m)
	}
	return nil, nil, nil, errors.New("negotiation: the chair keeps emitting without a turn (bug)")
}

// Next implements deliberation.Session.
func (s *Session) Next() (*deliberation.Step, error) {
	st, emits, specs, err := s.advance()
	if err != nil {
		return nil, err
	}
	step := &deliberation.Step{Emit: emits}
	if st.done {
		step.Done, step.Outcome = true, st.outcome()
		return step, nil
	}
	for _, sp := range specs {
		step.Turns = append(step.Turns, st.turn(sp))
	}
	return step, nil
}

func (st *state) outcome() string {
	n := 0
	for _, r := range st.results {
		if r.Adopted {
			n++
		}
	}
	switch {
	case n == len(st.g.sc.Issues):
		return "all_adopted"
	case n == 0:
		return "none_adopted"
	}
	return "partially_adopted"
}

// Apply implements deliberation.Session: each awaited slot gets its
// message (or SKIPPED), followed by the stance update it causes; results
// for other slots are stale or late and only logged.
func (s *Session) Apply(results []deliberation.Result) ([]deliberation.Message, error) {
	st, _, specs, err := s.advance()
	if err != nil {
		return nil, err
	}
	if st.done || len(specs) == 0 {
		return nil, errors.New("negotiation: no turn is awaited")
	}
	used := make([]bool, len(results))
	find := func(sp turnSpec) *deliberation.Result {
		for i := range results {
			r := &results[i]
			if !used[i] && r.Turn.Kind == sp.kind && r.Turn.Participant == sp.party && stepKey(r.Turn) == sp.key {
				used[i] = true
				return r
			}
		}
		return nil
	}
	var out []deliberation.Message
	add := func(m deliberation.Message) error {
		if err := st.apply(m); err != nil {
			return err
		}
		out = append(out, m)
		return nil
	}
	// The helper's verdict concerns an earlier message: it goes first.
	for _, sp := range specs {
		if sp.kind == kindHelper {
			if err := add(st.helperUpdate(sp.target, find(sp))); err != nil {
				return nil, err
			}
		}
	}
	for _, sp := range specs {
		if sp.kind == kindHelper {
			continue
		}
		for _, m := range st.answer(sp, find(sp)) {
			if err := add(m); err != nil {
				return nil, err
			}
		}
	}
	var ignored []deliberation.Message
	for i, r := range results {
		if used[i] {
			continue
		}
		ignored = append(ignored, st.ignoredResult(r))
	}
	sort.SliceStable(ignored, func(i, j int) bool { return ignored[i].Content["text"].(string) < ignored[j].Content["text"].(string) })
	for _, m := range ignored {
		if err := add(m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func stepKey(t deliberation.Turn) string {
	k, _ := t.Data["step"].(string)
	return k
}

// ignoredResult logs a result no slot of this step awaited: a late helper,
// a non-voting party's vote, a stale answer.
func (st *state) ignoredResult(r deliberation.Result) deliberation.Message {
	why := "stale: not a turn of this step"
	switch {
	case r.Turn.Kind == kindHelper:
		why = "late: a helper result not among this step's turns"
	case r.Turn.Kind == kindVote && st.g.parties[r.Turn.Participant] != nil && !st.g.parties[r.Turn.Participant].Voting:
		why = "a non-voting party's vote is ignored"
	}
	c := content{Party: r.Turn.Participant, Kind: r.Turn.Kind, Reason: why,
		Text: fmt.Sprintf("ignored %s result of %s (%s): %s", r.Turn.Kind, r.Turn.Participant, stepKey(r.Turn), why)}
	typ := tIgnored
	if r.Turn.Kind == kindHelper {
		typ = tHelperIgnored
	}
	return msg(typ, system, st.round, []string{deliberation.Steward}, c)
}

// answer is the messages one slot's result makes.
func (st *state) answer(sp turnSpec, r *deliberation.Result) []deliberation.Message {
	g := st.g
	chair := g.sc.Chair.ID
	reason := ""
	text := ""
	switch {
	case r == nil:
		reason = "no result for this turn"
	case r.Error != "":
		reason = r.Error
	default:
		if sp.kind == kindVote {
			v, _ := r.Answer["vote"].(string)
			text = strings.ToUpper(strings.TrimSpace(v))
			if text != deliberation.Yes && text != deliberation.No {
				reason = fmt.Sprintf("invalid vote %q", v)
			}
		} else {
			t, _ := r.Answer["text"].(string)
			text = strings.TrimSpace(t)
			if text == "" {
				reason = "empty answer"
			}
		}
	}
	var audience []string
	var cn int
	if sp.kind == kindConversation || sp.kind == kindFinal {
		cn = st.conv + 1
		audience = []string{g.pairs[st.conv][0], g.pairs[st.conv][1]}
	}
	if reason != "" {
		c := content{Party: sp.party, Kind: sp.kind, Reason: reason, Conversation: cn, Issue: sp.issue}
		c.Text = g.line(sp.key, "skip", map[string]string{"party": g.name(sp.party)})
		return []deliberation.Message{msg(deliberation.Skipped, chair, st.round, audience, c)}
	}
	next := len(st.msgs) // the index the message will have
	switch sp.kind {
	case kindVote:
		c := content{Issue: sp.issue, Option: st.proposal, Vote: text, Text: text}
		if rs, _ := r.Answer["reason"].(string); strings.TrimSpace(rs) != "" {
			c.Reason = strings.TrimSpace(rs)
			c.Text = text + ": " + c.Reason
		}
		return []deliberation.Message{msg(tVote, sp.party, 3, nil, c)}
	case kindSpeech:
		c := content{Issue: sp.issue, Concessions: concessions(r.Answer)}
		c.Text, c.Truncated = deliberation.Budget(text, g.cfg.MaxSentences)
		out := []deliberation.Message{msg(tSpeech, sp.party, 3, nil, c)}
		if u := st.ruleUpdateAfter(out[0], next, sp.party, []string{sp.issue}, c.Concessions, "not the active issue"); u != nil {
			out = append(out, *u)
		}
		return out
	default: // conversation, final
		c := content{Conversation: cn, Pair: audience, Stage: "exchange", Issues: stringList(r.Answer["issues"]), Concessions: concessions(r.Answer)}
		if sp.kind == kindFinal {
			c.Stage = kindFinal
		}
		c.Text, c.Truncated = deliberation.Budget(text, g.cfg.MaxSentences)
		m := msg(tMessage, sp.party, 2, audience, c)
		m.To = sp.other
		out := []deliberation.Message{m}
		if u := st.ruleUpdateAfter(m, next, sp.party, c.Issues, c.Concessions, "issue not named in the message"); u != nil {
			out = append(out, *u)
		}
		return out
	}
}

// ruleUpdateAfter computes the stance update of a message as if it were
// committed (the update follows it in the ledger).
func (st *state) ruleUpdateAfter(m deliberation.Message, index int, party string, allowed []string, cs []Concession, why string) *deliberation.Message {
	if len(cs) == 0 {
		return nil
	}
	return st.ruleUpdate(party, allowed, cs, index, m.Round, why)
}

func concessions(ans map[string]any) []Concession {
	arr, _ := ans["concessions"].([]any)
	var out []Concession
	for _, x := range arr {
		o, _ := x.(map[string]any)
		c := Concession{}
		c.Issue, _ = o["issue"].(string)
		c.Option, _ = o["option"].(string)
		c.Direction, _ = o["direction"].(string)
		out = append(out, c)
	}
	return out
}

func stringList(v any) []string {
	arr, _ := v.([]any)
	var out []string
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// inputEndConversation ends the current private conversation early.
const inputEndConversation = "end_conversation"

// Input implements deliberation.Session: the steward may end the current
// private conversation early ("end_conversation"), in Round 2 only.
func (s *Session) Input(in deliberation.Input) ([]deliberation.Message, error) {
	if in.Kind != inputEndConversation {
		return nil, fmt.Errorf("negotiation: %w: unknown input %q (the steward may only end_conversation during Round 2)", deliberation.ErrInvalidInput, in.Kind)
	}
	st, emits, _, err := s.advance()
	if err != nil {
		return nil, err
	}
	if st.done || st.round != 2 || st.conv < 0 || st.convStage == "ended" {
		return nil, fmt.Errorf("negotiation: end_conversation is out of order: no private conversation is under way (round %d)", st.round)
	}
	cn := st.conv + 1
	if v, ok := in.Content["conversation"]; ok {
		if n, ok := toFloat(v); !ok {
			return nil, fmt.Errorf("negotiation: %w: end_conversation: conversation %v is not a number", deliberation.ErrInvalidInput, v)
		} else if int(n) != cn {
			return nil, fmt.Errorf("negotiation: end_conversation: conversation %v is not the current one (%d)", v, cn)
		}
	}
	g := s.g
	a, b := g.pairs[st.conv][0], g.pairs[st.conv][1]
	by := in.From
	if by == "" {
		by = deliberation.Steward
	}
	if g.parties[by] != nil && by != a && by != b {
		// A party ends only its own conversation (seed 004 §4.2).
		return nil, fmt.Errorf("negotiation: end_conversation is out of order: %s is not in conversation %d (%s–%s)", by, cn, a, b)
	}
	c := content{Conversation: cn, Pair: []string{a, b}, Early: true, EndedBy: by}
	who := "the steward"
	if g.parties[by] != nil {
		who = g.name(by)
	}
	c.Text = g.line(fmt.Sprintf("r2/c%d/end-early", cn), "conversation_ended_early", map[string]string{"a": g.name(a), "b": g.name(b), "by": who})
	return append(emits, msg(tConvEnd, g.sc.Chair.ID, 2, []string{a, b}, c)), nil
}

// Files implements deliberation.Session.
func (s *Session) Files() (map[string][]byte, error) {
	ledger := map[string]any{"game": Name, "scenario": s.g.sc.Title, "seed": s.g.seed, "messages": s.committed}
	if s.committed == nil {
		ledger["messages"] = []deliberation.Message{}
	}
	lb, err := json.MarshalIndent(ledger, "", "  ")
	if err != nil {
		return nil, err
	}
	sb, err := json.MarshalIndent(s.st.snapshot(), "", "  ")
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		"negotiation/ledger.json": append(lb, '\n'),
		"negotiation/state.json":  append(sb, '\n'),
	}, nil
}

// Snapshot is negotiation/state.json.
type Snapshot struct {
	Game          string                        `json:"game"`
	Scenario      string                        `json:"scenario"`
	Seed          int64                         `json:"seed"`
	Round         int                           `json:"round"`
	Phase         string                        `json:"phase"`
	Openings      []openingRec                  `json:"openings"`
	Conversations []ConversationState           `json:"conversations"`
	Issue         *IssueState                   `json:"issue"`
	Stances       map[string]map[string]*Stance `json:"stances"`
	Results       []IssueResult                 `json:"results"`
	Done          bool                          `json:"done"`
	Outcome       string                        `json:"outcome,omitempty"`
}

// ConversationState is one Round 2 conversation in state.json.
type ConversationState struct {
	Number int            `json:"number"`
	Pair   []string       `json:"pair"`
	Status string         `json:"status"` // pending | exchange | finals | ended
	Sent   map[string]int `json:"messages,omitempty"`
}

// IssueState is the Round 3 cursor in state.json.
type IssueState struct {
	Index    int      `json:"index"`
	ID       string   `json:"id"`
	Stage    string   `json:"stage"`
	Speakers []string `json:"speakers"`
	Spoken   int      `json:"spoken"`
	Proposal string   `json:"proposal,omitempty"`
	Voted    []string `json:"voted,omitempty"`
}

func (st *state) phase() string {
	switch {
	case st.done:
		return "done"
	case st.round == 0:
		return "setup"
	case st.round == 1:
		return "openings"
	case st.round == 2:
		return "conversations"
	case st.round == 3 && st.issue >= 0 && st.issueStage == stVoting:
		return "voting"
	case st.round == 3:
		return "debate"
	}
	return "review"
}

func (st *state) snapshot() Snapshot {
	g := st.g
	sn := Snapshot{Game: Name, Scenario: g.sc.Title, Seed: g.seed, Round: st.round, Phase: st.phase(),
		Openings: st.openings, Stances: st.stances, Results: st.results, Done: st.done,
		Conversations: []ConversationState{}}
	if sn.Openings == nil {
		sn.Openings = []openingRec{}
	}
	if sn.Results == nil {
		sn.Results = []IssueResult{}
	}
	if st.done {
		sn.Outcome = st.outcome()
	}
	for i, p := range g.pairs {
		cs := ConversationState{Number: i + 1, Pair: []string{p[0], p[1]}, Status: "pending"}
		switch {
		case i < st.conv:
			cs.Status = "ended"
		case i == st.conv:
			cs.Status = st.convStage
			cs.Sent = map[string]int{p[0]: st.sent[p[0]], p[1]: st.sent[p[1]]}
		case st.round > 2:
			cs.Status = "ended"
		}
		sn.Conversations = append(sn.Conversations, cs)
	}
	if st.issue >= 0 {
		is := &IssueState{Index: st.issue, ID: g.sc.Issues[st.issue].ID, Stage: st.issueStage,
			Speakers: st.speakers, Spoken: st.spoken, Proposal: st.proposal}
		is.Voted = slices.Sorted(maps.Keys(st.voted))
		sn.Issue = is
	}
	return sn
}

// State implements deliberation.Session.
func (s *Session) State() string {
	st := s.st
	g := s.g
	switch {
	case st.done:
		return fmt.Sprintf("review done: %s", st.outcome())
	case st.round == 2 && st.conv >= 0:
		a, b := g.pairs[st.conv][0], g.pairs[st.conv][1]
		return fmt.Sprintf("round 2: conversation %d/%d (%s–%s), %s, %d+%d of %d+%d messages",
			st.conv+1, len(g.pairs), a, b, st.convStage, st.sent[a], st.sent[b], g.cfg.MessagesPerSide, g.cfg.MessagesPerSide)
	case st.round == 3 && st.issue >= 0:
		return fmt.Sprintf("round 3: issue %d/%d (%s), %s, %d/%d speakers", st.issue+1, len(g.sc.Issues),
			g.sc.Issues[st.issue].ID, st.issueStage, st.spoken, len(st.speakers))
	case st.round > 0:
		return fmt.Sprintf("round %d: %s", st.round, roundTitles[st.round])
	}
	return "not started"
}
