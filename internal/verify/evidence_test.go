package verify

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/testkit"
)

// runRaw runs a job whose worker answers raw once, signed, to its end, and
// returns the jobs folder and key. setup prepares the job folder first.
func runRaw(t *testing.T, raw string, setup func(jobDir string)) (string, *signing.Key) {
	t.Helper()
	f := testkit.New(t)
	dir := f.Dir
	jobDir := filepath.Join(dir, "j")
	if err := os.MkdirAll(filepath.Join(jobDir, "workspace"), 0o700); err != nil {
		t.Fatal(err)
	}
	m := map[string]any{"job_id": "j", "task_description": "t", "agents": map[string]any{
		"worker":     map[string]any{"provider": "script", "script": []any{map[string]any{"raw": raw}}},
		"supervisor": map[string]any{"provider": "script", "script": []any{map[string]any{"action": "COMPLETED", "summary": "ok"}}},
	}}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(jobDir, jobstore.ManifestFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(jobDir)
	}
	key := f.Sign()
	f.Runner = runner.NewEngine(f.Env, builtins.Effects())
	f.Run("j")
	return dir, key
}

// responseLine is the index of the history's (one) response line.
func responseLine(t *testing.T, ls [][]byte) int {
	t.Helper()
	for i, ln := range ls {
		if e, err := history.ParseLine(ln); err == nil && e.Type == history.TypeResponse {
			return i
		}
	}
	t.Fatal("no response record")
	return -1
}

// Issue 17 item 2: an answer refused as PROTOCOL_VIOLATION for its
// evidence verifies intact, whether the answer's text decided it or the
// workspace did (a symlink out, which the replay cannot see: the engine
// recorded it); a consistent forgery of either still fails the replay.
func TestRefusedEvidenceVerifies(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	link := func(jobDir string) {
		if err := os.Symlink(outside, filepath.Join(jobDir, "workspace", "out")); err != nil {
			t.Skipf("symlinks unavailable: %v", err)
		}
	}
	cases := []struct {
		name, evidence string
		setup          func(string)
		// forge rewrites the response line as someone holding the key
		// could; the replay must still tell.
		forge func([]byte) []byte
	}{
		{"dotdot", "../job.json", nil, func(l []byte) []byte { return bytes.ReplaceAll(l, []byte("../job.json"), []byte("report.md")) }},
		{"absolute", "/etc/passwd", nil, func(l []byte) []byte { return bytes.ReplaceAll(l, []byte("/etc/passwd"), []byte("etc/passwd")) }},
		{"empty", "", nil, func(l []byte) []byte {
			return bytes.Replace(l, []byte(`\"evidence_files\":[\"\"]`), []byte(`\"evidence_files\":[]`), 1)
		}},
		{"symlink out", "out/secret", link, func(l []byte) []byte { return bytes.Replace(l, []byte(`,"workspace":true`), nil, 1) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := `{"action":"COMPLETED","evidence_files":["` + c.evidence + `"],"summary_for_supervisor":"done"}`
			dir, key := runRaw(t, raw, c.setup)
			m, err := jobstore.New(dir).Load("j")
			if err != nil {
				t.Fatal(err)
			}
			if m.Run.ErrorCode != codes.ProtocolViolation {
				t.Fatalf("job stopped with %s (%s), want %s", m.Run.ErrorCode, m.Run.Reason, codes.ProtocolViolation)
			}
			if r := verifyDir(t, dir, "j", key.Public()); !r.OK() {
				t.Fatalf("untampered history: %v", r.Problems)
			}
			file := filepath.Join(dir, "j", history.FileName)
			ls := lines(t, file)
			i := responseLine(t, ls)
			forged := c.forge(ls[i])
			if bytes.Equal(forged, ls[i]) {
				t.Fatalf("the forgery changed nothing in %s", ls[i])
			}
			ls[i] = forged
			writeLines(t, file, relink(t, ls, key))
			r := verifyDir(t, dir, "j", key.Public())
			if r.OK() || r.First().Class != ClassReplayDivergence || !strings.Contains(r.First().Detail, "PROTOCOL_VIOLATION") {
				t.Errorf("forged history: %v", r.Problems)
			}
		})
	}
}

