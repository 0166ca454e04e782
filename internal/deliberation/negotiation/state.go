package negotiation

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/logist/logist/internal/deliberation"
)

// Message types of the ledger.
const (
	tRoundStart    = "ROUND_START"        // chair, public
	tOpening       = "OPENING"            // party, public (Round 1, prewritten)
	tConvStart     = "CONVERSATION_START" // chair, private to the pair
	tMessage       = "MESSAGE"            // party, private to the pair
	tInterruption  = "INTERRUPTION"       // chair, private to the pair
	tConvEnd       = "CONVERSATION_END"   // chair, private to the pair
	tIssueIntro    = "ISSUE_INTRO"        // chair, public
	tSpeakerCall   = "SPEAKER_CALL"       // chair, public
	tSpeech        = "SPEECH"             // party, public
	tBasis         = "PROPOSAL_BASIS"     // system, steward only: support per option
	tProposal      = "PROPOSAL"           // chair, public
	tVoteCall      = "VOTE_CALL"          // chair, public
	tVote          = "VOTE"               // voting party, public
	tResult        = "RESULT"             // chair, public
	tReview        = "REVIEW"             // chair, public
	tStanceUpdate  = "STANCE_UPDATE"      // system, steward only
	tHelperIgnored = "HELPER_IGNORED"     // system, steward only
	tIgnored       = "IGNORED_RESULT"     // system, steward only
)

// Turn kinds.
const (
	kindConversation = "conversation"
	kindFinal        = "final"
	kindSpeech       = "speech"
	kindVote         = "vote"
	kindHelper       = "stance_helper"
)

// system is the author of the steward-only audit messages.
const system = "system"

// Round 4 is the review.
const roundReview = 4

var roundTitles = map[int]string{1: "Opening statements", 2: "Private conversations", 3: "Public debate", 4: "Review"}

// Concession is a party's own move on an option.
type Concession struct {
	Issue     string `json:"issue"`
	Option    string `json:"option"`
	Direction string `json:"direction"` // toward | away
}

// Change is one stance value that changed, with its absolute new value so
// a replay sets exactly what was logged.
type Change struct {
	Issue  string   `json:"issue"`
	Field  string   `json:"field"` // acceptance | firmness | preferred
	Option string   `json:"option,omitempty"`
	From   any      `json:"from"`
	To     any      `json:"to"`
	Delta  *float64 `json:"delta,omitempty"`
}

// Skip is a proposed change that was not made, and why.
type Skip struct {
	Issue  string `json:"issue,omitempty"`
	Option string `json:"option,omitempty"`
	Reason string `json:"reason"`
}

// IssueResult is how an issue ended.
type IssueResult struct {
	Issue   string              `json:"issue"`
	Option  string              `json:"option"`
	Adopted bool                `json:"adopted"`
	Tally   *deliberation.Tally `json:"tally,omitempty"`
}

// content is every message's content shape; each type uses a subset
// (docs/negotiation.md lists which).
type content struct {
	Text         string              `json:"text"`
	Round        int                 `json:"round,omitempty"`
	Title        string              `json:"title,omitempty"`
	ScenarioSHA  string              `json:"scenario_sha256,omitempty"`
	Party        string              `json:"party,omitempty"`
	VariantID    string              `json:"variant_id,omitempty"`
	Conversation int                 `json:"conversation,omitempty"` // 1-based
	Pair         []string            `json:"pair,omitempty"`
	Stage        string              `json:"stage,omitempty"` // exchange | final
	Kind         string              `json:"kind,omitempty"`  // SKIPPED: the turn kind
	Reason       string              `json:"reason,omitempty"`
	Issue        string              `json:"issue,omitempty"`
	Issues       []string            `json:"issues,omitempty"`
	Option       string              `json:"option,omitempty"`
	Speakers     []string            `json:"speakers,omitempty"`
	Support      map[string]float64  `json:"support,omitempty"`
	Excluded     []string            `json:"excluded,omitempty"`
	Vote         string              `json:"vote,omitempty"`
	Tally        *deliberation.Tally `json:"tally,omitempty"`
	Adopted      *bool               `json:"adopted,omitempty"`
	Concessions  []Concession        `json:"concessions,omitempty"`
	Truncated    bool                `json:"truncated,omitempty"`
	Early        bool                `json:"early,omitempty"`
	EndedBy      string              `json:"ended_by,omitempty"`
	Source       string              `json:"source,omitempty"` // STANCE_UPDATE: rule | helper
	Target       *int                `json:"target_index,omitempty"`
	Changes      []Change            `json:"changes,omitempty"`
	Skips        []Skip              `json:"ignored,omitempty"`
	Reasons      []string            `json:"reasons,omitempty"`
	Results      []IssueResult       `json:"results,omitempty"`
}

