package phases

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/protocol"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/workflow"
)

// ---- claiming ---------------------------------------------------------

func (s *session) claims(filter func(*protocol.Claim) bool) string {
	var b strings.Builder
	ids := slices.Sorted(maps.Keys(s.led.Claims))
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
				if !known || in.Result == nil || !in.Result.OK || in.Result.OutputArtifact == "" {
					return nil, &protocol.GuardError{Class: protocol.FailMissingArtifact, Guard: protocol.GuardEvidence, Msg: fmt.Sprintf("claim %s cites %s, which has no completed run with an output (a failed or interrupted run is no evidence)", str(c, "id"), ref)}
				}
				ref = in.Result.OutputArtifact
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
	for _, id := range slices.Sorted(maps.Keys(s.led.Claims)) {
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
	body := pick(fs, "summary", "claim_ids")
	if len(s.pol.Checks) > 0 {
		// The required checks run now, on the workspace the statement is
		// about; the statement names their outputs and the finalization
		// guard holds it to them.
		checks, failed, err := s.runChecks()
		if err != nil {
			return nil, err
		}
		if len(failed) > 0 {
			return &workflow.Outcome{Name: OutBlocked, Retry: true, State: string(s.initial),
				Feedback: "The final statement is blocked: required checks failed: " + strings.Join(failed, "; ")}, nil
		}
		body["checks"] = checks
	}
	var recs []*history.Record
	err := s.emit(&recs, protocol.FinalStatementSigned, protocol.Planner, "", body)
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

// runChecks runs the job's required checks in the workspace (each under
// its own timeout) and returns them as the final statement lists them,
// with what failed.
func (s *session) runChecks() ([]any, []string, error) {
	res, err := protocol.RunChecks(context.Background(), s.tx.Store().Workspace(s.tx.ID), s.store, s.pol)
	if err != nil {
		return nil, nil, err
	}
	var out []any
	var failed []string
	for i, c := range res {
		name := s.pol.Checks[i].Name
		out = append(out, map[string]any{"name": name, "artifact": c.Artifact, "passed": c.OK})
		for _, f := range c.Failures {
			failed = append(failed, f.Detail)
		}
	}
	return out, failed, nil
}
