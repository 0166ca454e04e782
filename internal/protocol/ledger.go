package protocol

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/schemas"
)

// EventSchema is the schema file the event bodies are checked against.
const EventSchema = "protocol-events.json"

// Guards, as GuardError.Guard names them.
const (
	GuardRole         = "role"
	GuardChain        = "chain"
	GuardSchema       = "schema"
	GuardOrdering     = "ordering"
	GuardEvidence     = "evidence"
	GuardFinalization = "finalization"
	GuardAction       = "action"
)

// Statuses of proposals, intents and claims.
const (
	StatusProposed    = "proposed"
	StatusApproved    = "approved"
	StatusConditional = "conditionally_approved"
	StatusRejected    = "rejected"

	StatusSigned    = "signed"
	StatusBlocked   = "blocked"
	StatusStarted   = "started"
	StatusCompleted = "completed"
	StatusFailed    = "failed"

	StatusIssued     = "issued"
	StatusChallenged = "challenged"
	StatusSuperseded = "superseded"
)

// Verification statuses.
const (
	VerdictPass         = "pass"
	VerdictPassWarnings = "pass_with_warnings"
	VerdictFail         = "fail"
)

// GuardError is an event a guard refuses: which guard, the failure class
// (one of the Fail* constants) and why.
type GuardError struct {
	Class string
	Guard string
	Msg   string
}

func (e *GuardError) Error() string { return e.Guard + " guard: " + e.Class + ": " + e.Msg }

func guardf(guard, class, format string, args ...any) *GuardError {
	return &GuardError{Class: class, Guard: guard, Msg: fmt.Sprintf(format, args...)}
}

// Failure is one failure the verifier (or the ledger, for what only the
// verifier may judge) reports: its class, the history record it is about
// (0 when unknown) and why.
type Failure struct {
	Class     string `json:"class"`
	Seq       int64  `json:"seq,omitempty"`
	EventType string `json:"event_type,omitempty"`
	Subject   string `json:"subject,omitempty"`
	Detail    string `json:"detail"`
}

// Proposal is a proposal unit as the events left it.
type Proposal struct {
	ID               string
	Objective        string
	Assumptions      []string
	RequiredTools    []string
	ExpectedEvidence []string
	// Status: proposed, approved, conditionally_approved or rejected.
	Status     string
	Conditions string
	Reason     string
	Revises    string
	Seq        int64
}

// IntentRecord is a tool intent as the events left it.
type IntentRecord struct {
	ID, ProposalID, Tool string
	// Input is decoded from the input artifact (nil when the ledger has no
	// store or the artifact is unreadable).
	Input         map[string]any
	InputHash     string
	InputArtifact string
	RiskClass     string
	Justification string
	// Status: signed, approved, blocked, started, completed or failed.
	Status string
	Review string
	// Result is the execution's outcome, once it finished.
	Result *ToolResult
	Seq    int64
}

// Claim is a claim as the events left it.
type Claim struct {
	ID         string
	Text       string
	Confidence float64
	Evidence   []string
	// Status: issued, challenged or superseded (by a revision).
	Status       string
	Revises      string
	SupersededBy string
	// Challenged stays true after a revision supersedes the claim.
	Challenged bool
	Challenge  string
	Seq        int64
}

// FinalStatement is the final claim bundle.
type FinalStatement struct {
	Summary  string
	ClaimIDs []string
	Hash     string
	Seq      int64
}

// Verification is the Auditor's run.
type Verification struct {
	Started        bool
	Completed      bool
	Status         string
	ReportArtifact string
	Seq            int64
}

// Ledger is the protocol state of a job, replayed from its events. It is
// not safe for concurrent use: appends are serialised by the job's write
// lock (seed 003 concurrency model), which also guards the ledger.
type Ledger struct {
	State        State
	Proposals    map[string]*Proposal
	Intents      map[string]*IntentRecord
	Claims       map[string]*Claim
	Final        *FinalStatement
	Verification *Verification
	// Head is the hash of the last event (history.GenesisHash before the
	// first): the PrevEvent of the next.
	Head string
	// PublicKeys are role -> "ed25519:<base64>", from session_initialized.
	PublicKeys map[string]string
	Events     []*history.ProtocolEvent
	// Seqs are the history sequence numbers of Events (0 where applied
	// without a record).
	Seqs []int64
	// Pending are failures that do not stop the session but that the
	// verifier will report (seed 003: a missing artifact at claim time
	// lets the session continue to auditing, with the expected failure).
	Pending []Failure
	// Store, when set, lets the guards check that artifacts an event names
	// are stored and intact, and fills IntentRecord.Input.
	Store *Store

	// produced: artifact id -> index in Events of the completed tool
	// execution whose output it is.
	produced   map[string]int
	inFlight   int
	failedRuns int
	blocked    int
	// unproduced: claim evidence no earlier execution produced.
	unproduced []evidenceRef
}