// msg builds a message whose content went through JSON, so a message in
// memory and one reloaded from the history are the same.
func msg(typ, from string, round int, audience []string, c content) deliberation.Message {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // content has only plain fields
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	return deliberation.Message{Type: typ, From: from, Round: round, Content: m, Audience: audience}
}

func readContent(m deliberation.Message) (content, error) {
	var c content
	b, err := json.Marshal(m.Content)
	if err != nil {
		return c, err
	}
	err = json.Unmarshal(b, &c)
	return c, err
}

// state is the game replayed from the ledger.
type state struct {
	g     *game
	msgs  []deliberation.Message
	round int

	openings []openingRec

	conv      int    // index into g.pairs of the current conversation, -1 none
	convStage string // exchange | finals | ended
	sent      map[string]int
	finals    map[string]bool

	issue      int // index into the issues, -1 none
	issueStage string
	speakers   []string
	spoken     int
	called     bool
	basis      string // the option of the logged basis, before the proposal
	proposal   string
	votes      map[string]string
	voted      map[string]bool

	stances map[string]map[string]*Stance
	results []IssueResult
	done    bool

	lastEligible int // index of the last message a helper may assess
	helperDone   map[int]bool
}

type openingRec struct {
	Party     string `json:"party"`
	VariantID string `json:"variant_id"`
	Text      string `json:"text"`
}

// Issue stages.
const (
	stSpeaking = "speaking"
	stProposed = "proposed"
	stVoting   = "voting"
	stClosed   = "closed"
)

func newState(g *game) *state {
	st := &state{g: g, conv: -1, issue: -1, lastEligible: -1, helperDone: map[int]bool{},
		sent: map[string]int{}, finals: map[string]bool{}, votes: map[string]string{}, voted: map[string]bool{},
		stances: map[string]map[string]*Stance{}}
	for _, p := range g.sc.Parties {
		st.stances[p.ID] = map[string]*Stance{}
		for id, s := range p.Stances {
			st.stances[p.ID][id] = copyStance(s)
		}
	}
	return st
}

func copyStance(s *Stance) *Stance {
	c := *s
	c.Acceptance = map[string]*float64{}
	for k, v := range s.Acceptance {
		if v != nil {
			x := *v
			c.Acceptance[k] = &x
		} else {
			c.Acceptance[k] = nil
		}
	}
	c.Fallbacks = append([]string(nil), s.Fallbacks...)
	c.Conditions = append([]string(nil), s.Conditions...)
	return &c
}

// parse decodes the contents of messages once per load.
func parse(msgs []deliberation.Message) ([]content, error) {
	out := make([]content, len(msgs))
	for i := range msgs {
		c, err := readContent(msgs[i])
		if err != nil {
			return nil, fmt.Errorf("message %d (%s %s): %w", i+1, msgs[i].ID, msgs[i].Type, err)
		}
		out[i] = c
	}
	return out, nil
}

func (g *game) replay(msgs []deliberation.Message, parsed []content) (*state, error) {
	st := newState(g)
	for i := range msgs {
		if err := st.applyContent(msgs[i], parsed[i]); err != nil {
			return nil, fmt.Errorf("replaying message %d (%s %s): %w", i+1, msgs[i].ID, msgs[i].Type, err)
		}
	}
	return st, nil
}

// apply advances the state by one committed (or about to be) message.
func (st *state) apply(m deliberation.Message) error {
	c, err := readContent(m)
	if err != nil {
		return err
	}
	return st.applyContent(m, c)
}

