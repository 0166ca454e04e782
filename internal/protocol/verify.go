package protocol

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/logist/logist/internal/history"
)

// FailCheck is the class of a failed job check (a test suite the manifest
// names), beyond the seed's trace failure classes.
const FailCheck = "check_failed"

// Names of the verifier's mandatory checks, in report order.
const (
	CheckSchema       = "schema"
	CheckChain        = "chain"
	CheckSignatures   = "signatures"
	CheckRolePolicy   = "role_policy"
	CheckOrdering     = "ordering"
	CheckAction       = "action"
	CheckEvidence     = "evidence"
	CheckFinalization = "finalization"
)

var checkOrder = []string{CheckSchema, CheckChain, CheckSignatures, CheckRolePolicy, CheckOrdering, CheckAction, CheckEvidence, CheckFinalization}

// LowConfidence is the confidence below which a claim earns a warning.
const LowConfidence = 0.5

// VerifyOptions say what trace is checked.
type VerifyOptions struct {
	// Complete: the session must have finished: a final statement and a
	// passing verification_run_completed (for `logist verify` on a
	// completed job). Without it the trace may stop anywhere, as it does
	// while the Auditor is verifying it.
	Complete bool
}

// CheckResult is one check of a report.
type CheckResult struct {
	Name     string    `json:"name"`
	OK       bool      `json:"ok"`
	Warnings []string  `json:"warnings,omitempty"`
	Failures []Failure `json:"failures,omitempty"`
	// Artifact holds the output of a job check.
	Artifact string `json:"artifact,omitempty"`
}

// Report is the verifier's verdict on a trace.
type Report struct {
	// Status: pass, pass_with_warnings or fail.
	Status string `json:"status"`
	// Events is how many events were checked; Head the last one's hash
	// (the immutable trace identifier the report is about).
	Events int           `json:"events"`
	Head   string        `json:"head"`
	Checks []CheckResult `json:"checks"`
}

// Add appends a check (a job check from RunChecks) and recomputes Status.
func (r *Report) Add(c CheckResult) {
	r.Checks = append(r.Checks, c)
	r.settle()
}

func (r *Report) settle() {
	r.Status = VerdictPass
	for i := range r.Checks {
		c := &r.Checks[i]
		c.OK = len(c.Failures) == 0
		if !c.OK {
			r.Status = VerdictFail
		} else if len(c.Warnings) > 0 && r.Status == VerdictPass {
			r.Status = VerdictPassWarnings
		}
	}
}

// Failures lists every failure of the report.
func (r *Report) Failures() []Failure {
	var out []Failure
	for _, c := range r.Checks {
		out = append(out, c.Failures...)
	}
	return out
}

