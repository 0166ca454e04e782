package response

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
)

const okAnswer = `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"Done."}`

// wantCode asserts that err is a *Error with code and a reason, and
// returns it; callers that want only the assertion drop it.
func wantCode(t *testing.T, err error, code string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *response.Error with code %s", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("code %s (%s), want %s", e.Code, e.Reason, code)
	}
	if e.Reason == "" {
		t.Errorf("error %s has no reason", e.Code)
	}
	if !strings.HasPrefix(e.Error(), code+": ") {
		t.Errorf("Error() = %q, want prefix %q", e.Error(), code+": ")
	}
	return e
}

func TestExtract(t *testing.T) {
	ok := []struct{ name, raw string }{
		{"plain", okAnswer},
		{"whitespace", "\n\t  " + okAnswer + "  \r\n\n"},
		{"bom", "\xef\xbb\xbf" + okAnswer},
		{"bom and whitespace", "\xef\xbb\xbf \n" + okAnswer + "\n"},
		{"fenced json", "```json\n" + okAnswer + "\n```"},
		{"fenced JSON", "```JSON\n" + okAnswer + "\n```\n"},
		{"fenced bare", "```\n" + okAnswer + "\n```"},
		{"fenced with spaces", "  ```json  \n\n  " + okAnswer + "  \n```  "},
		{"bom fenced", "\xef\xbb\xbf```json\n" + okAnswer + "\n```"},
		{"multiline", "{\n  \"action\": \"COMPLETED\",\n  \"evidence_files\": [],\n  \"summary_for_supervisor\": \"Done.\"\n}"},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			obj, err := Extract([]byte(c.raw))
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if obj["action"] != "COMPLETED" || obj["summary_for_supervisor"] != "Done." {
				t.Fatalf("Extract gave %v", obj)
			}
		})
	}

	bad := []struct{ name, raw, code string }{
		{"nil", "", codes.AgentEmpty},
		{"spaces", "   \n\t ", codes.AgentEmpty},
		{"bom only", "\xef\xbb\xbf", codes.AgentEmpty},
		{"bom and whitespace only", "\xef\xbb\xbf  \n", codes.AgentEmpty},
		{"prose", "I finished the task.", codes.NotJSON},
		{"prose before", "Here is my answer: " + okAnswer, codes.NotJSON},
		{"prose after", okAnswer + " hope that helps", codes.NotJSON},
		{"two objects", okAnswer + okAnswer, codes.SeveralObjects},
		{"two objects newline", okAnswer + "\n" + okAnswer, codes.SeveralObjects},
		{"object then number", okAnswer + " 1", codes.SeveralObjects},
		{"array", `[` + okAnswer + `]`, codes.NotJSON},
		{"string", `"COMPLETED"`, codes.NotJSON},
		{"number", `42`, codes.NotJSON},
		{"bool", `true`, codes.NotJSON},
		{"null", `null`, codes.NotJSON},
		{"truncated", `{"action":"COMPLETED"`, codes.NotJSON},
		{"fence with prose before", "Sure!\n```json\n" + okAnswer + "\n```", codes.NotJSON},
		{"fence with prose after", "```json\n" + okAnswer + "\n```\nLet me know.", codes.NotJSON},
		{"fence one line", "```json " + okAnswer + "```", codes.NotJSON},
		{"fence not closed", "```json\n" + okAnswer, codes.NotJSON},
		{"fence other language", "```python\n" + okAnswer + "\n```", codes.NotJSON},
		{"two fences", "```json\n" + okAnswer + "\n```\n```json\n" + okAnswer + "\n```", codes.NotJSON},
		{"fenced two objects", "```json\n" + okAnswer + "\n" + okAnswer + "\n```", codes.SeveralObjects},
		{"fenced empty", "```json\n```", codes.NotJSON},
		{"fenced array", "```json\n[]\n```", codes.NotJSON},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			obj, err := Extract([]byte(c.raw))
			if obj != nil {
				t.Errorf("Extract returned an object %v with an error", obj)
			}
			_ = wantCode(t, err, c.code)
		})
	}
}

func TestExtractNamesTheKind(t *testing.T) {
	for raw, kind := range map[string]string{`[]`: "array", `"x"`: "string", `1.5`: "number", `false`: "boolean", `null`: "null"} {
		_, err := Extract([]byte(raw))
		e := wantCode(t, err, codes.NotJSON)
		if !strings.Contains(e.Reason, kind) {
			t.Errorf("Extract(%s) reason %q does not name %q", raw, e.Reason, kind)
		}
	}
}

