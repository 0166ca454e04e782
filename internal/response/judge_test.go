package response

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
)

func codesOf(v Verdict) []string {
	var out []string
	for _, e := range v.Violations {
		out = append(out, e.Code)
	}
	return out
}

// Issue 17 item 3: an evidence path out of the workspace is found and is
// what the answer is refused for even when other layers fail too, and every
// violation is listed in seed 002's layer order.
func TestJudgeEscapeIsFoundWhateverElseIsWrong(t *testing.T) {
	ws := workspace(t)
	cases := []struct {
		name, raw string
		want      []string
	}{
		{"empty summary, no action", `{"evidence_files":["/etc/shadow"],"summary_for_supervisor":""}`,
			[]string{codes.SchemaInvalid, codes.ProtocolViolation, codes.SummaryMissing}},
		{"invalid action", `{"action":"DONE","evidence_files":["../job.json"],"summary_for_supervisor":"x"}`,
			[]string{codes.SchemaInvalid, codes.ActionInvalid, codes.ProtocolViolation}},
		{"summary missing, two escapes", `{"action":"COMPLETED","evidence_files":["report.md","","/etc/passwd"]}`,
			[]string{codes.SchemaInvalid, codes.ProtocolViolation, codes.ProtocolViolation, codes.SummaryMissing}},
		{"schema invalid elsewhere", `{"action":"COMPLETED","evidence_files":["../x", 7],"summary_for_supervisor":"x"}`,
			[]string{codes.SchemaInvalid, codes.ProtocolViolation}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Judge([]byte(c.raw), Contract{Workspace: Dir(ws)})
			if v.Err == nil || v.Err.Code != codes.ProtocolViolation {
				t.Fatalf("refused for %v, want %s (violations %v)", v.Err, codes.ProtocolViolation, codesOf(v))
			}
			if !strings.Contains(v.Err.Reason, "evidence_files") {
				t.Errorf("reason %q does not name evidence_files", v.Err.Reason)
			}
			if got := codesOf(v); !slices.Equal(got, c.want) {
				t.Errorf("violations %v, want %v", got, c.want)
			}
			if v.Answer != nil || v.Warnings != nil {
				t.Errorf("refused answer came with %v / %v", v.Answer, v.Warnings)
			}
			if rec := v.Record(); len(rec) != len(v.Violations) || rec[0].Code != v.Violations[0].Code {
				t.Errorf("record %v", rec)
			}
		})
	}
	// Without an escape, the precedence is what it always was.
	v := Judge([]byte(`{"action":"done","evidence_files":["report.md"]}`), Contract{Workspace: Dir(ws)})
	if v.Err.Code != codes.ActionInvalid || !slices.Equal(codesOf(v), []string{codes.SchemaInvalid, codes.ActionInvalid, codes.SummaryMissing}) {
		t.Errorf("refused for %s with %v", v.Err.Code, codesOf(v))
	}
}