// Verify is the Auditor's mandatory checks over a job's whole trace (its
// history records; non-event records are skipped): schema conformance,
// the event chain and hashes, signatures of the mandatory types with the
// keys of session_initialized, the role policy, the ordering rules (by
// replaying every event through the guards), the action guard, evidence
// (every artifact the trace names is stored and hashes to its id; claim
// evidence comes from earlier executions) and finalization. Every failure
// is reported, not only the first.
func Verify(recs []history.Record, store Store, p Policy, opt VerifyOptions) *Report {
	p = p.WithDefaults()
	byName := map[string]*CheckResult{}
	rep := &Report{}
	for _, n := range checkOrder {
		rep.Checks = append(rep.Checks, CheckResult{Name: n})
	}
	for i := range rep.Checks {
		byName[rep.Checks[i].Name] = &rep.Checks[i]
	}
	fail := func(check string, f Failure) { byName[check].Failures = append(byName[check].Failures, f) }
	warn := func(check, format string, args ...any) {
		byName[check].Warnings = append(byName[check].Warnings, fmt.Sprintf(format, args...))
	}

	l := NewLedger(nil)
	for _, r := range recs {
		if r.Type != history.TypeEvent {
			continue
		}
		e := r.Event
		if e == nil {
			fail(CheckSchema, Failure{Class: FailSchemaInvalid, Seq: r.Seq, Detail: "event record without an event"})
			continue
		}
		if r.Role != e.Role {
			fail(CheckRolePolicy, Failure{Class: FailRolePolicy, Seq: r.Seq, EventType: e.Type, Subject: e.Subject,
				Detail: fmt.Sprintf("record role %q differs from event role %q", r.Role, e.Role)})
		}
		for _, g := range l.guards(e, p, true) {
			fail(checkFor(g), Failure{Class: g.Class, Seq: r.Seq, EventType: e.Type, Subject: e.Subject, Detail: g.Msg})
		}
		l.apply(r.Seq, e)
	}
	rep.Events, rep.Head = len(l.Events), l.Head

	// Claim evidence no earlier execution produced: produced later is an
	// ordering violation, never produced a missing artifact.
	for _, u := range l.unproduced {
		f := Failure{Seq: u.seq, EventType: ClaimIssued, Subject: u.claim}
		if at, ok := l.produced[u.artifact]; ok && at > u.index {
			f.Class, f.Detail = FailOrdering, fmt.Sprintf("evidence %s comes from a tool execution after the claim", u.artifact)
			fail(CheckOrdering, f)
		} else {
			f.Class, f.Detail = FailMissingArtifact, fmt.Sprintf("evidence %s was not produced by any tool execution", u.artifact)
			fail(CheckEvidence, f)
		}
	}
	for _, ref := range referencedArtifacts(l) {
		if err := store.Verify(ref.id); err != nil {
			fail(CheckEvidence, Failure{Class: artifactClass(err), Seq: ref.seq, EventType: ref.typ, Subject: ref.subject, Detail: err.Error()})
		}
	}
	for _, in := range sortedIntents(l) {
		if in.Status == StatusFailed && in.Result != nil {
			warn(CheckEvidence, "tool execution of intent %q failed: %s", in.ID, in.Result.Error)
		}
	}
	for _, c := range sortedClaims(l) {
		if c.Challenged && c.Status == StatusSuperseded {
			warn(CheckEvidence, "claim %q was challenged (%s) and revised by %q", c.ID, c.Challenge, c.SupersededBy)
		}
		if c.Status != StatusSuperseded && c.Confidence < LowConfidence {
			warn(CheckEvidence, "claim %q has low confidence %.2f", c.ID, c.Confidence)
		}
	}

	// Finalization.
	last := int64(0)
	if n := len(l.Seqs); n > 0 {
		last = l.Seqs[n-1]
	}
	if opt.Complete {
		switch v := l.Verification; {
		case l.Final == nil:
			fail(CheckFinalization, Failure{Class: FailFinalization, Seq: last, Detail: "the trace has no final_statement_signed"})
		case v == nil || !v.Completed:
			fail(CheckFinalization, Failure{Class: FailFinalization, Seq: last, Detail: "the trace has no verification_run_completed: the session did not complete"})
		case v.Status != VerdictPass && v.Status != VerdictPassWarnings:
			fail(CheckFinalization, Failure{Class: FailFinalization, Seq: v.Seq, EventType: VerificationCompleted,
				Detail: fmt.Sprintf("the recorded verification status is %q: the session did not complete", v.Status)})
		}
	}
	rep.settle()
	return rep
}

// checkFor maps a guard failure to the check that reports it.
func checkFor(g *GuardError) string {
	switch g.Guard {
	case GuardRole:
		return CheckRolePolicy
	case GuardChain:
		if g.Class == FailSignatureInvalid {
			return CheckSignatures
		}
		return CheckChain
	case GuardSchema:
		return CheckSchema
	case GuardOrdering:
		return CheckOrdering
	case GuardAction:
		return CheckAction
	case GuardEvidence:
		return CheckEvidence
	}
	return CheckFinalization
}

type artifactRef struct {
	id, typ, subject string
	seq              int64
}

// referencedArtifacts lists each artifact the trace names (first
// reference), in trace order.
func referencedArtifacts(l *Ledger) []artifactRef {
	var out []artifactRef
	seen := map[string]bool{}
	for i, e := range l.Events {
		body, _ := plainBody(e.Body)
		var ids []string
		switch e.Type {
		case ToolIntentSigned, ToolExecutionStarted, ToolExecutionCompleted, ToolExecutionFailed:
			ids = []string{str(body, "input_artifact"), str(body, "output_artifact")}
		case ClaimIssued:
			ids = strs(body, "evidence")
		case VerificationCompleted:
			ids = []string{str(body, "report_artifact")}
		}
		for _, id := range ids {
			if id == "" || seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, artifactRef{id: id, typ: e.Type, subject: e.Subject, seq: l.Seqs[i]})
		}
	}
	return out
}

