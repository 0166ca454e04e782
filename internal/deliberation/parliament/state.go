package parliament

import (
	"fmt"
	"strings"
	"time"

	"github.com/logist/logist/internal/deliberation"
)

// Session statuses (seed 000).
const (
	stSetup      = "setup"
	stOpening    = "opening_statements"
	stEvaluating = "evaluating_statements"
	stDrafting   = "drafting"
	stDebate     = "debate"
	stVoting     = "voting"
	stPMReview   = "pm_review"
	stSynthesis  = "synthesis"
	stComplete   = "complete"
)

// Message types: the ten of seed 000, plus the Speaker's tool calls, the
// papers shared with the House, and skipped turns.
const (
	tBill      = "BILL_DRAFT"
	tOpening   = "OPENING_STATEMENT"
	tQuestion  = "QUESTION"
	tAnswer    = "ANSWER"
	tAmendment = "AMENDMENT"
	tMotion    = "MOTION"
	tVote      = "VOTE"
	tRuling    = "SPEAKER_RULING"
	tTally     = "VOTE_TALLY"
	tPM        = "PM_DECISION"
	tTool      = "TOOL_CALL"
	tPaper     = "PAPER"
	// tRefused records a governed file changed outside an enacted vote:
	// refused, the official text restored (Speaker and steward only).
	tRefused = "GOVERNED_CHANGE_REFUSED"
	// tSummary is an ended round's summary as the summarizer agent wrote
	// it ("by": "agent"), or the Clerk's fallback when its answer failed
	// ("by": "fallback"): it replaces the round's deterministic summary.
	tSummary = "ROUND_SUMMARY"
)

// Turn kinds: what a recognized member is asked for.
const (
	kOpening = "opening"
	kDraft   = "draft"
	kFloor   = "floor" // a question to another member, or an amendment
	kAnswer  = "answer"
	kVote    = "vote"
	kSpeaker = "speaker"
	kSummary = "round_summary" // the summarizer's summary of an ended round
)

// Amendment statuses (seed 000).
const (
	amProposed     = "proposed"
	amDebating     = "debating"
	amIncorporated = "incorporated"
	amRejected     = "rejected"
	amWithdrawn    = "withdrawn"
)

const subjectBill = "bill"

type rep struct {
	RepConfig
	num         int
	temp        int
	tempHistory []map[string]any
	scores      map[string]int
	quietUntil  int // quiet while the round is below it
	record      []map[string]any
	opened      bool
}

func (r *rep) quiet(round int) bool { return r.quietUntil > round }

type position struct {
	Agent    string `json:"agent_id"`
	Position string `json:"position"`
	Round    int    `json:"round"`
}

type amendment struct {
	ID, From                                           string
	Round                                              int
	Target, Action, Description, Rationale, Text, File string
	Diff                                               string
	Status                                             string
	Positions                                          []position
	AtFloor                                            int // floor turns held before it was proposed
	Voted, Passed, Enacted                             bool
	NeedsText                                          bool // incorporated, bill text not yet rewritten
	MsgID                                              string
	history                                            []map[string]any
}

func (a *amendment) open() bool { return a.Status == amProposed || a.Status == amDebating }

type voteState struct {
	Subject string
	Forced  string
	Round   int
	Votes   map[string]string
	Done    map[string]bool
	Notes   map[string]string // reservations or reasoning of NO voters
}

type pendingTurns struct {
	Kind        string
	Instruction string
	Targets     []string
	Data        map[string]any
}

type question struct{ MsgID, From, To, Topic string }

type paper struct {
	ID, Name, Content string
	Round             int
}

type issue struct {
	ID, Title, Description, Status string
	Round                          int
}

type billState struct {
	Title, Summary, Drafter, Target string
	Version                         int
	Sections                        map[string]any
	Drafted, Tabled                 bool
}

// state is the session replayed from its messages; nothing else feeds it.
type state struct {
	cfg     *Config
	seed    int64
	task    string
	ws, dir string
	speaker string // manifest agent playing the Speaker; "" = built-in

	msgs   []deliberation.Message
	status string
	round  int
	reps   []*rep
	byID   map[string]*rep

	drafter    string
	bill       billState
	amendments []*amendment
	exchanges  int // floor turns this round
	floor      int // floor turns in the session (the rotation's cursor)
	question   *question
	pend       *pendingTurns
	vote       *voteState

	voteHistory  []map[string]any
	papers       []paper
	issues       []*issue
	activeMotion string
	summaries    []map[string]any
	summaryText  map[int]string
	guidance     []map[string]any
	files        map[string]string // workspace files written by messages
	shared       map[string]string // paper name → content last shared

	evaluated     bool
	draftSkips    int
	speakerStreak int
	speakerFails  int
	observed      int
	outcome       string
	pmDecision    string
	billPassed    bool
	finalDrafted  bool
	finalSkipped  bool
	// now is the engine's clock (nil: the wall clock).
	now           func() time.Time
	lastTool      *deliberation.Message
	lastTally     map[string]any
	stanceByRound map[int][]stanceNote
	ended         map[int]bool
	summarized    map[int]bool // rounds with a ROUND_SUMMARY
}