// Issue 17 item 3: an evidence path out of the workspace is what the
// answer is refused for even when its summary is empty and its action
// missing; every violation is recorded, and the history verifies.
func TestEscapeWithOtherViolationsIsRecorded(t *testing.T) {
	t.Parallel()
	dir, key := runRaw(t, `{"evidence_files":["/etc/shadow"],"summary_for_supervisor":""}`, nil)
	m, _ := jobstore.New(dir).Load("j")
	if m.Run.ErrorCode != codes.ProtocolViolation || !strings.Contains(m.Run.Reason, "/etc/shadow") {
		t.Errorf("run: %s %q", m.Run.ErrorCode, m.Run.Reason)
	}
	recs, err := history.ReadAll(filepath.Join(dir, "j"))
	if err != nil {
		t.Fatal(err)
	}
	var resp *history.Response
	for _, r := range recs {
		if r.Type == history.TypeResponse {
			resp = r.Response
		}
	}
	var got []string
	for _, v := range resp.Violations {
		got = append(got, v.Code)
	}
	if resp.ErrorCode != codes.ProtocolViolation || strings.Join(got, ",") != "SCHEMA_INVALID,PROTOCOL_VIOLATION,SUMMARY_MISSING" {
		t.Errorf("response %s with violations %v", resp.ErrorCode, got)
	}
	if r := verifyDir(t, dir, "j", key.Public()); !r.OK() {
		t.Fatalf("history: %v", r.Problems)
	}
}

// Histories written before responses listed their violations still verify:
// a refusal the workspace decided is taken as recorded, and a refusal for
// the first layer that failed then is accepted when today's verdict finds
// that violation too.
func TestLegacyRefusalsVerify(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ raw, evidence string }{
		"symlink out, recorded without its finding": {`{"action":"COMPLETED","evidence_files":["out/secret"],"summary_for_supervisor":"done"}`, ""},
		"empty summary then, an escape first now":   {`{"evidence_files":["/etc/shadow"],"summary_for_supervisor":""}`, "SUMMARY_MISSING"},
	} {
		t.Run(name, func(t *testing.T) {
			dir, key := runRaw(t, c.raw, func(jobDir string) {
				if err := os.Symlink(t.TempDir(), filepath.Join(jobDir, "workspace", "out")); err != nil {
					t.Skipf("symlinks unavailable: %v", err)
				}
			})
			file := filepath.Join(dir, "j", history.FileName)
			ls := lines(t, file)
			i := responseLine(t, ls)
			// As an older Logist wrote it: no violations, its code, and no
			// signed head (which the rewrite below would not match).
			if err := os.Remove(filepath.Join(dir, "j", history.HeadFile)); err != nil {
				t.Fatal(err)
			}
			e, err := history.ParseLine(ls[i])
			if err != nil {
				t.Fatal(err)
			}
			var rec map[string]any
			if err := json.Unmarshal(e.Body, &rec); err != nil {
				t.Fatal(err)
			}
			resp := rec["response"].(map[string]any)
			delete(resp, "violations")
			if c.evidence != "" {
				resp["error_code"] = c.evidence
			}
			body, _ := json.Marshal(rec)
			ls[i], _ = encodeFor(body, key)
			writeLines(t, file, relink(t, ls, key))
			if r := verifyDir(t, dir, "j", key.Public()); !r.OK() {
				t.Fatalf("legacy history: %v", r.Problems)
			}
			// But not a legacy record whose code today's verdict does not find.
			resp["error_code"] = codes.ActionInvalid
			body, _ = json.Marshal(rec)
			ls[i], _ = encodeFor(body, key)
			writeLines(t, file, relink(t, ls, key))
			if r := verifyDir(t, dir, "j", key.Public()); r.OK() || r.First().Class != ClassReplayDivergence {
				t.Errorf("a code the answer does not earn: %v", r.Problems)
			}
		})
	}
}
