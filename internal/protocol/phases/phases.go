// Package phases plays the protocol workflow (seed 003) on Logist's
// engine: for each phase of workflow "protocol" it turns the role's answer
// into signed, guarded events (internal/protocol), runs the tools the
// Executor asked for, and verifies the trace. The engine calls Prepare
// before a phase is played and Finish on its valid answer; the protocol's
// state is always replayed from the job's history, the source of truth, so
// a restart resumes at the next valid transition only.
package phases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/protocol"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/workflow"
)

// Outcomes the protocol phases report beyond the three actions (the
// workflow's "on" maps say where each leads).
const (
	OutViolation  = "VIOLATION"  // a guard refused what the agent said: the same phase again, with the reason
	OutRejected   = "REJECTED"   // the Critic rejected every proposal: back to the Planner
	OutReview     = "REVIEW"     // some intents need the Critic's approval
	OutRun        = "RUN"        // the intents may run
	OutClaim      = "CLAIM"      // no more tools: claims are due
	OutBlocked    = "BLOCKED"    // the Critic blocked the intents / finalization is blocked: revise
	OutFallback   = "FALLBACK"   // a tool failed and the policy lets the Planner propose a fallback
	OutChallenged = "CHALLENGED" // the Critic challenged claims: the Executor revises
)

// Failure codes of a protocol session that cannot go on.
const (
	CodeProtocolFailed     = "PROTOCOL_FAILED"
	CodeVerificationFailed = "VERIFICATION_FAILED"
	CodePolicy             = "PROTOCOL_POLICY"
)

// Effect names, as the workflow data gives them.
const (
	EffPlan           = "protocol.plan"
	EffReviewProposal = "protocol.review_proposals"
	EffIntend         = "protocol.intend"
	EffReviewIntents  = "protocol.review_intents"
	EffRunTools       = "protocol.run_tools"
	EffClaim          = "protocol.claim"
	EffChallenge      = "protocol.challenge"
	EffFinalize       = "protocol.finalize"
	EffVerify         = "protocol.verify"
	EffAudit          = "protocol.audit"
)

// Phase is one protocol effect; it has the engine's Effect methods and
// the steward's halt hook (effect.Halter).
type Phase struct {
	name    string
	prepare func(s *session) (*workflow.Prep, error)
	finish  func(s *session, ans *response.Answer, obj map[string]any) (*workflow.Outcome, error)
}

// Effects are the protocol's phase effects by name.
func Effects() map[string]*Phase {
	ps := []*Phase{
		{EffPlan, preparePlan, finishPlan},
		{EffReviewProposal, prepareReviewProposals, finishReviewProposals},
		{EffIntend, prepareIntend, finishIntend},
		{EffReviewIntents, prepareReviewIntents, finishReviewIntents},
		{EffRunTools, prepareRunTools, finishRunTools},
		{EffClaim, prepareClaim, finishClaim},
		{EffChallenge, prepareChallenge, finishChallenge},
		{EffFinalize, prepareFinalize, finishFinalize},
		{EffVerify, prepareVerify, finishVerify},
		{EffAudit, prepareAudit, finishAudit},
	}
	out := map[string]*Phase{}
	for _, p := range ps {
		out[p.name] = p
	}
	return out
}

// Prepare opens the session (creating it on the first phase), stops a
// session whose trace fails its integrity check, and prepares the phase.
func (p *Phase) Prepare(tx *jobtx.Tx, phase string) (*workflow.Prep, error) {
	s, fail, err := open(tx, phase)
	if err != nil {
		return nil, err
	}
	if fail != nil {
		return &workflow.Prep{Fail: fail, Records: s.out, State: string(s.led.State)}, nil
	}
	prep := &workflow.Prep{}
	if p.prepare != nil {
		if prep, err = p.prepare(s); err != nil {
			return nil, err
		}
	}
	prep.Records = append(s.out, prep.Records...)
	prep.State = string(s.led.State)
	return prep, nil
}

