package phases

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/protocol"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/snapshot"
	"github.com/logist/logist/internal/workflow"
)

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
	ids := slices.Sorted(maps.Keys(l.Intents))
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
	for _, id := range slices.Sorted(maps.Keys(s.led.Proposals)) {
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
		// Logist classifies the run itself; the Executor's class may only
		// raise it. The signed intent carries the effective class.
		in.RiskClass = protocol.EffectiveRisk(in.RiskClass, protocol.Classify(in.Tool, in.Input))
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
		return nil, &protocol.GuardError{Class: protocol.FailOrdering, Guard: protocol.GuardOrdering, Msg: "review every intent; not reviewed: " + strings.Join(slices.Sorted(maps.Keys(pending)), ", ")}
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
	// failed, and a retry is a new intent (seed 003). Nothing of it may
	// outlive that record (recoverInterrupted).
	var interrupted []string
	for _, id := range sortedIntentIDs(s.led) {
		if s.led.Intents[id].Status == protocol.StatusStarted {
			interrupted = append(interrupted, id)
		}
	}
	if len(interrupted) > 0 {
		what, err := s.recoverInterrupted(interrupted)
		if err != nil {
			return nil, err
		}
		for _, id := range interrupted {
			res := &protocol.ToolResult{InputArtifact: s.led.Intents[id].InputArtifact, ExitCode: -1,
				Error: "interrupted: Logist stopped during the run; " + what + "; ask again with a new intent"}
			typ, body := protocol.ResultEvent(res)
			if err := s.emit(&recs, typ, protocol.System, id, body); err != nil {
				return nil, err
			}
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
	ws, jobDir, store, pol := s.tx.Store().Workspace(s.tx.ID), s.tx.Dir, s.store, s.pol
	work := func(ctx context.Context) ([]byte, error) {
		ans := toolAnswer{Action: workflow.ActionCompleted, Evidence: []string{}, ToolResults: []toolOutcome{}}
		failed := 0
		for _, in := range intents {
			res, err := protocol.ExecuteAt(ctx, ws, protocol.RunDir(jobDir, in.ID), in, store, pol)
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

// recoverInterrupted makes the record of runs a stopped Logist cut off
// true: what is left of each is killed (its whole sandbox: a daemon that
// died leaves it running), then the workspace goes back to the job's
// current recovery point, the one the runs started from (no point is
// recorded while tools run). So nothing of an interrupted run stays: a
// write that had completed is undone, not left in place under a failed
// record, and a detached child cannot change the workspace afterwards.
// The Executor then plans again from the results so far. It says what it
// did, for the runs' records.
func (s *session) recoverInterrupted(ids []string) (string, error) {
	for _, id := range ids {
		if err := protocol.StopRun(protocol.RunDir(s.tx.Dir, id)); err != nil {
			return "", fmt.Errorf("protocol: stop interrupted run %s: %w", id, err)
		}
	}
	cp, snap := s.tx.CheckpointRef()
	what := fmt.Sprintf("what was left of it was killed and the workspace restored to recovery point %s", cp)
	if snap == nil {
		what = fmt.Sprintf("what was left of it was killed; the workspace could not be restored (recovery point %s has no snapshot) and may hold its partial changes", cp)
	} else if err := snapshot.RestoreRef(s.tx.Store().Workspace(s.tx.ID), s.tx.Dir, cp, snap.Listing); err != nil {
		return "", fmt.Errorf("protocol: restore the workspace to %s after interrupted runs: %w", cp, err)
	}
	s.tx.LogCode(codes.ToolRunRecovered, workflow.RoleLogist, 0, fmt.Sprintf("tool runs %s were interrupted: %s", strings.Join(ids, ", "), what))
	return what, nil
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