func (st *state) applyContent(m deliberation.Message, c content) error {
	st.msgs = append(st.msgs, m)
	idx := len(st.msgs) - 1
	switch m.Type {
	case tRoundStart:
		if c.Round != st.round+1 {
			return fmt.Errorf("round %d starts after round %d", c.Round, st.round)
		}
		if c.Round == 1 && c.ScenarioSHA != st.g.sha {
			return fmt.Errorf("the scenario file %s changed since the negotiation started (sha256 %s, now %s)", st.g.cfg.Scenario, c.ScenarioSHA, st.g.sha)
		}
		st.round = c.Round
	case tOpening:
		st.openings = append(st.openings, openingRec{Party: m.From, VariantID: c.VariantID, Text: c.Text})
	case tConvStart:
		if c.Conversation < 1 || c.Conversation > len(st.g.pairs) {
			return fmt.Errorf("no conversation %d", c.Conversation)
		}
		st.conv, st.convStage = c.Conversation-1, "exchange"
		st.sent, st.finals = map[string]int{}, map[string]bool{}
	case tMessage:
		if c.Stage == kindFinal {
			st.finals[m.From] = true
		} else {
			st.sent[m.From]++
		}
		st.lastEligible = idx
	case tInterruption:
		st.convStage = "finals"
	case tConvEnd:
		st.convStage = "ended"
	case tIssueIntro:
		i, ok := st.g.issues[c.Issue]
		if !ok {
			return fmt.Errorf("no issue %q", c.Issue)
		}
		st.issue, st.issueStage, st.speakers = i, stSpeaking, c.Speakers
		st.spoken, st.called, st.proposal, st.basis = 0, false, "", ""
		st.votes, st.voted = map[string]string{}, map[string]bool{}
	case tSpeakerCall:
		st.called = true
	case tSpeech:
		st.spoken++
		st.called = false
		st.lastEligible = idx
	case deliberation.Skipped:
		switch c.Kind {
		case kindConversation:
			st.sent[c.Party]++
		case kindFinal:
			st.finals[c.Party] = true
		case kindSpeech:
			st.spoken++
			st.called = false
		case kindVote:
			st.voted[c.Party] = true
		}
	case tBasis:
		st.basis = c.Option
	case tProposal:
		st.proposal, st.issueStage = c.Option, stProposed
	case tVoteCall:
		st.issueStage = stVoting
	case tVote:
		st.votes[m.From], st.voted[m.From] = c.Vote, true
	case tResult:
		adopted := c.Adopted != nil && *c.Adopted
		st.results = append(st.results, IssueResult{Issue: c.Issue, Option: c.Option, Adopted: adopted, Tally: c.Tally})
		st.issueStage = stClosed
	case tReview:
		st.done = true
	case tStanceUpdate:
		if err := st.setStance(c.Party, c.Changes); err != nil {
			return err
		}
		if c.Source == sourceHelper && c.Target != nil {
			st.helperDone[*c.Target] = true
		}
	case tHelperIgnored:
		if c.Target != nil {
			st.helperDone[*c.Target] = true
		}
	}
	return nil
}

// setStance applies logged changes (absolute values).
func (st *state) setStance(party string, changes []Change) error {
	for _, ch := range changes {
		s := st.stances[party][ch.Issue]
		if s == nil {
			return fmt.Errorf("stance update for unknown party/issue %s/%s", party, ch.Issue)
		}
		switch ch.Field {
		case "acceptance":
			cur, ok := s.Acceptance[ch.Option]
			if !ok || cur == nil {
				return fmt.Errorf("stance update of %s/%s/%s: unknown or null acceptance", party, ch.Issue, ch.Option)
			}
			v, ok := ch.To.(float64)
			if !ok {
				return fmt.Errorf("stance update of %s/%s/%s: not a number", party, ch.Issue, ch.Option)
			}
			*cur = v
		case "firmness":
			v, ok := ch.To.(float64)
			if !ok {
				return fmt.Errorf("firmness update of %s/%s: not a number", party, ch.Issue)
			}
			s.Firmness = v
		case "preferred":
			v, _ := ch.To.(string)
			s.Preferred = v
		}
	}
	return nil
}

// turnSpec is a turn before its prompt is written.
type turnSpec struct {
	party  string
	kind   string
	key    string // identifies the slot: results for other keys are stale
	other  string // conversation partner
	issue  string
	target int // helper: index of the assessed message
}