type evidenceRef struct {
	seq      int64
	index    int
	claim    string
	artifact string
}

// NewLedger is the ledger of a session with no events yet.
func NewLedger(store *Store) *Ledger {
	return &Ledger{
		State:      Initialized,
		Proposals:  map[string]*Proposal{},
		Intents:    map[string]*IntentRecord{},
		Claims:     map[string]*Claim{},
		Head:       history.GenesisHash,
		PublicKeys: map[string]string{},
		Store:      store,
		produced:   map[string]int{},
	}
}

// Replay rebuilds the ledger from a job's records (the event records, in
// order; others are skipped). It applies events as they are: integrity and
// the guards are Verify's business, so a damaged trace still replays.
// store may be nil.
func Replay(recs []history.Record, store *Store) (*Ledger, error) {
	l := NewLedger(store)
	for i := range recs {
		if err := l.ApplyRecord(recs[i]); err != nil {
			return l, err
		}
	}
	return l, nil
}

// ApplyRecord applies an event record; other records are ignored.
func (l *Ledger) ApplyRecord(r history.Record) error {
	if r.Type != history.TypeEvent {
		return nil
	}
	if r.Event == nil {
		return fmt.Errorf("history record %d is an event record without an event", r.Seq)
	}
	l.apply(r.Seq, r.Event)
	return nil
}

// Apply records an event (checked beforehand with Check) in the ledger.
func (l *Ledger) Apply(e *history.ProtocolEvent) { l.apply(0, e) }

// ValidateLast checks the last event after a crash (seed 003 recovery:
// reload the head, validate the last complete event): it links to its
// predecessor, its hash is its content's and its signature verifies.
func (l *Ledger) ValidateLast() error {
	n := len(l.Events)
	if n == 0 {
		return nil
	}
	prev := history.GenesisHash
	if n > 1 {
		prev = l.Events[n-2].Hash
	}
	e := l.Events[n-1]
	if e.PrevEvent != prev {
		return guardf(GuardChain, FailChainBreak, "last event %s does not link to its predecessor", e.Type)
	}
	return VerifyEvent(e, l.PublicKeys)
}

// CanTransition is seed 003's session state table: the forward path
// initialized → planning → reviewing → executing → claiming → auditing →
// completed, and from any state that is not already failed or aborted to
// failed (integrity violation) or aborted (operator abort).
func CanTransition(from, to State) bool {
	switch to {
	case Failed, Aborted:
		return from != Failed && from != Aborted && validState(from)
	}
	next := map[State]State{
		Initialized: Planning, Planning: Reviewing, Reviewing: Executing,
		Executing: Claiming, Claiming: Auditing, Auditing: Completed,
	}
	n, ok := next[from]
	return ok && n == to
}

func validState(s State) bool {
	switch s {
	case Initialized, Planning, Reviewing, Executing, Claiming, Auditing, Completed, Failed, Aborted:
		return true
	}
	return false
}

func (l *Ledger) moveTo(s State) {
	if CanTransition(l.State, s) {
		l.State = s
	}
}

