package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/steward"
)

// TestStewardTextLimits: a reason or guidance over its limit (characters,
// steward.TextLimits) is 400 naming the field, its length and the limit,
// through every body that carries it (a job's action, a bulk action, a
// schedule's, a page's form), and nothing is done; one of the limit is
// taken, and the manifest keeps it once. Before, a halt reason of half a
// MiB (under the 4 MiB body cap) was taken and failed as "manifest too
// large": the manifest held it twice (run.reason, the audit note).
func TestStewardTextLimits(t *testing.T) {
	w := newWorld(t)
	// "<" is the worst case for the manifest: JSON writes it \u003c.
	over := func(field string) string { return strings.Repeat("<", steward.TextLimits[field]+1) }
	want := func(field string) string {
		n := steward.TextLimits[field]
		return fmt.Sprintf("%s is %d characters long, more than the limit of %d", field, n+1, n)
	}
	for _, c := range []struct{ path, id, field string }{
		{"/api/v1/jobs/waiting/halt", "waiting", "reason"},
		{"/api/v1/jobs/stuck/resume", "stuck", "guidance"},
		{"/api/v1/jobs/stuck/rollback", "stuck", "reason"},
		{"/api/v1/jobs/stuck/rollback", "stuck", "guidance"},
		{"/api/v1/jobs:halt", "waiting", "reason"},
		{"/api/v1/jobs:resume", "stuck", "guidance"},
		{"/api/v1/schedules/tpl/pause", "tpl", "reason"},
	} {
		same := w.keep(c.id)
		body := map[string]any{c.field: over(c.field)}
		if strings.Contains(c.path, ":") {
			body["filter"] = map[string]any{"text": c.id}
		}
		if strings.HasSuffix(c.path, "/rollback") {
			body["checkpoint"] = "cp-start"
		}
		code, out := w.call("POST", c.path, stewardTok, body)
		e, _ := out["error"].(map[string]any)
		if msg, _ := e["message"].(string); code != http.StatusBadRequest || msg != want(c.field) {
			t.Fatalf("%s with %s over the limit: %d %v", c.path, c.field, code, out)
		}
		same(c.path + " over the limit")
	}
	// A play move's reason (a vote's), in its answer, by the same rule
	// with the game's limit, its vote schema's (before, a steward's 4000:
	// one of 2001 passed, to be refused late by the schema's 2000).
	same := w.keep("waiting")
	vl := steward.MaxVoteReasonChars
	vcode, vout := w.call("POST", "/api/v1/jobs/waiting/play", stewardTok, map[string]any{"as": "estoria",
		"answer": map[string]any{"vote": "YES", "reason": strings.Repeat("<", vl+1)}})
	if e, _ := vout["error"].(map[string]any); vcode != http.StatusBadRequest || e["message"] != fmt.Sprintf("reason is %d characters long, more than the limit of %d", vl+1, vl) {
		t.Fatalf("a vote with a reason over the limit: %d %v", vcode, vout)
	}
	same("a vote over the limit")
	// A page's form, by the same rule.
	same = w.keep("waiting")
	resp, page := w.raw(nil, "", "POST", "/jobs/waiting/halt", stewardTok, formType, url.Values{"reason": {over("reason")}}.Encode())
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(page), want("reason")) {
		t.Fatalf("a page's halt with a reason over the limit: %d %s", resp.StatusCode, page)
	}
	same("a page's halt over the limit")

	// At the limit: taken, and in the manifest once (the audit note an
	// excerpt; history.jsonl keeps the whole text).
	guidance := strings.Repeat("<", steward.MaxGuidanceChars)
	if code, out := w.call("POST", "/api/v1/jobs/stuck/resume", stewardTok, map[string]any{"guidance": guidance}); code != http.StatusOK {
		t.Fatalf("resume with guidance of the limit: %d %v", code, out)
	}
	if m := w.k.Load("stuck"); m.Run.Guidance != guidance {
		t.Fatalf("resume kept guidance of %d bytes", len(m.Run.Guidance))
	}
	reason := strings.Repeat("é", steward.MaxReasonChars) // 2 bytes a character: counted as one
	if code, out := w.call("POST", "/api/v1/jobs/waiting/halt", stewardTok, map[string]any{"reason": reason}); code != http.StatusOK {
		t.Fatalf("halt with a reason of the limit: %d %v", code, out)
	}
	m := w.k.Load("waiting")
	last := m.History[len(m.History)-1]
	if m.Status != "CANCELED" || m.Run.Reason != reason || len(last.Note) > manifest.MaxAuditNote+len("…[truncated]") || !strings.HasSuffix(last.Note, "…[truncated]") {
		t.Fatalf("halt of the limit: %s, reason of %d bytes, audit note of %d bytes", m.Status, len(m.Run.Reason), len(last.Note))
	}
	code, out := w.call("POST", "/api/v1/schedules/tpl/pause", stewardTok, map[string]any{"reason": strings.Repeat("<", steward.MaxReasonChars)})
	if code != http.StatusOK {
		t.Fatalf("pause with a reason of the limit: %d %v", code, out)
	}
}

// TestOpenAPITextLimitsAreTheStewards: every body the document describes
// states a reason's and a guidance's limit as steward.TextLimits has it.
func TestOpenAPITextLimitsAreTheStewards(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					MaxLength *int `json:"maxLength"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for name, s := range doc.Components.Schemas {
		for field, limit := range steward.TextLimits {
			p, ok := s.Properties[field]
			if !ok {
				continue
			}
			seen++
			if p.MaxLength == nil || *p.MaxLength != limit {
				t.Errorf("%s.%s: maxLength %v, the steward's limit is %d", name, field, p.MaxLength, limit)
			}
		}
	}
	if seen == 0 {
		t.Fatal("openapi.json describes no reason or guidance")
	}
}