// clock is the time a tool's output states (seed 001's adjourn
// Timestamp): the engine's clock, the wall clock without one.
func (s *state) clock() string {
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	return now().UTC().Format(time.RFC3339)
}

type stanceNote struct {
	Rep, Stance, Topic string
}

func newState(cfg *Config, env deliberation.Env, speaker string) *state {
	s := &state{cfg: cfg, seed: env.Seed, task: env.Task, ws: env.Workspace, dir: env.Dir, speaker: speaker, now: env.Now,
		status: stSetup, byID: map[string]*rep{}, summaryText: map[int]string{}, files: map[string]string{},
		shared: map[string]string{}, observed: -1, stanceByRound: map[int][]stanceNote{}, ended: map[int]bool{}, summarized: map[int]bool{}}
	s.drafter = cfg.Drafter
	for i, rc := range cfg.Representatives {
		r := &rep{RepConfig: rc, num: i + 1, temp: *rc.Temperature, scores: map[string]int{}}
		for _, m := range rc.Motives {
			r.scores[m] = 1 // unaddressed until the member scores it
		}
		r.tempHistory = []map[string]any{{"round": 0, "temperature": r.temp}}
		s.reps = append(s.reps, r)
		s.byID[r.ID] = r
	}
	return s
}

func (s *state) problem() string {
	if s.cfg.ProblemStatement != "" {
		return s.cfg.ProblemStatement
	}
	return s.task
}

func (s *state) seats() int { return len(s.reps) }

// maxExchanges is the debate clock's cap on floor turns per round: 2×seats
// in round 1 shrinking evenly to 1×seats by round 6 (seed 000).
func maxExchanges(round, seats int) int {
	round = min(max(round, 1), 6)
	return 2*seats - ((round-1)*seats*2+5)/10
}

// responseBudget is the sentences an answer may have: 6 in round 1, one
// fewer each round, 3 from round 4.
func responseBudget(round int) int {
	return min(max(7-max(round, 1), 3), 6)
}

func (s *state) capReached() bool { return s.exchanges >= maxExchanges(s.round, s.seats()) }

// lowScores lists motives scored below 3 (the vote gate).
func (s *state) lowScores() []string {
	var out []string
	for _, r := range s.reps {
		for _, m := range r.Motives {
			if r.scores[m] < 3 {
				out = append(out, fmt.Sprintf("%s %q %d/5", r.ID, m, r.scores[m]))
			}
		}
	}
	return out
}

// forcedBy says what allows a vote despite low scores: the clock (this
// round's exchanges spent) or the round limit.
func (s *state) forcedBy() string {
	switch {
	case s.capReached():
		return "clock"
	case s.round >= s.cfg.MaxRounds:
		return "round_limit"
	}
	return ""
}

func (s *state) amendment(id string) *amendment {
	for _, a := range s.amendments {
		if strings.EqualFold(a.ID, id) {
			return a
		}
	}
	return nil
}

func (s *state) repByNum(n int) *rep {
	if n < 1 || n > len(s.reps) {
		return nil
	}
	return s.reps[n-1]
}

func (s *state) name(id string) string {
	if r := s.byID[id]; r != nil {
		return r.Name
	}
	switch id {
	case speakerID:
		return "the Speaker"
	case pmID:
		return "the Prime Minister"
	}
	return id
}

func (s *state) lastPMGuidance() string {
	for i := len(s.guidance) - 1; i >= 0; i-- {
		if g := str(s.guidance[i]["guidance"]); g != "" {
			return g
		}
	}
	return ""
}

func (a *amendment) setStatus(st string, round int) {
	a.Status = st
	a.history = append(a.history, map[string]any{"round": round, "status": st})
}