func (l *Ledger) apply(seq int64, e *history.ProtocolEvent) {
	body, _ := plainBody(e.Body)
	idx := len(l.Events)
	l.Events = append(l.Events, e)
	l.Seqs = append(l.Seqs, seq)
	l.Head = e.Hash
	switch e.Type {
	case SessionInitialized:
		if roles, ok := body["roles"].(map[string]any); ok && len(l.Events) == 1 {
			for r, k := range roles {
				if s, ok := k.(string); ok {
					l.PublicKeys[r] = s
				}
			}
		}
		l.moveTo(Planning)
	case ProposalCreated:
		if l.Proposals[e.Subject] == nil {
			l.Proposals[e.Subject] = &Proposal{
				ID: e.Subject, Objective: str(body, "objective"), Assumptions: strs(body, "assumptions"),
				RequiredTools: strs(body, "required_tools"), ExpectedEvidence: strs(body, "expected_evidence"),
				Status: StatusProposed, Revises: str(body, "revises"), Seq: seq,
			}
		}
		l.moveTo(Reviewing)
	case ProposalReviewed:
		p := l.Proposals[e.Subject]
		if p == nil || p.Status != StatusProposed {
			return
		}
		switch d := str(body, "decision"); d {
		case StatusApproved, StatusConditional, StatusRejected:
			p.Status, p.Conditions, p.Reason = d, str(body, "conditions"), str(body, "reason")
			if d != StatusRejected {
				l.moveTo(Executing)
			}
		}
	case ToolIntentSigned:
		if l.Intents[e.Subject] != nil {
			return
		}
		in := &IntentRecord{
			ID: e.Subject, ProposalID: str(body, "proposal_id"), Tool: str(body, "tool"),
			InputHash: str(body, "input_hash"), InputArtifact: str(body, "input_artifact"),
			RiskClass: str(body, "risk_class"), Justification: str(body, "justification"),
			Status: StatusSigned, Seq: seq,
		}
		in.Input = l.loadInput(in.InputArtifact)
		l.Intents[e.Subject] = in
	case ToolIntentReviewed:
		in := l.Intents[e.Subject]
		if in == nil || in.Status != StatusSigned {
			return
		}
		switch d := str(body, "decision"); d {
		case StatusApproved, StatusBlocked:
			in.Status, in.Review = d, str(body, "reason")
			if d == StatusBlocked {
				l.blocked++
			}
		}
	case ToolExecutionStarted:
		in := l.Intents[e.Subject]
		if in == nil || (in.Status != StatusSigned && in.Status != StatusApproved) {
			return
		}
		in.Status = StatusStarted
		l.inFlight++
	case ToolExecutionCompleted, ToolExecutionFailed:
		in := l.Intents[e.Subject]
		if in == nil || in.Status != StatusStarted {
			return
		}
		l.inFlight--
		code, _ := num(body, "exit_code")
		dur, _ := num(body, "duration_ms")
		res := &ToolResult{
			InputArtifact: str(body, "input_artifact"), OutputArtifact: str(body, "output_artifact"),
			ExitCode: int(code), DurationMS: int64(dur), Error: str(body, "error"),
			OK: e.Type == ToolExecutionCompleted,
		}
		in.Result = res
		if res.OK {
			in.Status = StatusCompleted
		} else {
			in.Status = StatusFailed
			l.failedRuns++
		}
		// Evidence is what a completed run produced: its output. A failed
		// or interrupted run's artifacts (its input above all) prove
		// nothing about the work.
		if a := res.OutputArtifact; res.OK && a != "" {
			if _, seen := l.produced[a]; !seen {
				l.produced[a] = idx
			}
		}
	case ClaimIssued:
		if l.Claims[e.Subject] != nil {
			return
		}
		conf, _ := num(body, "confidence")
		c := &Claim{
			ID: e.Subject, Text: str(body, "text"), Confidence: conf, Evidence: strs(body, "evidence"),
			Status: StatusIssued, Revises: str(body, "revises"), Seq: seq,
		}
		l.Claims[e.Subject] = c
		if old := l.Claims[c.Revises]; old != nil && old != c {
			old.Status, old.SupersededBy = StatusSuperseded, c.ID
		}
		l.noteEvidence(seq, idx, e, c)
		l.moveTo(Claiming)
	case ClaimChallenged:
		if c := l.Claims[e.Subject]; c != nil && c.Status == StatusIssued {
			c.Status, c.Challenged, c.Challenge = StatusChallenged, true, str(body, "reason")
		}
	case FinalStatementSigned:
		if l.Final == nil {
			l.Final = &FinalStatement{Summary: str(body, "summary"), ClaimIDs: strs(body, "claim_ids"), Hash: e.Hash, Seq: seq}
		}
	case VerificationStarted:
		if l.Verification == nil {
			l.Verification = &Verification{Started: true, Seq: seq}
			l.moveTo(Auditing)
		}
	case VerificationCompleted:
		v := l.Verification
		if v == nil || v.Completed {
			return
		}
		v.Completed, v.Status, v.ReportArtifact, v.Seq = true, str(body, "status"), str(body, "report_artifact"), seq
		if v.Status == VerdictPass || v.Status == VerdictPassWarnings {
			l.moveTo(Completed)
		}
	case SessionFailed:
		l.moveTo(Failed)
	case SessionAborted:
		l.moveTo(Aborted)
	}
}

