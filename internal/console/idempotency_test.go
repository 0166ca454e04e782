package console

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/logist/logist/internal/jobview"
)

// keyed posts body to path with an Idempotency-Key header.
func (w *world) keyed(path, key string, body any) (int, map[string]any) {
	w.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", w.srv.URL+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+stewardTok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// TestIdempotencyKeyFileMode: in file mode the console remembers a key:
// the same halt again answers 200 with the job and "repeat" (one record,
// not a 409 for halting a CANCELED job), another command with the key is
// 409 idempotency_conflict, and a bad key is 400.
func TestIdempotencyKeyFileMode(t *testing.T) {
	w := newWorld(t)
	code, first := w.keyed("/api/v1/jobs/waiting/halt", "k-1", map[string]any{"reason": "not needed"})
	if code != 200 || jobStatus(first) != "CANCELED" {
		t.Fatalf("halt: %d %v", code, first)
	}
	code, again := w.keyed("/api/v1/jobs/waiting/halt", "k-1", map[string]any{"reason": "not needed"})
	if code != 200 || jobStatus(again) != "CANCELED" || again["repeat"] != true || again["message"] != first["message"] {
		t.Fatalf("the same halt with the same key: %d %v", code, again)
	}
	halts := 0
	for _, r := range w.k.Records("waiting") {
		if r.Steward != nil && r.Steward.Command == "halt" {
			halts++
		}
	}
	if halts != 1 {
		t.Fatalf("%d halt records, want 1", halts)
	}
	code, body := w.keyed("/api/v1/jobs/waiting/halt", "k-1", map[string]any{"reason": "another reason"})
	if code != http.StatusConflict || errCode(body) != "idempotency_conflict" {
		t.Fatalf("another command with the key: %d %v", code, body)
	}
	// Its exit_code is the CLI's for the same refusal (out of order, 2).
	if e, _ := body["error"].(map[string]any); e["exit_code"] != float64(jobview.ExitOutOfOrder) {
		t.Errorf("idempotency_conflict's exit_code %v, want %d as logist's", e["exit_code"], jobview.ExitOutOfOrder)
	}
	if code, body := w.keyed("/api/v1/jobs/stuck/resume", "k-1", map[string]any{}); code != http.StatusConflict || errCode(body) != "idempotency_conflict" {
		t.Fatalf("another job's command with the key: %d %v", code, body)
	}
	if m := w.k.Load("stuck"); m.Status != "INTERVENTION_REQUIRED" {
		t.Fatalf("stuck changed by a refused command: %s", m.Status)
	}
	if code, _ := w.keyed("/api/v1/jobs/stuck/resume", "bad key", map[string]any{}); code != http.StatusBadRequest {
		t.Fatalf("a key with a space: %d", code)
	}
	// A refused command does not use its key up.
	if code, _ := w.keyed("/api/v1/jobs/waiting/halt", "k-2", map[string]any{}); code != http.StatusConflict {
		t.Fatalf("halt of a CANCELED job: %d", code)
	}
	if code, body := w.keyed("/api/v1/jobs/stuck/resume", "k-2", map[string]any{}); code != 200 || jobStatus(body) != "PENDING" {
		t.Fatalf("resume under a key a refused command had: %d %v", code, body)
	}
}

// TestPageFormsCarryKeys: every form of a steward's action on a page has
// an idempotency_key of its own, and a form's double submit is one
// command.
func TestPageFormsCarryKeys(t *testing.T) {
	w := newWorld(t)
	cl := w.browser()
	csrf := w.login(cl, stewardTok)
	resp, err := cl.Get(w.srv.URL + "/jobs/waiting")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	forms := regexp.MustCompile(`(?s)<form method="post" action="/(?:jobs|schedules)/[^"]*".*?</form>`).FindAllString(string(page), -1)
	if len(forms) == 0 {
		t.Fatal("the job page shows no action form")
	}
	keys := map[string]bool{}
	for _, f := range forms {
		m := regexp.MustCompile(`name="idempotency_key" value="([0-9a-f]{32})"`).FindStringSubmatch(f)
		if m == nil {
			t.Fatalf("a form without an idempotency key: %s", f)
		}
		if keys[m[1]] {
			t.Fatalf("two forms share key %s", m[1])
		}
		keys[m[1]] = true
	}
	key := regexp.MustCompile(`action="/jobs/waiting/halt"(?s:.*?)name="idempotency_key" value="([0-9a-f]{32})"`).FindStringSubmatch(string(page))
	if key == nil {
		t.Fatal("no halt form on waiting's page")
	}
	for i := range 2 {
		resp, err := cl.PostForm(w.srv.URL+"/jobs/waiting/halt", url.Values{"csrf": {csrf}, "idempotency_key": {key[1]}, "reason": {"twice"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("submit %d: %d, want the redirect to the job's page", i+1, resp.StatusCode)
		}
	}
	halts := 0
	for _, r := range w.k.Records("waiting") {
		if r.Steward != nil && r.Steward.Command == "halt" && strings.Contains(r.Steward.Reason, "twice") {
			halts++
		}
	}
	if halts != 1 {
		t.Fatalf("a double submit recorded %d halts, want 1", halts)
	}
}