// position records a member's position on an amendment and applies the
// incorporation threshold (seed 000): the proposer and at least one other
// representative endorse it, or the bill's drafter does. A proposer who
// opposes their own amendment withdraws it.
func (s *state) position(a *amendment, who, pos string, round int) {
	if !a.open() && a.Status != amIncorporated {
		return
	}
	if who == a.From {
		if pos == "oppose" && a.open() {
			a.setStatus(amWithdrawn, round)
		}
		return
	}
	found := false
	for i := range a.Positions {
		if a.Positions[i].Agent == who {
			a.Positions[i] = position{who, pos, round}
			found = true
		}
	}
	if !found {
		a.Positions = append(a.Positions, position{who, pos, round})
	}
	if !a.open() {
		return
	}
	if a.Status == amProposed {
		a.setStatus(amDebating, round)
	}
	if s.thresholdMet(a) {
		s.incorporate(a, round)
	}
}

func (s *state) endorsers(a *amendment) (endorse, oppose int, drafter bool) {
	for _, p := range a.Positions {
		switch p.Position {
		case "endorse":
			endorse++
			drafter = drafter || p.Agent == s.bill.Drafter
		case "oppose":
			oppose++
		}
	}
	return
}

func (s *state) thresholdMet(a *amendment) bool {
	e, _, d := s.endorsers(a)
	proposerIsRep := s.byID[a.From] != nil
	return d || (proposerIsRep && e >= 1) || (!proposerIsRep && e >= 2)
}

func (s *state) incorporate(a *amendment, round int) {
	a.setStatus(amIncorporated, round)
	a.NeedsText = a.Diff == "" // a file amendment changes its file when enacted
}

func (s *state) pendRemove(who string) {
	if s.pend == nil {
		return
	}
	for i, t := range s.pend.Targets {
		if t == who {
			s.pend.Targets = append(s.pend.Targets[:i:i], s.pend.Targets[i+1:]...)
			break
		}
	}
	if len(s.pend.Targets) == 0 {
		s.pend = nil
	}
}

func (s *state) checkOpenings() {
	if s.status != stOpening {
		return
	}
	for _, r := range s.reps {
		if !r.opened {
			return
		}
	}
	s.status = stEvaluating
}

func (s *state) scoresFrom(r *rep, v any) {
	for k, x := range obj(v) {
		if n, ok := intOf(x); ok {
			if _, known := r.scores[k]; known {
				r.scores[k] = n
			}
		}
	}
}