// workspace makes a workspace with a few files; it is a real path.
func workspace(t *testing.T) string {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.md", "src/pkg/main.go"} {
		p := filepath.Join(ws, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

func answer(action any, evidence any, summary any) []byte {
	m := map[string]any{}
	if action != nil {
		m["action"] = action
	}
	if evidence != nil {
		m["evidence_files"] = evidence
	}
	if summary != nil {
		m["summary_for_supervisor"] = summary
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func TestValidateAccepts(t *testing.T) {
	ws := workspace(t)
	for _, action := range []string{"COMPLETED", "STUCK", "RETRY"} {
		a, warns, err := validate(answer(action, []string{"report.md", "src/pkg/main.go"}, "Wrote the report."), ws)
		if err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		if a.Action != action || a.Summary != "Wrote the report." {
			t.Errorf("answer %+v", a)
		}
		if len(a.EvidenceFiles) != 2 || a.EvidenceFiles[0] != "report.md" || a.EvidenceFiles[1] != "src/pkg/main.go" {
			t.Errorf("evidence %v", a.EvidenceFiles)
		}
		if len(warns) != 0 {
			t.Errorf("warnings %v for existing files", warns)
		}
		if a.CostUSD != nil {
			t.Errorf("cost %v without cost_usd", *a.CostUSD)
		}
	}
}

func TestValidateEmptyEvidenceIsNonNil(t *testing.T) {
	a, warns, err := validate([]byte(okAnswer), workspace(t))
	if err != nil {
		t.Fatal(err)
	}
	if a.EvidenceFiles == nil || len(a.EvidenceFiles) != 0 {
		t.Errorf("EvidenceFiles = %#v, want empty non-nil", a.EvidenceFiles)
	}
	if warns != nil {
		t.Errorf("warnings %v", warns)
	}
}

func TestValidateExtraFieldsAndCost(t *testing.T) {
	raw := []byte(`{"action":"RETRY","evidence_files":[],"summary_for_supervisor":"again","cost_usd":0.0125,"usage":{"tokens":3}}`)
	a, _, err := validate(raw, workspace(t))
	if err != nil {
		t.Fatal(err)
	}
	if a.CostUSD == nil || *a.CostUSD != 0.0125 {
		t.Errorf("CostUSD = %v, want 0.0125", a.CostUSD)
	}
	_, _, err = validate([]byte(`{"action":"RETRY","evidence_files":[],"summary_for_supervisor":"again","cost_usd":-1}`), workspace(t))
	e := wantCode(t, err, codes.SchemaInvalid)
	if !strings.Contains(e.Reason, "/cost_usd") {
		t.Errorf("reason %q does not point at /cost_usd", e.Reason)
	}
	_, _, err = validate([]byte(`{"action":"RETRY","evidence_files":[],"summary_for_supervisor":"again","cost_usd":"free"}`), workspace(t))
	_ = wantCode(t, err, codes.SchemaInvalid)
}

func TestValidateExtractionErrorsPassThrough(t *testing.T) {
	ws := workspace(t)
	for raw, code := range map[string]string{
		"":                     codes.AgentEmpty,
		"done":                 codes.NotJSON,
		okAnswer + okAnswer:    codes.SeveralObjects,
		`["COMPLETED"]`:        codes.NotJSON,
		`"COMPLETED"`:          codes.NotJSON,
		"Sure:\n" + okAnswer:   codes.NotJSON,
		"```json\n" + okAnswer: codes.NotJSON,
	} {
		a, w, err := validate([]byte(raw), ws)
		if a != nil || w != nil {
			t.Errorf("validate(%q) returned answer %v warnings %v with error", raw, a, w)
		}
		_ = wantCode(t, err, code)
	}
	a, _, err := validate([]byte("\xef\xbb\xbf\n```json\n"+okAnswer+"\n```\n"), ws)
	if err != nil || a.Action != "COMPLETED" {
		t.Errorf("fenced answer with BOM: %v %v", a, err)
	}
}

func TestValidateSchema(t *testing.T) {
	ws := workspace(t)
	cases := []struct {
		name, raw, pointer string
	}{
		{"evidence string", `{"action":"COMPLETED","evidence_files":"report.md","summary_for_supervisor":"x"}`, "/evidence_files"},
		{"evidence missing", `{"action":"COMPLETED","summary_for_supervisor":"x"}`, "evidence_files"},
		{"evidence item number", `{"action":"COMPLETED","evidence_files":["a",3],"summary_for_supervisor":"x"}`, "/evidence_files/1"},
		{"evidence null", `{"action":"COMPLETED","evidence_files":null,"summary_for_supervisor":"x"}`, "/evidence_files"},
		{"action missing", `{"evidence_files":[],"summary_for_supervisor":"x"}`, "action"},
		{"summary number", `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":5}`, "/summary_for_supervisor"},
		// Capped (hostile input H101): no answer can grow the manifest
		// past what Logist reads back.
		{"evidence 101 paths", `{"action":"COMPLETED","evidence_files":["a"` + strings.Repeat(`,"a"`, 100) + `],"summary_for_supervisor":"x"}`, "/evidence_files: maximum 100 items"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := validate([]byte(c.raw), ws)
			e := wantCode(t, err, codes.SchemaInvalid)
			if !strings.Contains(e.Reason, c.pointer) {
				t.Errorf("reason %q does not mention %q", e.Reason, c.pointer)
			}
		})
	}
}

func TestValidateAction(t *testing.T) {
	ws := workspace(t)
	for _, action := range []any{"completed", "Completed", "DONE", "", " COMPLETED", 1, 0, true, []string{"COMPLETED"}, map[string]string{}} {
		_, _, err := validate(answer(action, []string{}, "summary"), ws)
		e := wantCode(t, err, codes.ActionInvalid)
		for _, a := range []string{"COMPLETED", "STUCK", "RETRY"} {
			if !strings.Contains(e.Reason, a) {
				t.Errorf("action %v: reason %q does not list %s", action, e.Reason, a)
			}
		}
	}
	// JSON null is not an absent field: it is an invalid action.
	_, _, err := validate([]byte(`{"action":null,"evidence_files":[],"summary_for_supervisor":"x"}`), ws)
	_ = wantCode(t, err, codes.ActionInvalid)
	// The offending value is quoted in the reason.
	_, _, err = validate(answer("DONE", []string{}, "x"), ws)
	if e := wantCode(t, err, codes.ActionInvalid); !strings.Contains(e.Reason, `"DONE"`) {
		t.Errorf("reason %q does not quote the action", e.Reason)
	}
}

func TestValidateSummary(t *testing.T) {
	ws := workspace(t)
	for name, raw := range map[string]string{
		"missing":    `{"action":"COMPLETED","evidence_files":[]}`,
		"empty":      `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":""}`,
		"whitespace": `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":" \n\t "}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := validate([]byte(raw), ws)
			_ = wantCode(t, err, codes.SummaryMissing)
		})
	}

	t.Run("501 chars", func(t *testing.T) {
		_, _, err := validate(answer("COMPLETED", []string{}, strings.Repeat("a", MaxSummary+1)), ws)
		e := wantCode(t, err, codes.SchemaInvalid)
		if !strings.Contains(e.Reason, "summary_for_supervisor") {
			t.Errorf("reason %q does not name the field", e.Reason)
		}
	})
	t.Run("501 multibyte runes", func(t *testing.T) {
		_, _, err := validate(answer("COMPLETED", []string{}, strings.Repeat("é", MaxSummary+1)), ws)
		_ = wantCode(t, err, codes.SchemaInvalid)
	})
	t.Run("500 chars", func(t *testing.T) {
		s := strings.Repeat("a", MaxSummary)
		a, _, err := validate(answer("COMPLETED", []string{}, s), ws)
		if err != nil || a.Summary != s {
			t.Fatalf("500 chars: %v", err)
		}
	})
	t.Run("500 multibyte runes", func(t *testing.T) {
		// 500 characters but 1500-2000 bytes: the limit is in characters.
		s := strings.Repeat("日", 250) + strings.Repeat("😀", 250)
		if len(s) <= MaxSummary {
			t.Fatal("test string is not multibyte")
		}
		a, _, err := validate(answer("COMPLETED", []string{}, s), ws)
		if err != nil {
			t.Fatalf("500 multibyte runes refused: %v", err)
		}
		if a.Summary != s {
			t.Errorf("summary altered")
		}
	})
}

// Layer order: an invalid action is reported as ACTION_INVALID even when the
// summary is also missing, and a missing summary before other schema errors.
func TestValidateLayerPrecedence(t *testing.T) {
	ws := workspace(t)
	_, _, err := validate([]byte(`{"action":"done"}`), ws)
	_ = wantCode(t, err, codes.ActionInvalid)
	_, _, err = validate([]byte(`{"action":"COMPLETED","evidence_files":"x"}`), ws)
	_ = wantCode(t, err, codes.SummaryMissing)
}

func TestValidateEvidence(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"leak":      filepath.Join(outside, "secret"),
		"outdir":    outside,
		"dangling":  filepath.Join(outside, "nope"),
		"inside":    "report.md",
		"src/up":    "..",
		"src/upper": "../..",
	}
	for link, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Skipf("symlinks unavailable: %v", err)
		}
	}

	t.Run("missing file warns and accepts", func(t *testing.T) {
		a, warns, err := validate(answer("COMPLETED", []string{"report.md", "nope.txt", "src/new/dir.go"}, "x"), ws)
		if err != nil {
			t.Fatalf("missing evidence refused: %v", err)
		}
		if a.Action != "COMPLETED" || len(a.EvidenceFiles) != 3 {
			t.Errorf("answer %+v", a)
		}
		if len(warns) != 2 {
			t.Fatalf("warnings %v, want 2", warns)
		}
		for i, name := range []string{"nope.txt", "src/new/dir.go"} {
			if warns[i].Code != "EVIDENCE_MISSING" || !strings.Contains(warns[i].Detail, name) {
				t.Errorf("warning %d = %+v, want EVIDENCE_MISSING naming %s", i, warns[i], name)
			}
		}
	})
	t.Run("path through a file warns", func(t *testing.T) {
		_, warns, err := validate(answer("COMPLETED", []string{"report.md/sub"}, "x"), ws)
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		if len(warns) != 1 || warns[0].Code != "EVIDENCE_MISSING" {
			t.Errorf("warnings %v", warns)
		}
	})
	t.Run("nested and symlinked inside ok", func(t *testing.T) {
		_, warns, err := validate(answer("STUCK", []string{"src/pkg/main.go", "inside", "src/up/report.md", "./src/../report.md"}, "x"), ws)
		if err != nil {
			t.Fatal(err)
		}
		if len(warns) != 0 {
			t.Errorf("warnings %v", warns)
		}
	})
	for name, p := range map[string]string{
		"dotdot":            "../x",
		"dotdot nested":     "src/../../x",
		"absolute":          "/etc/passwd",
		"symlink outside":   "leak",
		"dir link outside":  "outdir/secret",
		"missing via link":  "outdir/nothing",
		"dangling":          "dangling",
		"climb via symlink": "src/upper/x",
		"empty":             "",
		"nul":               "a\x00b",
	} {
		t.Run(name, func(t *testing.T) {
			a, warns, err := validate(answer("COMPLETED", []string{"report.md", p}, "x"), ws)
			if a != nil || warns != nil {
				t.Errorf("answer %v warnings %v returned with violation", a, warns)
			}
			e := wantCode(t, err, codes.ProtocolViolation)
			if !strings.Contains(e.Reason, "evidence_files") {
				t.Errorf("reason %q does not name evidence_files", e.Reason)
			}
		})
	}
}

func TestValidateMissingWorkspace(t *testing.T) {
	t.Parallel()
	_, _, err := validate(answer("COMPLETED", []string{"a"}, "x"), filepath.Join(t.TempDir(), "gone"))
	_ = wantCode(t, err, codes.ProtocolViolation)
	// Without evidence, the workspace is not consulted.
	if _, _, err := validate([]byte(okAnswer), filepath.Join(t.TempDir(), "gone")); err != nil {
		t.Errorf("no evidence, missing workspace: %v", err)
	}
}

// validate is Judge as the engine calls it for a base-contract answer in
// the workspace folder ws.
func validate(raw []byte, ws string) (*Answer, []Warning, error) {
	v := Judge(raw, Contract{Workspace: Dir(ws)})
	if v.Err != nil {
		return nil, nil, v.Err
	}
	return v.Answer, v.Warnings, nil
}

// An answer with a key twice is refused: Go would act on the last
// "action" while a person reading raw_response sees the first.
func TestDuplicateKeysAreRefused(t *testing.T) {
	for raw, want := range map[string]string{
		`{"action":"STUCK","action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"x"}`:                  `key "action" appears twice in the object at /`,
		`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"x","\u0061ction":"STUCK"}`:             `key "action" appears twice`,
		`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"x","m":[{"a/b":{"k":1,"k":2}}]}`:       `key "k" appears twice in the object at /m/0/a~1b`,
		`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"x","m":[{"k":1},{"k":2}],"n":{"k":3}}`: "",
	} {
		_, err := Extract([]byte(raw))
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", raw, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Code != codes.NotJSON || !strings.Contains(e.Reason, want) {
			t.Errorf("%s: %v, want NOT_JSON %q", raw, err, want)
		}
	}
}