// next is what the state calls for now: a message the chair or the
// orchestrator emits, or turns, or the end. It is a pure function of the
// state.
func (st *state) next() (*deliberation.Message, []turnSpec) {
	g := st.g
	if st.done {
		return nil, nil
	}
	switch st.round {
	case 0:
		return st.roundStart(1), nil
	case 1:
		if len(st.openings) < len(g.ids) {
			id := g.ids[len(st.openings)]
			vs := sortedVariants(g.parties[id].Openings)
			v := vs[deliberation.Pick(g.seed, "round1/opening/"+id, len(vs))]
			m := msg(tOpening, id, 1, nil, content{Text: v.Text, VariantID: v.ID, Party: id})
			return &m, nil
		}
		return st.roundStart(2), nil
	case 2:
		return st.nextConversation()
	case 3:
		return st.nextDebate()
	case roundReview:
		var adopted, failed []string
		for _, r := range st.results {
			if r.Adopted {
				adopted = append(adopted, fmt.Sprintf("%s (%s)", g.issue(r.Issue).Title, g.optionTitle(r.Issue, r.Option)))
			} else {
				failed = append(failed, g.issue(r.Issue).Title)
			}
		}
		text := g.line("r4/review", "review", map[string]string{"adopted": list(adopted), "failed": list(failed)})
		m := msg(tReview, g.sc.Chair.ID, roundReview, nil, content{Text: text, Results: st.results})
		return &m, nil
	}
	return nil, nil
}

func (st *state) roundStart(r int) *deliberation.Message {
	c := content{Round: r, Title: roundTitles[r]}
	c.Text = st.g.line(fmt.Sprintf("r%d/start", r), "round_start", map[string]string{"round": fmt.Sprint(r), "title": roundTitles[r]})
	if r == 1 {
		c.ScenarioSHA = st.g.sha
	}
	m := msg(tRoundStart, st.g.sc.Chair.ID, r, nil, c)
	return &m
}

func (st *state) nextConversation() (*deliberation.Message, []turnSpec) {
	g := st.g
	if st.conv < 0 || st.convStage == "ended" {
		n := st.conv + 1
		if n >= len(g.pairs) {
			return st.roundStart(3), nil
		}
		a, b := g.pairs[n][0], g.pairs[n][1]
		text := g.line(fmt.Sprintf("r2/c%d/start", n+1), "conversation_start", map[string]string{"a": g.name(a), "b": g.name(b)})
		m := msg(tConvStart, g.sc.Chair.ID, 2, []string{a, b}, content{Text: text, Conversation: n + 1, Pair: []string{a, b}})
		return &m, nil
	}
	a, b := g.pairs[st.conv][0], g.pairs[st.conv][1]
	names := map[string]string{"a": g.name(a), "b": g.name(b)}
	cn := st.conv + 1
	pairContent := content{Conversation: cn, Pair: []string{a, b}}
	switch st.convStage {
	case "exchange":
		cap := g.cfg.MessagesPerSide
		if st.sent[a] >= cap && st.sent[b] >= cap {
			c := pairContent
			c.Text = g.line(fmt.Sprintf("r2/c%d/interrupt", cn), "interruption", names)
			m := msg(tInterruption, g.sc.Chair.ID, 2, []string{a, b}, c)
			return &m, nil
		}
		// Strict alternation, first of the pair first.
		p, o := a, b
		if st.sent[a] > st.sent[b] {
			p, o = b, a
		}
		return nil, []turnSpec{{party: p, other: o, kind: kindConversation,
			key: fmt.Sprintf("r2/c%d/%s/%d", cn, p, st.sent[p]+1)}}
	case "finals":
		for _, p := range []string{a, b} {
			if !st.finals[p] {
				o := b
				if p == b {
					o = a
				}
				return nil, []turnSpec{{party: p, other: o, kind: kindFinal, key: fmt.Sprintf("r2/c%d/%s/final", cn, p)}}
			}
		}
		c := pairContent
		c.Text = g.line(fmt.Sprintf("r2/c%d/end", cn), "conversation_end", names)
		m := msg(tConvEnd, g.sc.Chair.ID, 2, []string{a, b}, c)
		return &m, nil
	}
	return nil, nil
}