// noteEvidence records, as pending failures, claim evidence that no earlier
// tool execution produced or (with a store) that is not stored intact: the
// claim stands and the session continues to auditing, which will fail.
func (l *Ledger) noteEvidence(seq int64, idx int, e *history.ProtocolEvent, c *Claim) {
	for _, a := range c.Evidence {
		if _, ok := l.produced[a]; !ok {
			l.unproduced = append(l.unproduced, evidenceRef{seq: seq, index: idx, claim: c.ID, artifact: a})
			l.Pending = append(l.Pending, Failure{Class: FailMissingArtifact, Seq: seq, EventType: e.Type, Subject: c.ID,
				Detail: fmt.Sprintf("evidence %s was not produced by a tool execution before the claim", a)})
			continue
		}
		if l.Store != nil {
			if err := l.Store.Verify(a); err != nil {
				l.Pending = append(l.Pending, Failure{Class: artifactClass(err), Seq: seq, EventType: e.Type, Subject: c.ID, Detail: err.Error()})
			}
		}
	}
}

func (l *Ledger) loadInput(id string) map[string]any {
	if l.Store == nil || id == "" {
		return nil
	}
	b, err := l.Store.Get(id)
	if err != nil {
		return nil
	}
	var doc map[string]any
	if json.Unmarshal(b, &doc) != nil {
		return nil
	}
	in, _ := doc["input"].(map[string]any)
	return in
}

