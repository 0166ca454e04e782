package phases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/protocol"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/workflow"
)

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
		return &workflow.Prep{Fail: &workflow.Failure{Code: codes.ProtocolFailed, Reason: err.Error()}}, nil
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
		return &workflow.Outcome{Records: recs, Fail: &workflow.Failure{Code: codes.VerificationFailed,
			Reason: fmt.Sprintf("verification failed (report %s): %s", v.ReportArtifact, str(verdict, "notes"))}}, nil
	}
	return &workflow.Outcome{Name: workflow.ActionCompleted, Records: recs}, nil
}