func sortedIntents(l *Ledger) []*IntentRecord {
	out := make([]*IntentRecord, 0, len(l.Intents))
	for _, in := range l.Intents {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Seq < out[j].Seq || out[i].Seq == out[j].Seq && out[i].ID < out[j].ID
	})
	return out
}

func sortedClaims(l *Ledger) []*Claim {
	out := make([]*Claim, 0, len(l.Claims))
	for _, c := range l.Claims {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Seq < out[j].Seq || out[i].Seq == out[j].Seq && out[i].ID < out[j].ID
	})
	return out
}

// Markdown renders the report for its artifact.
func (r Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Verification report\n\n")
	fmt.Fprintf(&b, "- Status: **%s**\n- Events: %d\n- Trace head: `%s`\n\n", r.Status, r.Events, r.Head)
	b.WriteString("| Check | Result | Failures | Warnings |\n|---|---|---|---|\n")
	for _, c := range r.Checks {
		res := "ok"
		if !c.OK {
			res = "FAIL"
		} else if len(c.Warnings) > 0 {
			res = "ok (warnings)"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d |\n", c.Name, res, len(c.Failures), len(c.Warnings))
	}
	for _, c := range r.Checks {
		if len(c.Failures) == 0 && len(c.Warnings) == 0 && c.Artifact == "" {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n\n", c.Name)
		if c.Artifact != "" {
			fmt.Fprintf(&b, "Output: `%s`\n\n", c.Artifact)
		}
		for _, f := range c.Failures {
			fmt.Fprintf(&b, "- **%s**", f.Class)
			if f.Seq != 0 {
				fmt.Fprintf(&b, " at record %d", f.Seq)
			}
			if f.EventType != "" {
				fmt.Fprintf(&b, " (%s", f.EventType)
				if f.Subject != "" {
					fmt.Fprintf(&b, " %s", f.Subject)
				}
				b.WriteString(")")
			}
			fmt.Fprintf(&b, ": %s\n", oneLine(f.Detail))
		}
		for _, w := range c.Warnings {
			fmt.Fprintf(&b, "- warning: %s\n", oneLine(w))
		}
	}
	return b.String()
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// RunChecks runs the job's own checks (Policy.Checks, such as a test
// suite) in the workspace like a shell tool (own process group, scrubbed
// environment, timeout, output cap) and stores each one's output as an
// artifact. A check passes when it exits 0. It fails only when an artifact
// cannot be stored or ctx ends.
func RunChecks(ctx context.Context, workspace string, store Store, p Policy) ([]CheckResult, error) {
	p = p.WithDefaults()
	var out []CheckResult
	for _, c := range p.Checks {
		cr := CheckResult{Name: "check:" + c.Name}
		start := time.Now()
		var res map[string]any
		var msg string
		if len(c.Argv) == 0 || c.Argv[0] == "" {
			res, msg = map[string]any{}, "check has no command"
		} else {
			var err error
			res, _, msg, err = runCommand(ctx, workspace, "", c.Argv, time.Duration(c.TimeoutSeconds)*time.Second, p.MaxToolOutputBytes)
			if err != nil {
				return out, err
			}
		}
		res["name"], res["argv"], res["duration_ms"] = c.Name, c.Argv, time.Since(start).Milliseconds()
		if msg != "" {
			res["error"] = msg
			cr.Failures = []Failure{{Class: FailCheck, Detail: fmt.Sprintf("check %q: %s", c.Name, msg)}}
		}
		b, err := CanonicalJSON(res)
		if err != nil {
			return out, err
		}
		if cr.Artifact, err = store.Put(b); err != nil {
			return out, err
		}
		cr.OK = len(cr.Failures) == 0
		out = append(out, cr)
	}
	return out, nil
}