// Check runs the guards an event must pass to be appended after the
// ledger's events: role, chain (link, hash, signature), schema, then the
// ordering, action, evidence and finalization rules. It returns the first
// failure as a *GuardError, nil if the event may be appended.
func (l *Ledger) Check(e *history.ProtocolEvent, p Policy) error {
	if errs := l.guards(e, p, false); len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// guards returns the guards e fails; with all, one per kind of guard (the
// verifier reports every kind), otherwise only the first.
func (l *Ledger) guards(e *history.ProtocolEvent, p Policy, all bool) []*GuardError {
	if e == nil {
		return []*GuardError{guardf(GuardSchema, FailSchemaInvalid, "no event")}
	}
	p = p.WithDefaults()
	var out []*GuardError
	add := func(g *GuardError) bool {
		if g != nil {
			out = append(out, g)
		}
		return g != nil && !all
	}
	if _, known := Emitters[e.Type]; !known {
		return []*GuardError{guardf(GuardSchema, FailSchemaInvalid, "unknown event type %q", e.Type)}
	}
	if add(l.roleGuard(e)) {
		return out
	}
	if len(l.Events) == 0 && e.Type != SessionInitialized {
		// Without the session there are no keys to check anything against.
		add(guardf(GuardOrdering, FailOrdering, "the first event must be session_initialized, not %s", e.Type))
		return out
	}
	if e.PrevEvent != l.Head {
		if add(guardf(GuardChain, FailChainBreak, "%s links to %.16s…, the head is %.16s…", e.Type, e.PrevEvent, l.Head)) {
			return out
		}
	}
	keys := l.PublicKeys
	if e.Type == SessionInitialized && len(l.Events) == 0 {
		keys = nil // unsigned; its keys are the ones it introduces
	}
	if add(verifyEvent(e, keys)) {
		return out
	}
	body, err := plainBody(e.Body)
	if err != nil {
		add(guardf(GuardSchema, FailSchemaInvalid, "%s body: %v", e.Type, err))
		return out
	}
	if add(schemaGuard(e, body)) {
		return out
	}
	add(l.rules(e, body, p))
	return out
}

func (l *Ledger) roleGuard(e *history.ProtocolEvent) *GuardError {
	if want := Emitters[e.Type]; e.Role != want {
		return guardf(GuardRole, FailRolePolicy, "%s may only be emitted by %s, not %q", e.Type, want, e.Role)
	}
	return nil
}

func schemaGuard(e *history.ProtocolEvent, body map[string]any) *GuardError {
	var b any = body
	if body == nil {
		b = nil
	}
	doc := map[string]any{"type": e.Type, "subject": e.Subject, "body": b}
	if err := schemas.Validate(EventSchema, doc); err != nil {
		msg := err.Error()
		if se, ok := err.(*schemas.Error); ok {
			parts := make([]string, len(se.Violations))
			for i, v := range se.Violations {
				parts[i] = v.String()
			}
			msg = strings.Join(parts, "; ")
		}
		return guardf(GuardSchema, FailSchemaInvalid, "%s: %s", e.Type, msg)
	}
	return nil
}

// afterFinal are the only events that may follow final_statement_signed:
// it is the last role event before the verification completes.
var afterFinal = map[string]bool{VerificationStarted: true, VerificationCompleted: true, SessionFailed: true, SessionAborted: true}

// rules are the ordering, action, evidence and finalization guards, on a
// body that passed the schema.
func (l *Ledger) rules(e *history.ProtocolEvent, body map[string]any, p Policy) *GuardError {
	ord := func(format string, args ...any) *GuardError {
		return guardf(GuardOrdering, FailOrdering, format, args...)
	}
	fin := func(format string, args ...any) *GuardError {
		return guardf(GuardFinalization, FailFinalization, format, args...)
	}
	if e.Type == SessionInitialized {
		if len(l.Events) > 0 {
			return ord("session_initialized must be the first event")
		}
		return nil
	}
	if len(l.Events) == 0 {
		return ord("the first event must be session_initialized, not %s", e.Type)
	}
	if l.State == Failed || l.State == Aborted {
		return ord("the session is %s: no event may follow", l.State)
	}
	if v := l.Verification; v != nil && v.Completed && e.Type != SessionFailed && e.Type != SessionAborted {
		return ord("only session_failed or session_aborted may follow verification_run_completed, not %s", e.Type)
	}
	if l.Final != nil && !afterFinal[e.Type] {
		return fin("final_statement_signed must be the last role event before verification completion; %s follows it", e.Type)
	}
	id := e.Subject
	switch e.Type {
	case ProposalCreated:
		if l.Proposals[id] != nil {
			return ord("proposal %q exists; a revision is a new proposal that names it in revises", id)
		}
		rev := str(body, "revises")
		if rev != "" && l.Proposals[rev] == nil {
			return ord("proposal %q revises unknown proposal %q", id, rev)
		}
		switch l.State {
		case Planning, Reviewing:
		case Executing:
			// Execution has begun: only a revision of a rejected proposal,
			// or a fallback after a failed or blocked run if the policy
			// permits (seed 003 failure semantics).
			if rev != "" && l.Proposals[rev].Status == StatusRejected {
				break
			}
			if p.AllowFallback && (l.failedRuns > 0 || l.blocked > 0) {
				break
			}
			return ord("no new proposal during execution unless it revises a rejected proposal, or follows a failed or blocked tool run with allow_fallback")
		default:
			return ord("proposal_created in state %s", l.State)
		}
	case ProposalReviewed:
		pr := l.Proposals[id]
		if pr == nil {
			return ord("proposal_reviewed for unknown proposal %q", id)
		}
		if l.State != Reviewing && l.State != Executing {
			return ord("proposal_reviewed in state %s", l.State)
		}
		if pr.Status != StatusProposed {
			return ord("proposal %q is already %s", id, pr.Status)
		}
	case ToolIntentSigned:
		if l.State != Executing {
			return ord("tool_intent_signed in state %s (needs an approved proposal)", l.State)
		}
		if l.Intents[id] != nil {
			return ord("intent %q exists; a retry is a new intent", id)
		}
		pid := str(body, "proposal_id")
		pr := l.Proposals[pid]
		if pr == nil {
			return ord("intent %q is for unknown proposal %q", id, pid)
		}
		switch pr.Status {
		case StatusApproved, StatusConditional:
		case StatusRejected:
			return guardf(GuardAction, FailRolePolicy, "intent %q is for rejected proposal %q: rejected proposals never execute", id, pid)
		default:
			return ord("intent %q is for proposal %q, which the Critic has not approved", id, pid)
		}
		tool := str(body, "tool")
		if !slices.Contains(pr.RequiredTools, tool) {
			return guardf(GuardAction, FailRolePolicy, "intent %q uses tool %q, which proposal %q does not name (required_tools %v)", id, tool, pid, pr.RequiredTools)
		}
		art := str(body, "input_artifact")
		if art != "sha256:"+str(body, "input_hash") {
			return guardf(GuardEvidence, FailHashMismatch, "intent %q: input artifact %s is not the normalized input hash", id, art)
		}
		if g := l.storeGuard(art); g != nil {
			return g
		}
		if l.Store != nil {
			// Logist's own class of the run; the signed class may only
			// be higher (with no store, the verifier cannot read the
			// input and checks the rest).
			if c, r := Classify(tool, l.loadInput(art)), str(body, "risk_class"); riskBelow(r, c) {
				return guardf(GuardAction, FailRolePolicy, "intent %q is declared %s risk; Logist classifies a %s run of this input as %s", id, r, tool, c)
			}
		}
	case ToolIntentReviewed:
		in := l.Intents[id]
		if in == nil {
			return ord("tool_intent_reviewed for unknown intent %q", id)
		}
		if l.State != Executing || in.Status != StatusSigned {
			return ord("intent %q is %s (state %s): only a signed intent is reviewed", id, in.Status, l.State)
		}
	case ToolExecutionStarted:
		in := l.Intents[id]
		if in == nil {
			return ord("tool_intent_signed must precede any tool execution event; no intent %q", id)
		}
		if l.State != Executing {
			return ord("tool_execution_started in state %s", l.State)
		}
		switch in.Status {
		case StatusBlocked:
			return guardf(GuardAction, FailRolePolicy, "intent %q was blocked by the Critic: it never runs (a revision is a new intent)", id)
		case StatusSigned, StatusApproved:
		default:
			return ord("intent %q is already %s; a retry is a new intent", id, in.Status)
		}
		if pr := l.Proposals[in.ProposalID]; pr == nil || (pr.Status != StatusApproved && pr.Status != StatusConditional) {
			return guardf(GuardAction, FailRolePolicy, "intent %q: its proposal is not approved", id)
		}
		if p.needsApproval(in.RiskClass) && in.Status != StatusApproved {
			return guardf(GuardAction, FailRolePolicy, "intent %q is %s risk: it needs the Critic's approval (tool_intent_reviewed) before it runs", id, in.RiskClass)
		}
		if a := str(body, "input_artifact"); a != in.InputArtifact {
			return guardf(GuardEvidence, FailHashMismatch, "intent %q runs input %s, the signed intent names %s", id, a, in.InputArtifact)
		}
	case ToolExecutionCompleted, ToolExecutionFailed:
		in := l.Intents[id]
		if in == nil || in.Status != StatusStarted {
			return ord("%s for intent %q, which has not started", e.Type, id)
		}
		if a := str(body, "input_artifact"); a != in.InputArtifact {
			return guardf(GuardEvidence, FailHashMismatch, "intent %q reports input %s, the signed intent names %s", id, a, in.InputArtifact)
		}
		for _, a := range []string{str(body, "input_artifact"), str(body, "output_artifact")} {
			if a == "" {
				continue
			}
			if g := l.storeGuard(a); g != nil {
				return g
			}
		}
	case ClaimIssued:
		if l.State != Executing && l.State != Claiming {
			return ord("claim_issued in state %s", l.State)
		}
		if l.inFlight > 0 {
			return ord("claim_issued while a tool execution is running")
		}
		if l.Claims[id] != nil {
			return ord("claim %q exists; a revision is a new claim that names it in revises", id)
		}
		if rev := str(body, "revises"); rev != "" {
			old := l.Claims[rev]
			if old == nil {
				return ord("claim %q revises unknown claim %q", id, rev)
			}
			if old.Status == StatusSuperseded {
				return ord("claim %q revises %q, already superseded by %q", id, rev, old.SupersededBy)
			}
		}
		if n := len(strs(body, "evidence")); n < p.MinEvidence {
			return guardf(GuardEvidence, FailMissingArtifact, "claim %q has %d evidence reference(s), the policy requires %d", id, n, p.MinEvidence)
		}
	case ClaimChallenged:
		c := l.Claims[id]
		if c == nil {
			return ord("claim_challenged for unknown claim %q", id)
		}
		if l.State != Claiming || c.Status != StatusIssued {
			return ord("claim %q is %s: only an issued claim can be challenged", id, c.Status)
		}
	case FinalStatementSigned:
		if len(l.Claims) == 0 {
			return fin("no claim has been issued")
		}
		if l.State != Claiming {
			return ord("final_statement_signed in state %s", l.State)
		}
		if l.inFlight > 0 {
			return fin("a tool execution is still running")
		}
		for _, cid := range l.claimIDs() {
			if c := l.Claims[cid]; c.Status == StatusChallenged {
				return fin("claim %q is challenged and has not been revised", cid)
			}
		}
		for _, cid := range strs(body, "claim_ids") {
			c := l.Claims[cid]
			if c == nil {
				return fin("the final bundle names unknown claim %q", cid)
			}
			if c.Status != StatusIssued {
				return fin("the final bundle names claim %q, which is %s", cid, c.Status)
			}
		}
		if g := l.checksGuard(body, p); g != nil {
			return g
		}
	case VerificationStarted:
		if l.Final == nil {
			return fin("verification_run_started before final_statement_signed")
		}
		if l.Verification != nil {
			return ord("verification_run_started twice")
		}
		if l.State != Claiming {
			return ord("verification_run_started in state %s", l.State)
		}
	case VerificationCompleted:
		if l.Verification == nil || l.State != Auditing {
			return ord("verification_run_completed before verification_run_started")
		}
		if l.Final == nil {
			// Only in a damaged trace: the guards never let verification
			// start without a final statement.
			return fin("verification_run_completed without final_statement_signed")
		}
		if fe := str(body, "final_event"); fe != l.Final.Hash {
			return fin("verification_run_completed names final event %.16s…, the final statement is %.16s…", fe, l.Final.Hash)
		}
		if g := l.storeGuard(str(body, "report_artifact")); g != nil {
			return g
		}
	}
	return nil
}

// checksGuard is the finalization guard's rule on the job's required
// checks (seed 003: the final statement is blocked until they pass): the
// statement names every check of the policy as passed, with its output as
// an artifact; with a store, the artifact is there, intact, and records a
// run that exited 0.
func (l *Ledger) checksGuard(body map[string]any, p Policy) *GuardError {
	fin := func(format string, args ...any) *GuardError {
		return guardf(GuardFinalization, FailFinalization, format, args...)
	}
	ran := map[string]map[string]any{}
	list, _ := body["checks"].([]any)
	for _, x := range list {
		if c, ok := x.(map[string]any); ok {
			ran[str(c, "name")] = c
		}
	}
	for _, c := range p.Checks {
		r := ran[c.Name]
		if r == nil {
			return fin("required check %q has not run before the final statement", c.Name)
		}
		if ok, _ := r["passed"].(bool); !ok {
			return fin("required check %q did not pass", c.Name)
		}
		id := str(r, "artifact")
		if l.Store == nil {
			continue
		}
		if g := l.storeGuard(id); g != nil {
			return g
		}
		b, err := l.Store.Get(id)
		var out map[string]any
		if err == nil {
			err = json.Unmarshal(b, &out)
		}
		if code, _ := out["exit_code"].(float64); err != nil || code != 0 || out["error"] != nil || str(out, "name") != c.Name {
			return fin("required check %q: its output %s does not record a passing run", c.Name, id)
		}
	}
	return nil
}

// storeGuard: an artifact an event names is stored and intact before the
// event is committed (only with a store).
func (l *Ledger) storeGuard(id string) *GuardError {
	if l.Store == nil {
		return nil
	}
	if err := l.Store.Verify(id); err != nil {
		return guardf(GuardEvidence, artifactClass(err), "%v", err)
	}
	return nil
}

func (l *Ledger) claimIDs() []string {
	ids := make([]string, 0, len(l.Claims))
	for id := range l.Claims {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