// Finish turns a valid answer into events, all or none: if a guard refuses
// one, none is recorded and the phase is asked again with the reason.
func (p *Phase) Finish(tx *jobtx.Tx, phase string, ans *response.Answer, obj map[string]any) (*workflow.Outcome, error) {
	s, fail, err := open(tx, phase)
	if err != nil {
		return nil, err
	}
	if fail != nil {
		return &workflow.Outcome{Fail: fail, Records: s.out, State: string(s.led.State)}, nil
	}
	if ans.Action != workflow.ActionCompleted {
		// RETRY and STUCK say nothing the protocol records.
		return &workflow.Outcome{Name: ans.Action}, nil
	}
	oc, err := p.finish(s, ans, obj)
	if err != nil {
		var ge *protocol.GuardError
		if errors.As(err, &ge) && integrity(ge.Class) {
			// A signature that is not the role's (or a broken chain) is an
			// integrity violation: the session fails and stops (seed 003).
			s, _, oerr := open(tx, phase)
			if oerr != nil {
				return nil, oerr
			}
			reason := "integrity violation: " + ge.Error()
			if r, err := s.event(protocol.SessionFailed, protocol.System, "", map[string]any{"reason": reason, "class": ge.Class}); err == nil {
				s.out = append(s.out, r)
			}
			return &workflow.Outcome{Records: s.out, State: string(s.led.State), Fail: &workflow.Failure{Code: CodeProtocolFailed, Reason: reason}}, nil
		}
		if errors.As(err, &ge) {
			return &workflow.Outcome{Name: OutViolation, Retry: true, Feedback: "Nothing you answered was recorded: " + ge.Error(), State: string(s.initial)}, nil
		}
		return nil, err
	}
	oc.Records = append(s.out, oc.Records...)
	if oc.State == "" {
		oc.State = string(s.led.State)
	}
	return oc, nil
}

// integrity says whether a guard's failure class means the trace itself
// cannot be trusted (rather than an agent saying something out of order).
func integrity(class string) bool {
	return class == protocol.FailSignatureInvalid || class == protocol.FailChainBreak || class == protocol.FailHashMismatch
}

// session is the protocol state of one job for one engine step.
type session struct {
	tx      *jobtx.Tx
	phase   string
	pol     protocol.Policy
	store   protocol.Store
	keys    *protocol.Keys
	led     *protocol.Ledger
	recs    []history.Record
	initial protocol.State
	// out are the events made in this step, in order.
	out []*history.Record
}

// open replays the job's protocol state. A trace whose last event does not
// verify (a signature that is not the role's, a broken link) stops the
// session: seed 003 marks it failed and stops progression.
func open(tx *jobtx.Tx, phase string) (*session, *workflow.Failure, error) {
	pol, err := Policy(tx.M)
	if err != nil {
		return nil, nil, err
	}
	recs, err := history.ReadAll(tx.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("protocol: read history: %w", err)
	}
	store := protocol.NewStore(tx.Dir)
	led, err := protocol.Replay(recs, &store)
	if err != nil {
		return nil, nil, fmt.Errorf("protocol: replay: %w", err)
	}
	keys, err := protocol.LoadOrCreateKeys(tx.Dir, protocol.Roles)
	if err != nil {
		return nil, nil, err
	}
	s := &session{tx: tx, phase: phase, pol: pol, store: store, keys: keys, led: led, recs: recs, initial: led.State}
	switch led.State {
	case protocol.Failed:
		return s, &workflow.Failure{Code: CodeProtocolFailed, Reason: "the protocol session has failed; it cannot go on (roll back or start a new job)"}, nil
	case protocol.Aborted:
		return s, &workflow.Failure{Code: CodeProtocolFailed, Reason: "the protocol session was aborted by an operator"}, nil
	}
	if err := led.ValidateLast(); err != nil {
		reason := "integrity violation: " + err.Error()
		class := protocol.FailSignatureInvalid
		var ge *protocol.GuardError
		if errors.As(err, &ge) {
			class = ge.Class
		}
		if r, err := s.event(protocol.SessionFailed, protocol.System, "", map[string]any{"reason": reason, "class": class}); err == nil {
			s.out = append(s.out, r)
		}
		return s, &workflow.Failure{Code: CodeProtocolFailed, Reason: reason}, nil
	}
	if led.State == protocol.Initialized && len(led.Events) == 0 {
		body := protocol.SessionBody(keys, tx.M.TaskDescription, pol)
		r, err := s.event(protocol.SessionInitialized, protocol.System, "", body)
		if err != nil {
			return nil, nil, fmt.Errorf("protocol: initialise session: %w", err)
		}
		s.out = append(s.out, r)
	}
	return s, nil, nil
}

// Policy is the job's protocol policy with defaults.
func Policy(m *manifest.Manifest) (protocol.Policy, error) { return protocol.DecodePolicy(m.Protocol) }

// event makes, checks and applies one event; it returns its record.
func (s *session) event(typ, role, subject string, body map[string]any) (*history.Record, error) {
	body = redact(body, s.tx.Redact).(map[string]any)
	e, err := protocol.NewEvent(typ, role, subject, body, s.led.Head, s.keys)
	if err != nil {
		return nil, err
	}
	if err := s.led.Check(e, s.pol); err != nil {
		return nil, err
	}
	s.led.Apply(e)
	return &history.Record{Type: history.TypeEvent, Phase: s.phase, Role: role, Event: e}, nil
}

// emit is event for a list being built.
func (s *session) emit(recs *[]*history.Record, typ, role, subject string, body map[string]any) error {
	r, err := s.event(typ, role, subject, body)
	if err != nil {
		return err
	}
	*recs = append(*recs, r)
	return nil
}