// reduce applies one committed message to the state.
func (s *state) reduce(m deliberation.Message) {
	s.msgs = append(s.msgs, m)
	c := m.Content
	r := s.byID[m.From]
	if r != nil {
		s.speakerStreak, s.speakerFails = 0, 0
	}
	switch m.Type {
	case tRuling:
		s.reduceRuling(m)
	case tSummary:
		s.reduceSummary(m)
	case tTool:
		s.reduceTool(m)
	case tPaper:
		s.papers = append(s.papers, paper{ID: str(c["paper_id"]), Name: str(c["name"]), Content: str(c["content"]), Round: m.Round})
		s.shared[str(c["name"])] = str(c["content"])
	case tOpening:
		if r != nil {
			r.opened = true
			s.pendRemove(r.ID)
			s.checkOpenings()
		}
	case tBill:
		if v, ok := intOf(c["bill_version"]); ok {
			s.bill.Version = v
		}
		s.bill.Title, s.bill.Summary = str(c["title"]), str(c["summary"])
		s.bill.Sections = obj(c["sections"])
		if id := str(c["incorporates"]); id != "" {
			if a := s.amendment(id); a != nil {
				a.NeedsText = false
			}
		}
		if r != nil || str(c["skeleton"]) != "" {
			s.bill.Drafted = true
			if s.bill.Drafter == "" {
				s.bill.Drafter = m.From
			}
			if s.status == stSynthesis {
				s.finalDrafted = true
			}
		}
		if r != nil {
			s.drafter = r.ID
			s.pendRemove(r.ID)
		}
	case tQuestion:
		if r != nil {
			s.question = &question{MsgID: m.ID, From: m.From, To: m.To, Topic: str(c["topic"])}
			s.pendRemove(r.ID)
		}
	case tAnswer:
		if r != nil {
			s.scoresFrom(r, c["motive_scores"])
			topic := ""
			if s.question != nil {
				topic = s.question.Topic
			}
			s.stanceByRound[m.Round] = append(s.stanceByRound[m.Round], stanceNote{Rep: r.ID, Stance: str(c["stance"]), Topic: topic})
			if ap := obj(c["amendment_position"]); ap != nil {
				if a := s.amendment(str(ap["amendment_id"])); a != nil {
					s.position(a, r.ID, str(ap["position"]), m.Round)
				}
			}
			s.question = nil
			s.pendRemove(r.ID)
		}
	case tAmendment:
		a := &amendment{ID: str(c["amendment_id"]), From: m.From, Round: m.Round, Target: str(c["target_section"]),
			Action: str(c["action"]), Description: str(c["description"]), Rationale: str(c["rationale"]),
			Text: str(c["proposed_text"]), File: str(c["file"]), Diff: str(c["diff"]), AtFloor: s.floor, MsgID: m.ID}
		a.setStatus(amProposed, m.Round)
		s.amendments = append(s.amendments, a)
		if r != nil {
			s.pendRemove(r.ID)
		}
	case tMotion:
		s.activeMotion = fmt.Sprintf("%s by %s: %s", str(c["motion_type"]), m.From, oneLine(str(c["reason"])))
	case tVote:
		if r != nil && s.vote != nil {
			v := strings.ToUpper(str(c["vote"]))
			s.vote.Votes[r.ID] = v
			s.vote.Done[r.ID] = true
			if v != deliberation.Yes {
				note := str(c["reservations"])
				if note == "" {
					note = str(c["reasoning"])
				}
				s.vote.Notes[r.ID] = note
			}
			s.scoresFrom(r, c["motive_scores"])
			r.record = append(r.record, map[string]any{"round": m.Round, "subject": s.vote.Subject, "bill_version": s.bill.Version, "vote": v})
			s.pendRemove(r.ID)
		}
	case tTally:
		s.reduceTally(m)
	case tPM:
		s.reducePM(m)
	case deliberation.Skipped:
		p := str(c["participant"])
		if p == speakerID {
			s.speakerStreak++
			s.speakerFails++
			return
		}
		if r == nil {
			return
		}
		switch str(c["kind"]) {
		case kOpening:
			r.opened = true
			defer s.checkOpenings()
		case kAnswer:
			s.question = nil
		case kVote:
			if s.vote != nil {
				s.vote.Done[r.ID] = true
			}
		case kDraft:
			if s.status == stSynthesis {
				s.finalSkipped = true
			} else {
				s.draftSkips++
			}
		}
		s.pendRemove(r.ID)
	}
}

func (s *state) reduceRuling(m deliberation.Message) {
	c := m.Content
	switch str(c["action"]) {
	case "round_start":
		s.round = m.Round
		s.exchanges = 0
		if m.Round == 0 {
			s.status = stOpening
		} else {
			s.status = stDebate
		}
	case "round_end":
		s.endRound(m.Round)
	case "call_vote":
		subj := str(c["subject"])
		if subj == "" {
			subj = subjectBill
		}
		s.status = stVoting
		s.vote = &voteState{Subject: subj, Forced: str(c["forced"]), Round: m.Round,
			Votes: map[string]string{}, Done: map[string]bool{}, Notes: map[string]string{}}
	case "quiet":
		if r := s.byID[m.To]; r != nil {
			r.quietUntil = m.Round + 1
		}
	case "deadlock_warning", "progress_note":
		s.observed = m.Round
	}
	if s.status == stEvaluating {
		s.evaluated = true
	}
}

func (s *state) reduceTool(m deliberation.Message) {
	c := m.Content
	if str(c["by"]) == "agent" {
		s.speakerStreak++
		if n, _ := intOf(c["exit_code"]); n != 0 {
			s.speakerFails++
		} else {
			s.speakerFails = 0
		}
	} else {
		s.speakerStreak, s.speakerFails = 0, 0
	}
	mm := m
	s.lastTool = &mm
	if n, _ := intOf(c["exit_code"]); n != 0 {
		return
	}
	e := obj(c["effect"])
	switch str(c["tool"]) {
	case toolRecognize:
		p := &pendingTurns{Kind: str(e["kind"]), Instruction: str(e["instruction"]), Targets: strs(e["targets"]), Data: obj(e["data"])}
		if len(p.Targets) > 0 {
			s.pend = p
		}
		switch {
		case p.Kind == kFloor:
			s.exchanges++
			s.floor++
		case p.Kind == kDraft && s.status == stEvaluating && len(p.Targets) == 1:
			s.drafter = p.Targets[0]
			s.status = stDrafting
		}
	case toolTable:
		if str(e["type"]) == "bill" {
			s.bill.Tabled = true
			s.bill.Target = str(e["target"])
		}
	case toolEdit:
		if fw := obj(c[deliberation.FileWriteKey]); fw != nil {
			s.files[cleanPath(str(fw["path"]))] = str(fw["content"])
		}
		if str(e["mode"]) == "enact" {
			if a := s.amendment(str(e["amendment_id"])); a != nil {
				a.Enacted = true
				a.history = append(a.history, map[string]any{"round": m.Round, "status": "enacted"})
			}
		}
	case toolIssue:
		switch str(e["action"]) {
		case "create":
			s.issues = append(s.issues, &issue{ID: str(e["id"]), Title: str(e["title"]), Description: str(e["description"]), Status: "open", Round: m.Round})
		case "close":
			for _, is := range s.issues {
				if is.ID == str(e["id"]) {
					is.Status = "closed"
				}
			}
		}
	case toolAdjourn:
		s.status = stComplete
		if s.outcome == "" {
			s.outcome = "adjourned"
		}
	}
}

