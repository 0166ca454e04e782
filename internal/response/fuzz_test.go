package response

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/jsonkeys"
	"github.com/logist/logist/schemas/schemastest"
)

var fuzzSeeds = []string{
	"",
	" ",
	"\xef\xbb\xbf",
	okAnswer,
	"\xef\xbb\xbf" + okAnswer,
	"```json\n" + okAnswer + "\n```",
	"```\n```",
	"```json\n```\n```",
	okAnswer + okAnswer,
	`[]`,
	`"x"`,
	`null`,
	`{"action":"completed","evidence_files":[],"summary_for_supervisor":"x"}`,
	`{"action":"RETRY","evidence_files":["../x","/etc/passwd"],"summary_for_supervisor":"x"}`,
	`{"action":"STUCK","evidence_files":["a.txt","link","sub/f"],"summary_for_supervisor":" "}`,
	`{"action":"COMPLETED","evidence_files":["a.txt/x"],"summary_for_supervisor":"x","cost_usd":1e400}`,
	`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"\ud800"}`,
	"{\"action\":\"COMPLETED\",\"evidence_files\":[],\"summary_for_supervisor\":\"\xff\xfe\"}",
	`{"action":"COMPLETED","evidence_files":{},"summary_for_supervisor":5}`,
	`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"x","cost_usd":1e1000001,"tokens":[1e999999,-1e-1000001]}`,
	`{"action":"STUCK","action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"x"}`,
	`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"x","m":[{"a/b":{"k":1,"k":2}}]}`,
}

func FuzzResponseExtract(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		obj, err := Extract(raw)
		if err != nil {
			if obj != nil {
				t.Fatalf("object %v returned with error %v", obj, err)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is %T, not *Error", err, err)
			}
			switch e.Code {
			case codes.AgentEmpty, codes.NotJSON, codes.SeveralObjects:
			default:
				t.Fatalf("Extract returned code %s", e.Code)
			}
			return
		}
		if obj == nil {
			t.Fatal("nil object without error")
		}
		// Accepted, its keys are distinct: re-encoded, it has as many as
		// the raw text's objects did (a duplicate would have been dropped).
		if key, _ := jsonkeys.Duplicate(bytes.TrimSpace(bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")))); key != "" && !bytes.Contains(raw, []byte("```")) {
			t.Fatalf("accepted with key %q twice", key)
		}
		// Extraction is idempotent on its own output's shape: an accepted
		// answer wrapped in a fence is still accepted.
		body := bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
		if _, err := Extract(append(append([]byte("```json\n"), body...), "\n```"...)); err != nil && !bytes.Contains(body, []byte("```")) {
			t.Fatalf("accepted answer refused once fenced: %v", err)
		}
	})
}

func FuzzResponseValidate(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	ws, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	outside := f.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
		f.Fatal(err)
	}
	for _, p := range []string{"a.txt", "sub/f"} {
		if err := os.WriteFile(filepath.Join(ws, p), []byte("x"), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	_ = os.Symlink(outside, filepath.Join(ws, "link"))

	f.Fuzz(func(t *testing.T, raw []byte) {
		defer schemastest.NoFault(t)()
		a, warns, err := validate(raw, ws)
		if err != nil {
			if a != nil || warns != nil {
				t.Fatalf("answer %v / warnings %v with error %v", a, warns, err)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is %T, not *Error", err, err)
			}
			if !slices.Contains(Codes, e.Code) {
				t.Fatalf("code %s is not in Codes", e.Code)
			}
			return
		}
		switch a.Action {
		case "COMPLETED", "STUCK", "RETRY":
		default:
			t.Fatalf("accepted action %q", a.Action)
		}
		if n := utf8.RuneCountInString(a.Summary); n > MaxSummary || n == 0 {
			t.Fatalf("accepted summary of %d characters", n)
		}
		if a.EvidenceFiles == nil {
			t.Fatal("accepted answer with nil EvidenceFiles")
		}
		if a.CostUSD != nil && *a.CostUSD < 0 {
			t.Fatalf("accepted negative cost %v", *a.CostUSD)
		}
		for _, w := range warns {
			if w.Code != "EVIDENCE_MISSING" {
				t.Fatalf("warning %+v", w)
			}
		}
		if len(warns) > len(a.EvidenceFiles) {
			t.Fatalf("%d warnings for %d evidence files", len(warns), len(a.EvidenceFiles))
		}
	})
}