// A symlink out is a workspace finding: marked as such, and found even when
// the action is wrong; without a workspace only the paths' text is judged.
func TestJudgeWorkspaceFindings(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	if err := os.Symlink(t.TempDir(), filepath.Join(ws, "out")); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
	raw := []byte(`{"action":"DONE","evidence_files":["out/x","report.md"],"summary_for_supervisor":"x"}`)
	v := Judge(raw, Contract{Workspace: Dir(ws)})
	if v.Err == nil || v.Err.Code != codes.ProtocolViolation || !v.Err.Workspace || v.Err.Path != "out/x" {
		t.Fatalf("refused for %+v, want a workspace PROTOCOL_VIOLATION about out/x", v.Err)
	}
	// Replayed with what was recorded, the verdict is the same although the
	// link is gone now.
	rec := v.Record()
	if err := os.Remove(filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	again := Judge(raw, Contract{Workspace: Recorded(rec)})
	if again.Err == nil || again.Err.Code != codes.ProtocolViolation || !slices.Equal(codesOf(again), codesOf(v)) {
		t.Errorf("replayed: %v %v, recorded %v", again.Err, codesOf(again), codesOf(v))
	}
	if Judge(raw, Contract{Workspace: Dir(ws)}).Err.Code != codes.ActionInvalid {
		t.Error("the folder as it is now still refuses out/x")
	}
	// No workspace: the text alone, which passes out/x.
	if v := Judge(raw, Contract{}); v.Err.Code != codes.ActionInvalid {
		t.Errorf("without a workspace: %v", v.Err)
	}
	if v := Judge([]byte(`{"action":"STUCK","evidence_files":["/etc/passwd"],"summary_for_supervisor":"x"}`), Contract{}); v.Err == nil || v.Err.Code != codes.ProtocolViolation || v.Err.Workspace {
		t.Errorf("without a workspace, an absolute path: %+v", v.Err)
	}
	// An accepted answer's recorded workspace (none) accepts it again.
	ok := []byte(`{"action":"COMPLETED","evidence_files":["report.md","nope.md"],"summary_for_supervisor":"x"}`)
	if v := Judge(ok, Contract{Workspace: Dir(ws)}); v.Err != nil || len(v.Warnings) != 1 || v.Record() != nil {
		t.Fatalf("accepted answer: %+v", v)
	}
	if v := Judge(ok, Contract{Workspace: Recorded(nil)}); v.Err != nil || v.Answer == nil {
		t.Errorf("replayed accepted answer: %+v", v)
	}
}

// A COMPLETED answer is held to the workspace's repository (Repository):
// refused, as the workspace's finding with no path, when its check says the
// repository may not be used; RETRY and STUCK complete nothing and are not
// held to it. Replayed with what was recorded, the verdict is the same
// whatever the repository is now; both findings, an evidence path's and
// the repository's, replay side by side.
func TestJudgeRepositoryFinding(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	var checked []string
	unsafe := Repo{Dir: Dir(ws), Check: func(dir string) error {
		checked = append(checked, dir)
		return errors.New(".git/config sets filter.x.clean")
	}}
	done := []byte(`{"action":"COMPLETED","evidence_files":["report.md"],"summary_for_supervisor":"x"}`)
	v := Judge(done, Contract{Workspace: unsafe})
	if v.Err == nil || v.Err.Code != codes.ProtocolViolation || !v.Err.Workspace || v.Err.Path != "" ||
		v.Err.Reason != "workspace repository: .git/config sets filter.x.clean" || v.Answer != nil {
		t.Fatalf("refused for %+v, want the repository's PROTOCOL_VIOLATION", v.Err)
	}
	if !slices.Equal(checked, []string{ws}) {
		t.Errorf("checked %v, want the workspace once", checked)
	}
	for _, action := range []string{"RETRY", "STUCK"} {
		raw := []byte(`{"action":"` + action + `","evidence_files":[],"summary_for_supervisor":"x"}`)
		if v := Judge(raw, Contract{Workspace: unsafe}); v.Err != nil || v.Answer == nil {
			t.Errorf("%s: %+v, want accepted", action, v.Err)
		}
	}
	if len(checked) != 1 {
		t.Errorf("checked %d times, want once (COMPLETED only)", len(checked))
	}
	if v := Judge(done, Contract{Workspace: In(ws, func(string) error { return nil })}); v.Err != nil {
		t.Errorf("a repository that may be used: %+v", v.Err)
	}
	if _, ok := In(ws, nil).(Repository); ok {
		t.Error("In without a check holds the answer to a repository")
	}

	again := Judge(done, Contract{Workspace: Recorded(v.Record())})
	if again.Err == nil || again.Err.Reason != v.Err.Reason || !again.Err.Workspace {
		t.Errorf("replayed: %+v, recorded %+v", again.Err, v.Err)
	}
	if v := Judge(done, Contract{Workspace: Recorded(nil)}); v.Err != nil {
		t.Errorf("replayed with nothing recorded: %+v", v.Err)
	}

	if err := os.Symlink(t.TempDir(), filepath.Join(ws, "out")); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
	both := []byte(`{"action":"COMPLETED","evidence_files":["out/x"],"summary_for_supervisor":"x"}`)
	v = Judge(both, Contract{Workspace: unsafe})
	if got := codesOf(v); !slices.Equal(got, []string{codes.ProtocolViolation, codes.ProtocolViolation}) || v.Err.Path != "out/x" {
		t.Fatalf("violations %v, refused for %+v; want the evidence path's, then the repository's", got, v.Err)
	}
	again = Judge(both, Contract{Workspace: Recorded(v.Record())})
	if len(again.Violations) != 2 || again.Violations[0].Path != "out/x" || again.Violations[1].Reason != v.Violations[1].Reason {
		t.Errorf("replayed: %+v", again.Violations)
	}
}

// A phase's own schema holds COMPLETED answers only; a turn is held to its
// schema alone, not to the base contract.
func TestJudgeOwnSchemas(t *testing.T) {
	const planner = "protocol-answer-planner.json"
	base := `"evidence_files":[],"summary_for_supervisor":"x"`
	v := Judge([]byte(`{"action":"COMPLETED",`+base+`}`), Contract{Schema: planner})
	if v.Err == nil || v.Err.Code != codes.SchemaInvalid || v.Err.Schema != planner {
		t.Fatalf("COMPLETED without proposals: %+v", v.Err)
	}
	if !strings.HasPrefix(v.Err.Explain(), planner+": ") || !strings.HasPrefix(v.Err.Error(), codes.SchemaInvalid+": ") {
		t.Errorf("Explain %q, Error %q", v.Err.Explain(), v.Err.Error())
	}
	if v := Judge([]byte(`{"action":"RETRY",`+base+`,"proposals":null}`), Contract{Schema: planner}); v.Err != nil || v.Answer.Action != "RETRY" {
		t.Errorf("RETRY is held to the base contract only: %+v", v.Err)
	} else if _, ok := v.Object["proposals"]; ok {
		t.Error("null members are not dropped from the object")
	}

	const vote = "negotiation-vote.json"
	if v := Judge([]byte(`{"vote":"YES","reason":null}`), Contract{Turn: true, Schema: vote}); v.Err != nil || v.Object["vote"] != "YES" || v.Answer != nil {
		t.Errorf("valid turn answer: %+v", v)
	}
	v = Judge([]byte(`{"vote":"MAYBE","evidence_files":["/etc/passwd"]}`), Contract{Turn: true, Schema: vote})
	if v.Err == nil || v.Err.Code != codes.SchemaInvalid || len(v.Violations) != 1 {
		t.Errorf("turn answer against its schema (base contract ignored): %+v", v.Violations)
	}
	if v := Judge([]byte(`{"x":1}`), Contract{Turn: true}); v.Err != nil {
		t.Errorf("turn without a schema: %v", v.Err)
	}
	if v := Judge([]byte(`maybe`), Contract{Turn: true, Schema: vote}); v.Err == nil || v.Err.Code != codes.NotJSON {
		t.Errorf("unreadable turn answer: %+v", v.Err)
	}
}

// Every code Judge refuses with is in Codes, the one list metrics and
// verify use.
func TestCodesListsEveryCode(t *testing.T) {
	for _, c := range []string{codes.AgentEmpty, codes.NotJSON, codes.SeveralObjects, codes.SchemaInvalid, codes.ActionInvalid, codes.SummaryMissing, codes.ProtocolViolation} {
		if !slices.Contains(Codes, c) {
			t.Errorf("%s is not in Codes", c)
		}
	}
	if len(Codes) != 7 {
		t.Errorf("Codes %v", Codes)
	}
}