func (st *state) nextDebate() (*deliberation.Message, []turnSpec) {
	g := st.g
	chair := g.sc.Chair.ID
	if st.issue < 0 || st.issueStage == stClosed {
		// Issues in order, each once: a failed issue is never revisited.
		n := st.issue + 1
		if n >= len(g.sc.Issues) {
			return st.roundStart(roundReview), nil
		}
		is := g.sc.Issues[n]
		sp := g.speakers(is.ID)
		names := make([]string, len(sp))
		for i, p := range sp {
			names[i] = g.name(p)
		}
		text := g.line("r3/"+is.ID+"/intro", "issue_intro", map[string]string{"issue": is.ID, "title": is.Title, "speakers": list(names)})
		m := msg(tIssueIntro, chair, 3, nil, content{Text: text, Issue: is.ID, Speakers: sp})
		return &m, nil
	}
	is := g.sc.Issues[st.issue]
	switch st.issueStage {
	case stSpeaking:
		if st.spoken < len(st.speakers) {
			p := st.speakers[st.spoken]
			if !st.called {
				text := g.line(fmt.Sprintf("r3/%s/call/%d", is.ID, st.spoken+1), "speaker_call", map[string]string{"party": g.name(p), "issue": is.Title})
				m := msg(tSpeakerCall, chair, 3, nil, content{Text: text, Issue: is.ID, Party: p})
				return &m, nil
			}
			return nil, []turnSpec{{party: p, kind: kindSpeech, issue: is.ID, key: fmt.Sprintf("r3/%s/speech/%d", is.ID, st.spoken+1)}}
		}
		// The basis (sums of private acceptances) is for the steward
		// only; the parties hear the chair's procedural line.
		if st.basis == "" {
			opt, support, excluded := st.propose(is)
			text := fmt.Sprintf("support on %s: %s", is.ID, supportText(is, support, excluded))
			m := msg(tBasis, system, 3, []string{deliberation.Steward}, content{Text: text, Issue: is.ID, Option: opt, Support: support, Excluded: excluded})
			return &m, nil
		}
		text := g.line("r3/"+is.ID+"/proposal", "proposal", map[string]string{"issue": is.Title, "option": g.optionTitle(is.ID, st.basis)})
		m := msg(tProposal, chair, 3, nil, content{Text: text, Issue: is.ID, Option: st.basis})
		return &m, nil
	case stProposed:
		text := g.line("r3/"+is.ID+"/vote", "vote_call", map[string]string{"issue": is.Title, "option": g.optionTitle(is.ID, st.proposal)})
		m := msg(tVoteCall, chair, 3, nil, content{Text: text, Issue: is.ID, Option: st.proposal})
		return &m, nil
	case stVoting:
		// Seed 004 §4.3: no bulk "query all agents" at the end of debate.
		// Each voting party is asked in its own turn, in the scenario's
		// order (a roll call: it sees the votes cast before it).
		for _, v := range g.voters {
			if !st.voted[v] {
				return nil, []turnSpec{{party: v, kind: kindVote, issue: is.ID, key: fmt.Sprintf("r3/%s/vote/%s", is.ID, v)}}
			}
		}
		tally := deliberation.Count(st.votes, g.voters, deliberation.VoteRule{Rule: deliberation.RuleUnanimity})
		situation := "result_failed"
		if tally.Passed {
			situation = "result_adopted"
		}
		text := g.line("r3/"+is.ID+"/result", situation, map[string]string{"issue": is.Title,
			"option": g.optionTitle(is.ID, st.proposal), "yes": fmt.Sprint(len(tally.Yes)), "needed": fmt.Sprint(tally.Needed)})
		adopted := tally.Passed
		m := msg(tResult, chair, 3, nil, content{Text: text, Issue: is.ID, Option: st.proposal, Tally: &tally, Adopted: &adopted})
		return &m, nil
	}
	return nil, nil
}

func supportText(is Issue, support map[string]float64, excluded []string) string {
	var parts []string
	for _, o := range is.Options {
		p := fmt.Sprintf("%s %v", o.ID, support[o.ID])
		if slices.Contains(excluded, o.ID) {
			p += " (unacceptable to a voting party)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

func sortedVariants(vs []Variant) []Variant {
	out := append([]Variant(nil), vs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func list(xs []string) string {
	switch len(xs) {
	case 0:
		return "none"
	case 1:
		return xs[0]
	}
	s := ""
	for i, x := range xs {
		switch {
		case i == 0:
		case i == len(xs)-1:
			s += " and "
		default:
			s += ", "
		}
		s += x
	}
	return s
}
