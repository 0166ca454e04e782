package phases

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/protocol"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/workflow"
)

// ---- planning ---------------------------------------------------------

func preparePlan(s *session) (*workflow.Prep, error) {
	var b strings.Builder
	if len(s.led.Proposals) > 0 {
		b.WriteString("## Proposals so far\n")
		for _, id := range slices.Sorted(maps.Keys(s.led.Proposals)) {
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
	for _, id := range slices.Sorted(maps.Keys(s.led.Proposals)) {
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
		return nil, &protocol.GuardError{Class: protocol.FailOrdering, Guard: protocol.GuardOrdering, Msg: "review every proposal; not reviewed: " + strings.Join(slices.Sorted(maps.Keys(pending)), ", ")}
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