func (s *state) reduceTally(m deliberation.Message) {
	c := m.Content
	subj := str(c["subject"])
	passed, _ := c["passed"].(bool)
	s.lastTally = c
	s.voteHistory = append(s.voteHistory, map[string]any{"round": m.Round, "subject": subj, "bill_version": c["bill_version"],
		"tally": c["tally"], "passed": passed, "rule": c["rule"], "message_id": m.ID})
	s.vote = nil
	if subj == subjectBill || subj == "" {
		switch {
		case passed:
			s.billPassed = true
			s.status = stPMReview
		case str(c["next_action"]) == "advance_to_pm":
			s.status = stPMReview
		default:
			s.status = stDebate
		}
		return
	}
	s.status = stDebate
	if a := s.amendment(subj); a != nil {
		a.Voted, a.Passed = true, passed
		switch {
		case passed && a.Status != amIncorporated:
			s.incorporate(a, m.Round)
		case !passed:
			a.setStatus(amRejected, m.Round)
		}
	}
}

func (s *state) reducePM(m deliberation.Message) {
	c := m.Content
	d := str(c["decision"])
	s.guidance = append(s.guidance, map[string]any{"round": m.Round, "decision": d, "reason": str(c["reason"]), "guidance": str(c["guidance"]), "message_id": m.ID})
	switch d {
	case "approve":
		s.pmDecision, s.outcome, s.status = d, "approved", stSynthesis
	case "amend_and_approve":
		s.pmDecision, s.outcome, s.status = d, "amended_and_approved", stSynthesis
	case "veto":
		if s.round >= s.cfg.MaxRounds {
			// No round is left to debate a revision: the veto ends the
			// session (the Speaker adjourns it) instead of opening round
			// max_rounds+1.
			s.pmDecision, s.outcome, s.status = d, "vetoed", stSynthesis
			return
		}
		// The bill goes back to its drafter with the guidance, then to a
		// new debate round once tabled again.
		s.pmDecision, s.status = d, stDrafting
		s.bill.Drafted, s.bill.Tabled, s.billPassed = false, false, false
		s.draftSkips = 0
	}
}

// endRound closes a debate round: the rejection rule for amendments still
// open (more oppose than endorse positions, the proposer counting as an
// endorsement when a member), temperatures, and the round summary.
func (s *state) endRound(round int) {
	if s.ended[round] {
		return
	}
	s.ended[round] = true
	for _, a := range s.amendments {
		if !a.open() || len(a.Positions) == 0 {
			continue
		}
		e, o, _ := s.endorsers(a)
		if s.byID[a.From] != nil {
			e++
		}
		if o > e {
			a.setStatus(amRejected, round)
		}
	}
	for _, r := range s.reps {
		d := 0
		for _, n := range s.stanceByRound[round] {
			if n.Rep == r.ID {
				d += stanceHeat[n.Stance]
			}
		}
		if d != 0 {
			r.temp = min(max(r.temp+d, 0), 100)
		}
		r.tempHistory = append(r.tempHistory, map[string]any{"round": round, "temperature": r.temp})
	}
	sum := s.summarize(round)
	s.summaries = append(s.summaries, sum)
	s.summaryText[round] = summaryText(sum)
}

// stanceHeat is how a stance moves the member's temperature.
var stanceHeat = map[string]int{"challenge": 5, "maintain": 0, "soften": -5, "concede": -10}

func (s *state) roundMsgs(round int) []deliberation.Message {
	var out []deliberation.Message
	for _, m := range s.msgs {
		if m.Round == round {
			out = append(out, m)
		}
	}
	return out
}