// redact applies the job's secret redaction to every string of a body
// before it is hashed and signed (the history layer cannot rewrite event
// bodies afterwards without breaking their signatures).
func redact(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, m := range x {
			out[k] = redact(m, f)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, m := range x {
			out[i] = redact(m, f)
		}
		return out
	case []string:
		out := make([]any, len(x))
		for i, m := range x {
			out[i] = f(m)
		}
		return out
	}
	return v
}

// items is obj[key] as a list of objects (the schema already checked it).
func items(obj map[string]any, key string) []map[string]any {
	raw, _ := obj[key].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, r := range raw {
		if m, ok := r.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// pick copies the named members that are present.
func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// excerpt is the start of an artifact, for an agent's context.
func (s *session) excerpt(id string, n int) string {
	b, err := s.store.Get(id)
	if err != nil {
		return "(artifact " + id + " is missing)"
	}
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// jsonLine renders v compactly for a context line.
func jsonLine(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// ---- planning ---------------------------------------------------------

func preparePlan(s *session) (*workflow.Prep, error) {
	var b strings.Builder
	if len(s.led.Proposals) > 0 {
		b.WriteString("## Proposals so far\n")
		for _, id := range sortedKeys(s.led.Proposals) {
			p := s.led.Proposals[id]
			fmt.Fprintf(&b, "- %s (%s): %s", id, p.Status, p.Objective)
			if p.Reason != "" {
				fmt.Fprintf(&b, " — Critic: %s", p.Reason)
			}
			b.WriteString("\n")
		}
		b.WriteString("A revised proposal needs a new id and \"revises\": the id it replaces.\n")
	}
	if failed := s.failedRuns(); failed != "" {
		b.WriteString("\n## Failed tool runs (propose a fallback)\n" + failed)
	}
	return &workflow.Prep{Context: b.String()}, nil
}

func finishPlan(s *session, _ *response.Answer, obj map[string]any) (*workflow.Outcome, error) {
	var recs []*history.Record
	for _, p := range items(obj, "proposals") {
		body := pick(p, "objective", "assumptions", "required_tools", "expected_evidence", "revises")
		if err := s.emit(&recs, protocol.ProposalCreated, protocol.Planner, str(p, "id"), body); err != nil {
			return nil, err
		}
	}
	return &workflow.Outcome{Name: workflow.ActionCompleted, Records: recs}, nil
}

// ---- reviewing proposals ------------------------------------------------

func (s *session) pendingProposals() []*protocol.Proposal {
	var out []*protocol.Proposal
	for _, id := range sortedKeys(s.led.Proposals) {
		if p := s.led.Proposals[id]; p.Status == protocol.StatusProposed {
			out = append(out, p)
		}
	}
	return out
}

func prepareReviewProposals(s *session) (*workflow.Prep, error) {
	pending := s.pendingProposals()
	if len(pending) == 0 {
		return &workflow.Prep{Skip: workflow.ActionCompleted}, nil
	}
	var b strings.Builder
	b.WriteString("## Proposals to review (review every one)\n")
	for _, p := range pending {
		fmt.Fprintf(&b, "- %s: %s\n  assumptions: %s\n  required tools: %s\n  expected evidence: %s\n", p.ID, p.Objective,
			jsonLine(p.Assumptions), jsonLine(p.RequiredTools), jsonLine(p.ExpectedEvidence))
	}
	fmt.Fprintf(&b, "\nTools that need your approval before they run: risk classes %s.\n", jsonLine(s.pol.ApprovalRisk))
	return &workflow.Prep{Context: b.String()}, nil
}

func finishReviewProposals(s *session, _ *response.Answer, obj map[string]any) (*workflow.Outcome, error) {
	pending := map[string]bool{}
	for _, p := range s.pendingProposals() {
		pending[p.ID] = true
	}
	var recs []*history.Record
	var reasons []string
	for _, r := range items(obj, "reviews") {
		id := str(r, "proposal_id")
		delete(pending, id)
		if err := s.emit(&recs, protocol.ProposalReviewed, protocol.Critic, id, pick(r, "decision", "conditions", "reason")); err != nil {
			return nil, err
		}
		if str(r, "decision") == protocol.StatusRejected {
			reasons = append(reasons, id+": "+str(r, "reason"))
		}
	}
	if len(pending) > 0 {
		return nil, &protocol.GuardError{Class: protocol.FailOrdering, Guard: protocol.GuardOrdering, Msg: "review every proposal; not reviewed: " + strings.Join(sortedKeys(pending), ", ")}
	}
	for _, p := range s.led.Proposals {
		if p.Status == protocol.StatusApproved || p.Status == protocol.StatusConditional {
			return &workflow.Outcome{Name: workflow.ActionCompleted, Records: recs}, nil
		}
	}
	// Rejected proposals never execute: the Planner revises.
	return &workflow.Outcome{Name: OutRejected, Retry: true, Records: recs,
		Feedback: "The Critic rejected every proposal. " + strings.Join(reasons, "; ")}, nil
}

// ---- executing: intents -----------------------------------------------

// rounds is how many tool rounds Logist has run in this session.
func (s *session) rounds() int {
	n := 0
	for i := range s.recs {
		r := &s.recs[i]
		if r.Type == history.TypeResponse && r.Role == workflow.RoleLogist && r.Response != nil && strings.Contains(r.Response.RawResponse, `"tool_results"`) {
			n++
		}
	}
	return n
}

func (s *session) toolRuns() string {
	var b strings.Builder
	for _, id := range sortedIntentIDs(s.led) {
		in := s.led.Intents[id]
		fmt.Fprintf(&b, "- %s (%s, risk %s, proposal %s): %s", id, in.Tool, in.RiskClass, in.ProposalID, in.Status)
		if in.Review != "" {
			fmt.Fprintf(&b, " — Critic: %s", in.Review)
		}
		if r := in.Result; r != nil {
			fmt.Fprintf(&b, "\n  exit %d, input %s, output %s", r.ExitCode, r.InputArtifact, r.OutputArtifact)
			if r.Error != "" {
				fmt.Fprintf(&b, ", error: %s", r.Error)
			}
			if r.OutputArtifact != "" {
				fmt.Fprintf(&b, "\n  output: %s", strings.ReplaceAll(s.excerpt(r.OutputArtifact, 1500), "\n", "\n  "))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func sortedIntentIDs(l *protocol.Ledger) []string {
	ids := sortedKeys(l.Intents)
	sort.SliceStable(ids, func(i, j int) bool { return l.Intents[ids[i]].Seq < l.Intents[ids[j]].Seq })
	return ids
}

func (s *session) failedRuns() string {
	var b strings.Builder
	for _, id := range sortedIntentIDs(s.led) {
		if in := s.led.Intents[id]; in.Status == protocol.StatusFailed && in.Result != nil {
			fmt.Fprintf(&b, "- %s (%s): %s\n", id, in.Tool, in.Result.Error)
		}
	}
	return b.String()
}

func prepareIntend(s *session) (*workflow.Prep, error) {
	var b strings.Builder
	b.WriteString("## Approved proposals\n")
	for _, id := range sortedKeys(s.led.Proposals) {
		p := s.led.Proposals[id]
		if p.Status != protocol.StatusApproved && p.Status != protocol.StatusConditional {
			continue
		}
		fmt.Fprintf(&b, "- %s: %s", id, p.Objective)
		if p.Conditions != "" {
			fmt.Fprintf(&b, " (conditions: %s)", p.Conditions)
		}
		b.WriteString("\n")
	}
	if runs := s.toolRuns(); runs != "" {
		b.WriteString("\n## Tool intents so far\n" + runs)
	}
	fmt.Fprintf(&b, "\nTools: %s. Tool rounds used: %d of %d. Intents of risk %s wait for the Critic's approval. Answer with no tool_intents when you are ready to make claims.\n",
		jsonLine(s.pol.Tools), s.rounds(), s.pol.MaxRounds, jsonLine(s.pol.ApprovalRisk))
	return &workflow.Prep{Context: b.String()}, nil
}

func (s *session) needsApproval(risk string) bool {
	for _, r := range s.pol.ApprovalRisk {
		if r == risk {
			return true
		}
	}
	return false
}

func finishIntend(s *session, _ *response.Answer, obj map[string]any) (*workflow.Outcome, error) {
	intents := items(obj, "tool_intents")
	if len(intents) == 0 {
		return &workflow.Outcome{Name: OutClaim}, nil
	}
	if s.rounds() >= s.pol.MaxRounds {
		return &workflow.Outcome{Name: OutClaim, Feedback: fmt.Sprintf("The tool round limit (%d) is reached; the intents of the last answer were not recorded. Make your claims from the results so far.", s.pol.MaxRounds)}, nil
	}
	var recs []*history.Record
	review := false
	for _, it := range intents {
		input, _ := it["input"].(map[string]any)
		in := protocol.Intent{ID: str(it, "id"), ProposalID: str(it, "proposal_id"), Tool: str(it, "tool"), Input: input,
			RiskClass: str(it, "risk_class"), Justification: str(it, "justification")}
		body, err := protocol.IntentBody(in, s.store)
		if err != nil {
			return nil, err
		}
		if err := s.emit(&recs, protocol.ToolIntentSigned, protocol.Executor, in.ID, body); err != nil {
			return nil, err
		}
		review = review || s.needsApproval(in.RiskClass)
	}
	name := OutRun
	if review {
		name = OutReview
	}
	return &workflow.Outcome{Name: name, Records: recs}, nil
}

// ---- reviewing intents ------------------------------------------------

func (s *session) pendingReviews() []*protocol.IntentRecord {
	var out []*protocol.IntentRecord
	for _, id := range sortedIntentIDs(s.led) {
		if in := s.led.Intents[id]; in.Status == protocol.StatusSigned && s.needsApproval(in.RiskClass) {
			out = append(out, in)
		}
	}
	return out
}

func prepareReviewIntents(s *session) (*workflow.Prep, error) {
	pending := s.pendingReviews()
	if len(pending) == 0 {
		return &workflow.Prep{Skip: workflow.ActionCompleted}, nil
	}
	var b strings.Builder
	b.WriteString("## Tool intents that need your approval (review every one)\n")
	for _, in := range pending {
		fmt.Fprintf(&b, "- %s (%s, risk %s, proposal %s): input %s\n  justification: %s\n", in.ID, in.Tool, in.RiskClass, in.ProposalID, jsonLine(in.Input), in.Justification)
	}
	return &workflow.Prep{Context: b.String()}, nil
}

func finishReviewIntents(s *session, _ *response.Answer, obj map[string]any) (*workflow.Outcome, error) {
	pending := map[string]bool{}
	for _, in := range s.pendingReviews() {
		pending[in.ID] = true
	}
	var recs []*history.Record
	var blocked []string
	approved := 0
	for _, r := range items(obj, "intent_reviews") {
		id := str(r, "intent_id")
		delete(pending, id)
		if err := s.emit(&recs, protocol.ToolIntentReviewed, protocol.Critic, id, pick(r, "decision", "reason")); err != nil {
			return nil, err
		}
		if str(r, "decision") == protocol.StatusApproved {
			approved++
		} else {
			blocked = append(blocked, id+": "+str(r, "reason"))
		}
	}
	if len(pending) > 0 {
		return nil, &protocol.GuardError{Class: protocol.FailOrdering, Guard: protocol.GuardOrdering, Msg: "review every intent; not reviewed: " + strings.Join(sortedKeys(pending), ", ")}
	}
	if approved == 0 && len(s.ready()) == 0 {
		// Nothing may run: execution is blocked until the Executor revises.
		return &workflow.Outcome{Name: OutBlocked, Retry: true, Records: recs, Feedback: "The Critic blocked: " + strings.Join(blocked, "; ")}, nil
	}
	return &workflow.Outcome{Name: workflow.ActionCompleted, Records: recs}, nil
}

// ---- running tools (Logist) ---------------------------------------------

// ready are the intents that may start: signed and not in need of
// approval, or approved by the Critic.
func (s *session) ready() []*protocol.IntentRecord {
	var out []*protocol.IntentRecord
	for _, id := range sortedIntentIDs(s.led) {
		in := s.led.Intents[id]
		if (in.Status == protocol.StatusSigned && !s.needsApproval(in.RiskClass)) || in.Status == protocol.StatusApproved {
			out = append(out, in)
		}
	}
	return out
}

type toolAnswer struct {
	Action      string        `json:"action"`
	Evidence    []string      `json:"evidence_files"`
	Summary     string        `json:"summary_for_supervisor"`
	ToolResults []toolOutcome `json:"tool_results"`
}

type toolOutcome struct {
	IntentID string `json:"intent_id"`
	protocol.ToolResult
}

func prepareRunTools(s *session) (*workflow.Prep, error) {
	var recs []*history.Record
	// A run that was in flight when Logist stopped is not run again: it
	// failed, and a retry is a new intent (seed 003).
	for _, id := range sortedIntentIDs(s.led) {
		in := s.led.Intents[id]
		if in.Status != protocol.StatusStarted {
			continue
		}
		res := &protocol.ToolResult{InputArtifact: in.InputArtifact, ExitCode: -1, Error: "interrupted: Logist stopped during the run; ask again with a new intent"}
		typ, body := protocol.ResultEvent(res)
		if err := s.emit(&recs, typ, protocol.System, id, body); err != nil {
			return nil, err
		}
	}
	ready := s.ready()
	oi := s.tx.Log.State().OpenIntent
	if len(ready) == 0 && (oi == nil || oi.Phase != s.phase) {
		return &workflow.Prep{Skip: workflow.ActionCompleted, Records: recs}, nil
	}
	var intents []protocol.Intent
	var b strings.Builder
	fmt.Fprintf(&b, "## Logist runs %d tool intent(s) in the workspace\n", len(ready))
	for _, in := range ready {
		it := protocol.Intent{ID: in.ID, ProposalID: in.ProposalID, Tool: in.Tool, Input: in.Input, RiskClass: in.RiskClass, Justification: in.Justification}
		if err := s.emit(&recs, protocol.ToolExecutionStarted, protocol.System, in.ID, protocol.StartedBody(it)); err != nil {
			return nil, err
		}
		intents = append(intents, it)
		fmt.Fprintf(&b, "- %s (%s): %s\n", in.ID, in.Tool, jsonLine(in.Input))
	}
	ws, store, pol := s.tx.Store().Workspace(s.tx.ID), s.store, s.pol
	work := func(ctx context.Context) ([]byte, error) {
		ans := toolAnswer{Action: workflow.ActionCompleted, Evidence: []string{}, ToolResults: []toolOutcome{}}
		failed := 0
		for _, in := range intents {
			res, err := protocol.Execute(ctx, ws, in, store, pol)
			if err != nil {
				return nil, err
			}
			if !res.OK {
				failed++
			}
			ans.ToolResults = append(ans.ToolResults, toolOutcome{IntentID: in.ID, ToolResult: *res})
		}
		ans.Summary = fmt.Sprintf("Logist ran %d tool intent(s): %d succeeded, %d failed.", len(intents), len(intents)-failed, failed)
		if len(intents) == 0 {
			ans.Summary = "No tool intent was left to run (interrupted runs are recorded as failed)."
		}
		return json.Marshal(ans)
	}
	return &workflow.Prep{Context: b.String(), Work: work, Records: recs}, nil
}

func finishRunTools(s *session, _ *response.Answer, obj map[string]any) (*workflow.Outcome, error) {
	b, _ := json.Marshal(obj)
	var ans toolAnswer
	if err := json.Unmarshal(b, &ans); err != nil {
		return nil, fmt.Errorf("protocol: tool results: %w", err)
	}
	var recs []*history.Record
	var failed []string
	for _, r := range ans.ToolResults {
		res := r.ToolResult
		typ, body := protocol.ResultEvent(&res)
		if err := s.emit(&recs, typ, protocol.System, r.IntentID, body); err != nil {
			return nil, err
		}
		if !res.OK {
			failed = append(failed, r.IntentID+": "+res.Error)
		}
	}
	if len(failed) > 0 && s.pol.AllowFallback {
		return &workflow.Outcome{Name: OutFallback, Retry: true, Records: recs, Feedback: "Tool runs failed; propose a fallback: " + strings.Join(failed, "; ")}, nil
	}
	return &workflow.Outcome{Name: workflow.ActionCompleted, Records: recs}, nil
}

// ---- claiming ---------------------------------------------------------

func (s *session) claims(filter func(*protocol.Claim) bool) string {
	var b strings.Builder
	ids := sortedKeys(s.led.Claims)
	sort.SliceStable(ids, func(i, j int) bool { return s.led.Claims[ids[i]].Seq < s.led.Claims[ids[j]].Seq })
	for _, id := range ids {
		c := s.led.Claims[id]
		if filter != nil && !filter(c) {
			continue
		}
		fmt.Fprintf(&b, "- %s (%s, confidence %.2f): %s\n  evidence: %s\n", id, c.Status, c.Confidence, c.Text, jsonLine(c.Evidence))
		if c.Challenge != "" {
			fmt.Fprintf(&b, "  challenged: %s\n", c.Challenge)
		}
	}
	return b.String()
}

func prepareClaim(s *session) (*workflow.Prep, error) {
	var b strings.Builder
	if runs := s.toolRuns(); runs != "" {
		b.WriteString("## Tool runs (cite their artifacts, or tool:INTENT_ID for a run's output)\n" + runs)
	}
	if cl := s.claims(nil); cl != "" {
		b.WriteString("\n## Claims so far (a revision needs a new id and \"revises\")\n" + cl)
	}
	fmt.Fprintf(&b, "\nEach claim needs at least %d evidence reference(s).\n", s.pol.MinEvidence)
	return &workflow.Prep{Context: b.String()}, nil
}

func finishClaim(s *session, _ *response.Answer, obj map[string]any) (*workflow.Outcome, error) {
	var recs []*history.Record
	for _, c := range items(obj, "claims") {
		body := pick(c, "text", "confidence", "revises")
		var ev []any
		raw, _ := c["evidence"].([]any)
		for _, r := range raw {
			ref, _ := r.(string)
			if id, ok := strings.CutPrefix(ref, "tool:"); ok {
				in, known := s.led.Intents[id]
				if !known || in.Result == nil {
					return nil, &protocol.GuardError{Class: protocol.FailMissingArtifact, Guard: protocol.GuardEvidence, Msg: fmt.Sprintf("claim %s cites %s, which has no finished run", str(c, "id"), ref)}
				}
				ref = in.Result.OutputArtifact
				if ref == "" {
					ref = in.Result.InputArtifact
				}
			}
			ev = append(ev, ref)
		}
		if ev == nil {
			ev = []any{}
		}
		body["evidence"] = ev
		if err := s.emit(&recs, protocol.ClaimIssued, protocol.Executor, str(c, "id"), body); err != nil {
			return nil, err
		}
	}
	return &workflow.Outcome{Name: workflow.ActionCompleted, Records: recs}, nil
}

// ---- challenging claims -------------------------------------------------

func issued(c *protocol.Claim) bool { return c.Status == protocol.StatusIssued }

func prepareChallenge(s *session) (*workflow.Prep, error) {
	cl := s.claims(issued)
	if cl == "" {
		return &workflow.Prep{Skip: workflow.ActionCompleted}, nil
	}
	var b strings.Builder
	b.WriteString("## Claims to examine (challenge those whose evidence is weak or contradictory)\n" + cl)
	b.WriteString("\n## The evidence\n")
	seen := map[string]bool{}
	for _, id := range sortedKeys(s.led.Claims) {
		c := s.led.Claims[id]
		if !issued(c) {
			continue
		}
		for _, a := range c.Evidence {
			if !seen[a] {
				seen[a] = true
				fmt.Fprintf(&b, "### %s\n%s\n", a, s.excerpt(a, 2000))
			}
		}
	}
	return &workflow.Prep{Context: b.String()}, nil
}

func finishChallenge(s *session, _ *response.Answer, obj map[string]any) (*workflow.Outcome, error) {
	var recs []*history.Record
	var reasons []string
	for _, c := range items(obj, "challenges") {
		id := str(c, "claim_id")
		if err := s.emit(&recs, protocol.ClaimChallenged, protocol.Critic, id, pick(c, "reason")); err != nil {
			return nil, err
		}
		reasons = append(reasons, id+": "+str(c, "reason"))
	}
	if len(reasons) > 0 {
		return &workflow.Outcome{Name: OutChallenged, Retry: true, Records: recs, Feedback: "The Critic challenged claims; revise them: " + strings.Join(reasons, "; ")}, nil
	}
	return &workflow.Outcome{Name: workflow.ActionCompleted, Records: recs}, nil
}

// ---- finalizing -------------------------------------------------------

func prepareFinalize(s *session) (*workflow.Prep, error) {
	return &workflow.Prep{Context: "## Claims to bundle in the final statement\n" + s.claims(issued)}, nil
}

func finishFinalize(s *session, _ *response.Answer, obj map[string]any) (*workflow.Outcome, error) {
	fs, _ := obj["final_statement"].(map[string]any)
	var recs []*history.Record
	err := s.emit(&recs, protocol.FinalStatementSigned, protocol.Planner, "", pick(fs, "summary", "claim_ids"))
	var ge *protocol.GuardError
	if errors.As(err, &ge) && ge.Guard == protocol.GuardFinalization {
		// Blocked until the required checks pass: back to the claims.
		return &workflow.Outcome{Name: OutBlocked, Retry: true, State: string(s.initial), Feedback: "The final statement is blocked: " + ge.Msg}, nil
	}
	if err != nil {
		return nil, err
	}
	return &workflow.Outcome{Name: workflow.ActionCompleted, Records: recs}, nil
}

// ---- verifying (Logist) and auditing -------------------------------------

type verifyAnswer struct {
	Action             string   `json:"action"`
	Evidence           []string `json:"evidence_files"`
	Summary            string   `json:"summary_for_supervisor"`
	ReportArtifact     string   `json:"report_artifact"`
	VerificationStatus string   `json:"verification_status"`
}

func prepareVerify(s *session) (*workflow.Prep, error) {
	var recs []*history.Record
	if s.led.Verification == nil || !s.led.Verification.Started {
		names := []any{}
		for _, c := range s.pol.Checks {
			names = append(names, c.Name)
		}
		if err := s.emit(&recs, protocol.VerificationStarted, protocol.Auditor, "", map[string]any{"checks": names}); err != nil {
			return nil, err
		}
	}
	dir, ws, store, pol := s.tx.Dir, s.tx.Store().Workspace(s.tx.ID), s.store, s.pol
	work := func(ctx context.Context) ([]byte, error) {
		recs, err := history.ReadAll(dir)
		if err != nil {
			return nil, fmt.Errorf("protocol: read history: %w", err)
		}
		rep := protocol.Verify(recs, store, pol, protocol.VerifyOptions{})
		checks, err := protocol.RunChecks(ctx, ws, store, pol)
		if err != nil {
			return nil, err
		}
		for _, c := range checks {
			rep.Add(c)
		}
		id, err := store.Put([]byte(rep.Markdown()))
		if err != nil {
			return nil, err
		}
		n := len(rep.Failures())
		return json.Marshal(verifyAnswer{Action: workflow.ActionCompleted, Evidence: []string{}, ReportArtifact: id, VerificationStatus: rep.Status,
			Summary: fmt.Sprintf("Verification %s: %d checks, %d failures; report %s.", rep.Status, len(rep.Checks), n, id)})
	}
	return &workflow.Prep{Context: "## Logist verifies the trace and runs the job's checks\n", Work: work, Records: recs}, nil
}

func finishVerify(s *session, _ *response.Answer, _ map[string]any) (*workflow.Outcome, error) {
	return &workflow.Outcome{Name: workflow.ActionCompleted}, nil
}

// lastVerification is the newest report Logist's verifier wrote.
func (s *session) lastVerification() (*verifyAnswer, error) {
	for i := len(s.recs) - 1; i >= 0; i-- {
		r := &s.recs[i]
		if r.Type != history.TypeResponse || r.Role != workflow.RoleLogist || r.Response == nil || !strings.Contains(r.Response.RawResponse, `"report_artifact"`) {
			continue
		}
		var v verifyAnswer
		if err := json.Unmarshal([]byte(r.Response.RawResponse), &v); err != nil {
			return nil, fmt.Errorf("protocol: verifier answer: %w", err)
		}
		return &v, nil
	}
	return nil, errors.New("protocol: no verification report to audit")
}

func prepareAudit(s *session) (*workflow.Prep, error) {
	v, err := s.lastVerification()
	if err != nil {
		return &workflow.Prep{Fail: &workflow.Failure{Code: CodeProtocolFailed, Reason: err.Error()}}, nil
	}
	ctx := fmt.Sprintf("## Verification report %s (Logist's checks: %s)\n%s\nYour verdict can confirm or lower this status, never raise it.\n",
		v.ReportArtifact, v.VerificationStatus, s.excerpt(v.ReportArtifact, 20000))
	if cl := s.claims(issued); cl != "" {
		ctx += "\n## Final claims\n" + cl
	}
	return &workflow.Prep{Context: ctx}, nil
}

// severity orders verification statuses.
var severity = map[string]int{protocol.VerdictPass: 0, protocol.VerdictPassWarnings: 1, protocol.VerdictFail: 2}

func finishAudit(s *session, _ *response.Answer, obj map[string]any) (*workflow.Outcome, error) {
	v, err := s.lastVerification()
	if err != nil {
		return nil, err
	}
	verdict, _ := obj["verdict"].(map[string]any)
	status := str(verdict, "status")
	if severity[v.VerificationStatus] > severity[status] {
		status = v.VerificationStatus // the Auditor cannot raise a failed check
	}
	final := ""
	if s.led.Final != nil {
		final = s.led.Final.Hash
	}
	body := map[string]any{"status": status, "report_artifact": v.ReportArtifact, "final_event": final}
	if n := str(verdict, "notes"); n != "" {
		body["notes"] = n
	}
	var recs []*history.Record
	if err := s.emit(&recs, protocol.VerificationCompleted, protocol.Auditor, "", body); err != nil {
		return nil, err
	}
	if status == protocol.VerdictFail {
		return &workflow.Outcome{Records: recs, Fail: &workflow.Failure{Code: CodeVerificationFailed,
			Reason: fmt.Sprintf("verification failed (report %s): %s", v.ReportArtifact, str(verdict, "notes"))}}, nil
	}
	return &workflow.Outcome{Name: workflow.ActionCompleted, Records: recs}, nil
}

// Halt records the operator's abort when a steward halts a job in a
// protocol phase (effect.Halter): the session's SESSION_ABORTED event, and
// the session's state after it.
func (p *Phase) Halt(tx *jobtx.Tx, by, reason string) ([]*history.Record, string, error) {
	recs, err := abort(tx, by, reason)
	if err != nil || len(recs) == 0 {
		return nil, "", err
	}
	return recs, string(protocol.Aborted), nil
}

// abort records the operator's abort of a protocol session (logist halt).
// It returns nil records for a job that is not a protocol session or whose
// session already ended.
func abort(tx *jobtx.Tx, by, reason string) ([]*history.Record, error) {
	recs, err := history.ReadAll(tx.Dir)
	if err != nil {
		return nil, err
	}
	hasEvents := false
	for i := range recs {
		if recs[i].Type == history.TypeEvent {
			hasEvents = true
			break
		}
	}
	if !hasEvents {
		return nil, nil
	}
	s, fail, err := open(tx, tx.M.Phase())
	if err != nil {
		return nil, err
	}
	if fail != nil || s.led.State == protocol.Completed {
		return nil, nil
	}
	var out []*history.Record
	if err := s.emit(&out, protocol.SessionAborted, protocol.System, "", map[string]any{"reason": reason, "by": by}); err != nil {
		return nil, err
	}
	return out, nil
}
