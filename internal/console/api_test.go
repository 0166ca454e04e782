package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/testkit"
)

// TestOpenAPIMatchesRoutes: every API route is in the document and every
// path and method of the document has a route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatal(err)
	}
	inDoc := map[string]bool{}
	for p, ops := range doc.Paths {
		for m := range ops {
			inDoc[strings.ToUpper(m)+" "+p] = true
		}
	}
	served := map[string]bool{}
	for _, r := range (&Console{}).routes() {
		if r.API {
			served[r.Method+" "+r.Pattern] = true
		}
	}
	for k := range inDoc {
		if !served[k] {
			t.Errorf("OpenAPI has %s, which no handler serves", k)
		}
	}
	for k := range served {
		if !inDoc[k] {
			t.Errorf("route %s is missing from openapi.json", k)
		}
	}
}

// TestAuthEveryRoute: anonymous gets 401 on every API route (the
// document itself excepted) and a redirect to the login page on every
// page; a viewer gets 403 on every action and reads what a steward reads.
func TestAuthEveryRoute(t *testing.T) {
	w := newWorld(t)
	fill := func(p string) string {
		return strings.NewReplacer("{id}", "stuck", "{file}", "console.css", "{$}", "").Replace(p)
	}
	for _, r := range w.c.routes() {
		path := fill(r.Pattern)
		if r.Pattern == "/api/v1/schedules/{id}/pause" || r.Pattern == "/api/v1/schedules/{id}/resume" {
			path = strings.Replace(r.Pattern, "{id}", "tpl", 1)
		}
		if r.Method == "GET" && (strings.HasSuffix(path, "/events") || strings.HasSuffix(path, "/history")) {
			path += "?limit=1" // not followed: a page of records
		}
		code, body := w.call(r.Method, path, "", map[string]any{})
		if r.Method == "GET" {
			code, body = w.call(r.Method, path, "", nil)
		}
		switch {
		case r.Public:
			if code == http.StatusUnauthorized && r.Method == "GET" {
				t.Errorf("%s %s: public route refused anonymous", r.Method, path)
			}
			continue
		case r.API:
			if code != http.StatusUnauthorized || errCode(body) != "unauthorized" {
				t.Errorf("%s %s anonymous: %d %v, want 401 unauthorized", r.Method, path, code, body)
			}
		default:
			if code != http.StatusSeeOther {
				t.Errorf("%s %s anonymous page: %d, want 303 to /login", r.Method, path, code)
			}
		}
		if r.Need == StewardRole {
			code, body = w.call(r.Method, path, viewerTok, map[string]any{"reason": "viewer tries"})
			if code != http.StatusForbidden || errCode(body) != "permission_denied" {
				t.Errorf("%s %s viewer: %d %v, want 403", r.Method, path, code, body)
			}
		}
	}
	// The viewer changed nothing.
	if m := w.k.Load("stuck"); m.Status != "INTERVENTION_REQUIRED" {
		t.Errorf("stuck is %s after the viewer's tries", m.Status)
	}
	// A wrong token and a wrong scheme are anonymous.
	if code, _ := w.call("GET", "/api/v1/jobs", "nope-nope-nope-nope", nil); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", code)
	}
	// A 401 names its scheme, and tells a wrong token from none.
	for tok, want := range map[string]string{"": `Bearer realm="logist"`, "nope-nope-nope-nope": `Bearer realm="logist", error="invalid_token"`} {
		req, _ := http.NewRequest("GET", w.srv.URL+"/api/v1/jobs", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		e, _ := body["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || got != want || strings.Contains(msg, "required") == (tok != "") {
			t.Errorf("token %q: %d WWW-Authenticate %q (want %q), %q", tok, resp.StatusCode, got, want, msg)
		}
	}
	if code, body := w.call("GET", "/api/v1/session", viewerTok, nil); code != 200 || body["role"] != "viewer" {
		t.Errorf("viewer session: %d %v", code, body)
	}
	// The scheme is case-insensitive (RFC 9110 11.1); another is none.
	for h, want := range map[string]int{"bearer " + viewerTok: 200, "BEARER " + viewerTok: 200, "Basic " + viewerTok: 401, "Bearer" + viewerTok: 401} {
		req, _ := http.NewRequest("GET", w.srv.URL+"/api/v1/session", nil)
		req.Header.Set("Authorization", h)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Authorization %q: %d, want %d", h, resp.StatusCode, want)
		}
	}
}

func TestListJobs(t *testing.T) {
	w := newWorld(t)
	ids := func(body map[string]any) []string {
		var out []string
		items, _ := body["items"].([]any)
		for _, it := range items {
			out = append(out, it.(map[string]any)["job_id"].(string))
		}
		return out
	}
	code, body := w.call("GET", "/api/v1/jobs", viewerTok, nil)
	if code != 200 || !slices.Equal(ids(body), []string{"done", "stuck", "tpl", "waiting"}) || body["total"] != 4.0 {
		t.Fatalf("all: %d %v", code, body)
	}
	// The items are logist list's (jobview.ListItem) with more beside.
	it := body["items"].([]any)[1].(map[string]any)
	for _, k := range []string{"job_id", "status", "current_phase", "metrics", "reason"} {
		if _, ok := it[k]; !ok {
			t.Errorf("item lacks %s: %v", k, it)
		}
	}
	for q, want := range map[string][]string{
		"status=SUCCESS":                          {"done"},
		"status=needs_you":                        {"stuck"},
		"status=PENDING,SUCCESS":                  {"done", "tpl", "waiting"},
		"text=KITTENS":                            {"waiting"},
		"limit=2&offset=1":                        {"stuck", "tpl"},
		"since=2999-01-01T00:00:00Z":              nil,
		"until=2999-01-01T00:00:00Z":              {"done", "stuck", "tpl", "waiting"}, // tpl and waiting never updated
		"workflow=no-such-workflow":               nil,
		"status=INTERVENTION_REQUIRED&text=human": {"stuck"},
	} {
		code, body := w.call("GET", "/api/v1/jobs?"+q, viewerTok, nil)
		if code != 200 || !slices.Equal(ids(body), want) {
			t.Errorf("%s: %d %v, want %v", q, code, ids(body), want)
		}
	}
	// since and until compare as times, whatever their form: done was
	// updated within the second t0 begins (its time has a fraction), and
	// t0 in another offset is the same time.
	up, err := time.Parse(time.RFC3339Nano, w.k.Load("done").Run.UpdatedAt)
	if err != nil {
		t.Fatal(err)
	}
	t0 := up.Truncate(time.Second)
	if t0.Equal(up) {
		up = up.Add(time.Nanosecond) // not seen: jobtx writes nanoseconds
	}
	plus1 := time.FixedZone("", 3600)
	for q, want := range map[string][]string{
		"since=" + t0.UTC().Format(time.RFC3339):                {"done"},
		"since=" + t0.In(plus1).Format(time.RFC3339):            {"done"},
		"until=" + t0.UTC().Format(time.RFC3339):                nil,
		"until=" + t0.Add(time.Second).Format(time.RFC3339):     {"done"},
		"since=" + up.Add(time.Second).Format(time.RFC3339Nano): nil,
	} {
		k, val, _ := strings.Cut(q, "=")
		v := url.Values{k: {val}, "status": {"SUCCESS"}}
		code, body := w.call("GET", "/api/v1/jobs?"+v.Encode(), viewerTok, nil)
		if code != 200 || !slices.Equal(ids(body), want) {
			t.Errorf("%s (done updated %s): %d %v, want %v", q, up.Format(time.RFC3339Nano), code, ids(body), want)
		}
	}
	if code, body := w.call("GET", "/api/v1/jobs?since=yesterday", viewerTok, nil); code != 400 || errCode(body) != "invalid" {
		t.Errorf("bad since: %d %v", code, body)
	}
	if code, _ := w.call("GET", "/api/v1/jobs?limit=-1", viewerTok, nil); code != 400 {
		t.Errorf("bad limit: %d", code)
	}
}

func TestJobDetailAndHistory(t *testing.T) {
	w := newWorld(t)
	code, body := w.call("GET", "/api/v1/jobs/done", viewerTok, nil)
	if code != 200 || jobStatus(body) != "SUCCESS" {
		t.Fatalf("done: %d %v", code, body)
	}
	cps, _ := body["checkpoints"].([]any)
	phases, _ := body["phases"].([]any)
	if len(cps) < 2 || len(phases) == 0 {
		t.Errorf("done: checkpoints %v phases %v", cps, phases)
	}
	if acts := body["actions"].([]any); !slices.Contains(acts, any("rollback")) || slices.Contains(acts, any("halt")) {
		t.Errorf("done's actions: %v", acts)
	}
	if code, body := w.call("GET", "/api/v1/jobs/nope", viewerTok, nil); code != 404 || errCode(body) != "not_found" {
		t.Errorf("missing job: %d %v", code, body)
	}
	if code, _ := w.call("GET", "/api/v1/jobs/a%01b", viewerTok, nil); code != 400 {
		t.Errorf("id with a control: %d", code)
	}

	recs := w.k.Records("done")
	code, body = w.call("GET", "/api/v1/jobs/done/history?limit=2", viewerTok, nil)
	items, _ := body["items"].([]any)
	if code != 200 || len(items) != 2 || body["more"] != true || body["next_after"] != float64(recs[1].Seq) {
		t.Fatalf("history page: %d %v", code, body)
	}
	code, body = w.call("GET", "/api/v1/jobs/done/history?after="+jsonNum(recs[len(recs)-2].Seq), viewerTok, nil)
	if items, _ := body["items"].([]any); code != 200 || len(items) != 1 || body["more"] != false {
		t.Errorf("history after: %d %v", code, body)
	}
	if code, _ := w.call("GET", "/api/v1/jobs/nope/history", viewerTok, nil); code != 404 {
		t.Errorf("history of a missing job: %d", code)
	}
	if code, _ := w.call("GET", "/api/v1/jobs/done/history?after=x", viewerTok, nil); code != 400 {
		t.Errorf("history after=x: %d", code)
	}
	// A page of 0 records would never move on: a client paging by
	// next_after while more is true would ask for it forever.
	if code, body := w.call("GET", "/api/v1/jobs/done/history?limit=0", viewerTok, nil); code != 400 || !strings.Contains(errMessage(body), `"limit"`) {
		t.Errorf("history limit=0: %d %v, want 400 naming limit", code, body)
	}
}

func errMessage(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	s, _ := e["message"].(string)
	return s
}

func jsonNum(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestHistoryFollow: the stream sends the records after `after`, then
// the ones committed later.
func TestHistoryFollow(t *testing.T) {
	w := newWorld(t)
	recs := w.k.Records("stuck")
	last := recs[len(recs)-1].Seq
	resp, ch, _ := stream(t, w.srv.URL+"/api/v1/jobs/stuck/history?follow=1&after="+jsonNum(last-1))
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	next := func() history.Record {
		t.Helper()
		select {
		case ev := <-ch:
			var r history.Record
			if ev[0] != "record" || json.Unmarshal([]byte(ev[1]), &r) != nil {
				t.Fatalf("event %v", ev)
			}
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no record")
		}
		return history.Record{}
	}
	if r := next(); r.Seq != last {
		t.Fatalf("first record %d, want %d", r.Seq, last)
	}
	if code, _ := w.call("POST", "/api/v1/jobs/stuck/halt", stewardTok, map[string]any{"reason": "enough"}); code != 200 {
		t.Fatal(code)
	}
	if r := next(); r.Seq <= last || r.Steward == nil || r.Steward.Reason != "enough" {
		t.Errorf("followed record %+v", r)
	}
}

func TestDiff(t *testing.T) {
	w := newWorld(t)
	cps := jobview.Checkpoints(w.k.Records("done"))
	if len(cps) < 3 {
		t.Fatalf("checkpoints %v", cps)
	}
	q := url.Values{"from": {cps[0].ID}, "to": {cps[len(cps)-1].ID}}
	code, body := w.call("GET", "/api/v1/jobs/done/diff?"+q.Encode(), viewerTok, nil)
	added, _ := body["added"].([]any)
	if code != 200 || !slices.Contains(added, any("a.txt")) || !slices.Contains(added, any("b.txt")) {
		t.Fatalf("diff: %d %v", code, body)
	}
	if code, body := w.call("GET", "/api/v1/jobs/done/diff?from=x", viewerTok, nil); code != 400 || errCode(body) != "invalid" {
		t.Errorf("diff without to: %d %v", code, body)
	}
	if code, _ := w.call("GET", "/api/v1/jobs/done/diff?from=nope&to="+cps[0].ID, viewerTok, nil); code != 404 {
		t.Errorf("diff from an unknown checkpoint: %d", code)
	}
}

func TestActions(t *testing.T) {
	w := newWorld(t, "pm")
	// resume with guidance and a raised budget
	code, body := w.call("POST", "/api/v1/jobs/stuck/resume", stewardTok, map[string]any{"guidance": "keep legacy_email", "cost_threshold": 500})
	if code != 200 || jobStatus(body) != "PENDING" {
		t.Fatalf("resume: %d %v", code, body)
	}
	if m := w.k.Load("stuck"); m.Run.Guidance != "keep legacy_email" || m.CostThreshold == nil || *m.CostThreshold != 500 {
		t.Errorf("resume left %+v", m.Run)
	}
	named := false
	for _, r := range w.k.Records("stuck") {
		if r.Steward != nil && r.Steward.Command == "resume" {
			named = r.Steward.User == "console" && r.Steward.Guidance == "keep legacy_email"
		}
	}
	if !named {
		t.Error("the resume's record does not name the console as who acted")
	}
	// again: out of order
	if code, body := w.call("POST", "/api/v1/jobs/stuck/resume", stewardTok, map[string]any{}); code != 409 || errCode(body) != "out_of_order" {
		t.Errorf("resume twice: %d %v", code, body)
	}
	if code, body := w.call("POST", "/api/v1/jobs/stuck/resume", stewardTok, map[string]any{"time_threshold_minutes": 0}); code != 400 {
		t.Errorf("resume with time 0: %d %v", code, body)
	}
	// the steward's one rule (steward.ResumeOptions.Check), in the API's names
	if code, body := w.call("POST", "/api/v1/jobs/stuck/resume", stewardTok, map[string]any{"cost_threshold": -1}); code != 400 ||
		!strings.Contains(body["error"].(map[string]any)["message"].(string), "cost_threshold must be a finite number of cents, at least 0") {
		t.Errorf("resume with a negative cost: %d %v", code, body)
	}
	// halt
	if code, body := w.call("POST", "/api/v1/jobs/waiting/halt", stewardTok, map[string]any{"reason": "not needed"}); code != 200 || jobStatus(body) != "CANCELED" {
		t.Errorf("halt: %d %v", code, body)
	}
	if code, _ := w.call("POST", "/api/v1/jobs/waiting/halt", stewardTok, map[string]any{}); code != 409 {
		t.Errorf("halt twice: %d", code)
	}
	// rollback
	cps := jobview.Checkpoints(w.k.Records("done"))
	code, body = w.call("POST", "/api/v1/jobs/done/rollback", stewardTok, map[string]any{"checkpoint": cps[1].ID, "reason": "again"})
	if code != 200 || jobStatus(body) != "PENDING" || body["checkpoint_id"] != cps[1].ID {
		t.Errorf("rollback: %d %v", code, body)
	}
	if code, _ := w.call("POST", "/api/v1/jobs/done/rollback", stewardTok, map[string]any{}); code != 400 {
		t.Errorf("rollback without checkpoint: %d", code)
	}
	// reply to a job that awaits none; a body with an unknown field
	if code, body := w.call("POST", "/api/v1/jobs/done/reply", stewardTok, map[string]any{"as": "worker", "answer": map[string]any{}}); code != 409 {
		t.Errorf("reply: %d %v", code, body)
	}
	if code, _ := w.call("POST", "/api/v1/jobs/done/reply", stewardTok, map[string]any{"to": "x"}); code != 400 {
		t.Errorf("unknown field: %d", code)
	}
	// a switched-off action: 403 whoever asks
	if code, body := w.call("POST", "/api/v1/jobs/done/pm", stewardTok, map[string]any{"decision": "approve"}); code != 403 || !strings.Contains(body["error"].(map[string]any)["message"].(string), "switched off") {
		t.Errorf("disabled pm: %d %v", code, body)
	}
	if code, _ := w.call("POST", "/api/v1/jobs/nope/halt", stewardTok, map[string]any{}); code != 404 {
		t.Errorf("halt a missing job: %d", code)
	}
}

func TestPMDecisionChecked(t *testing.T) {
	w := newWorld(t)
	if code, body := w.call("POST", "/api/v1/jobs/done/pm", stewardTok, map[string]any{"decision": "shrug"}); code != 400 || errCode(body) != "invalid" {
		t.Errorf("pm shrug: %d %v", code, body)
	}
}

func TestRollbackSwitchedOff(t *testing.T) {
	w := newWorld(t, "rollback")
	cps := jobview.Checkpoints(w.k.Records("done"))
	if code, _ := w.call("POST", "/api/v1/jobs/done/rollback", stewardTok, map[string]any{"checkpoint": cps[1].ID}); code != 403 {
		t.Errorf("rollback switched off: %d", code)
	}
	if m := w.k.Load("done"); m.Status != "SUCCESS" {
		t.Errorf("done is %s", m.Status)
	}
	_, body := w.call("GET", "/api/v1/jobs/done", stewardTok, nil)
	if slices.Contains(body["actions"].([]any), any("rollback")) {
		t.Errorf("a switched-off action is offered: %v", body["actions"])
	}
}

func TestBulk(t *testing.T) {
	w := newWorld(t)
	if code, _ := w.call("POST", "/api/v1/jobs:halt", stewardTok, map[string]any{}); code != 400 {
		t.Errorf("bulk halt without a filter: %d", code)
	}
	code, body := w.call("POST", "/api/v1/jobs:halt", stewardTok, map[string]any{"filter": map[string]any{"status": []string{"PENDING"}, "text": "kittens"}, "reason": "bulk"})
	items, _ := body["items"].([]any)
	if code != 200 || len(items) != 1 || w.k.Load("waiting").Status != "CANCELED" || w.k.Load("tpl").Status == "CANCELED" {
		t.Fatalf("bulk halt: %d %v", code, body)
	}
	code, body = w.call("POST", "/api/v1/jobs:resume", stewardTok, map[string]any{"filter": map[string]any{"status": []string{"NEEDS_YOU"}}, "guidance": "go"})
	if code != 200 || w.k.Load("stuck").Status != "PENDING" {
		t.Errorf("bulk resume: %d %v", code, body)
	}
}

func TestSchedules(t *testing.T) {
	w := newWorld(t)
	code, body := w.call("GET", "/api/v1/schedules", viewerTok, nil)
	if items, _ := body["items"].([]any); code != 200 || len(items) != 1 {
		t.Fatalf("schedules: %d %v", code, body)
	}
	if code, body := w.call("POST", "/api/v1/schedules/tpl/pause", stewardTok, map[string]any{"reason": "maintenance"}); code != 200 {
		t.Fatalf("pause: %d %v", code, body)
	}
	if st := w.k.Load("tpl").ScheduleState(); st != "paused" {
		t.Errorf("tpl is %s", st)
	}
	if code, _ := w.call("POST", "/api/v1/schedules/tpl/resume", stewardTok, map[string]any{}); code != 200 {
		t.Errorf("resume: %d", code)
	}
	if code, _ := w.call("POST", "/api/v1/schedules/done/pause", stewardTok, map[string]any{}); code < 400 {
		t.Errorf("pause a job that is no schedule: %d", code)
	}
}

// TestEvents: the stream says ready, then a job's transition.
func TestEvents(t *testing.T) {
	w := newWorld(t)
	_, ch, _ := stream(t, w.srv.URL+"/api/v1/events")
	if ev := <-ch; ev[0] != "ready" {
		t.Fatalf("first event %v", ev)
	}
	if code, _ := w.call("POST", "/api/v1/jobs/waiting/halt", stewardTok, map[string]any{}); code != 200 {
		t.Fatal(code)
	}
	select {
	case ev := <-ch:
		var it map[string]any
		_ = json.Unmarshal([]byte(ev[1]), &it)
		if ev[0] != "job" || it["job_id"] != "waiting" || it["status"] != "CANCELED" || it["previous_status"] != "PENDING" {
			t.Errorf("event %v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no job event")
	}
}

// TestAPIEscapesTerminalRunes: JSON carries agent text exactly, with the
// runes a terminal acts on \u-escaped (as logist --format json).
func TestAPIEscapesTerminalRunes(t *testing.T) {
	w := newWorld(t)
	req, _ := http.NewRequest("GET", w.srv.URL+"/api/v1/jobs/stuck", nil)
	req.Header.Set("Authorization", "Bearer "+viewerTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&raw)
	if strings.ContainsRune(string(raw), 0x1b) {
		t.Error("raw ESC in the API's JSON")
	}
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	if got := body["job"].(map[string]any)["run"].(map[string]any)["last_summary"]; got != hostile {
		t.Errorf("summary %q, want it exact", got)
	}
}

var _ = testkit.Logger

// TestVerify: the API and the job page report the history intact, and a
// tampered one as failed.
func TestVerify(t *testing.T) {
	w := newWorld(t)
	code, body := w.call("GET", "/api/v1/jobs/done/verify", viewerTok, nil)
	if code != 200 || body["intact"] != true || !strings.HasPrefix(body["message"].(string), "intact") {
		t.Fatalf("verify: %d %v", code, body)
	}
	if code, _ := w.call("GET", "/api/v1/jobs/nope/verify", viewerTok, nil); code != 404 {
		t.Errorf("verify a missing job: %d", code)
	}
	p := history.Path(w.k.Env.Store.JobDir("done"))
	b := readAll(t, p)
	tampered := strings.Replace(b, "wrote a.txt", "wrote b.txt", 1)
	if tampered == b {
		t.Fatal("nothing to tamper with")
	}
	writeAll(t, p, tampered)
	if code, body := w.call("GET", "/api/v1/jobs/done/verify", viewerTok, nil); code != 200 || body["intact"] != false || !regexp.MustCompile(`^FAILED: first bad record \d+: HASH_MISMATCH`).MatchString(body["message"].(string)) {
		t.Errorf("verify tampered: %d %v", code, body)
	}
}

// A page's resume form parses its budgets as numbers, NaN and infinity
// among them: the steward's one rule refuses them as the API's JSON does.
func TestResumeFormRefusesABudgetThatIsNone(t *testing.T) {
	w := newWorld(t)
	cl := w.browser()
	csrf := w.login(cl, stewardTok)
	for _, v := range []string{"NaN", "+Inf", "-1"} {
		resp, err := cl.PostForm(w.srv.URL+"/jobs/stuck/resume", url.Values{"csrf": {csrf}, "cost_threshold": {v}})
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(page), "cost_threshold must be a finite number of cents, at least 0") {
			t.Fatalf("cost_threshold=%s: %d %s", v, resp.StatusCode, page)
		}
	}
	if m := w.k.Load("stuck"); m.Status != "INTERVENTION_REQUIRED" {
		t.Fatalf("stuck resumed by a refused form: %s", m.Status)
	}
}

// TestNotFoundNamesTheJobOnce: every route of a job that does not exist
// answers 404 saying so once, as GET /api/v1/jobs/{id} does (history,
// diff and verify said "job nope: job nope: not found").
func TestNotFoundNamesTheJobOnce(t *testing.T) {
	w := newWorld(t)
	for _, p := range []string{"", "/history", "/diff?from=a&to=b", "/verify"} {
		code, body := w.call("GET", "/api/v1/jobs/nope"+p, viewerTok, nil)
		e, _ := body["error"].(map[string]any)
		if code != http.StatusNotFound || e["message"] != "job nope: not found" {
			t.Errorf("GET /api/v1/jobs/nope%s: %d %v, want 404 \"job nope: not found\"", p, code, e)
		}
	}
}

// TestHistoryStreamWritesOneAtATime: the history stream's pings
// (keepAlive, its own goroutine) and records are written one at a time:
// they shared the ResponseWriter unlocked, a data race that -race
// reports and that could cut an event with a ping.
func TestHistoryStreamWritesOneAtATime(t *testing.T) {
	w := newWorld(t)
	c := New(w.c.o)
	c.keepAlive = 50 * time.Microsecond
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	for i := range 20 {
		if code, _ := w.call("POST", "/api/v1/schedules/tpl/"+[]string{"pause", "resume"}[i%2], stewardTok, map[string]any{}); code != 200 {
			t.Fatalf("schedule %d: %d", i, code)
		}
	}
	want := len(w.k.Records("tpl"))
	_, ch, _ := stream(t, srv.URL+"/api/v1/jobs/tpl/history?follow=1")
	for got := 0; got < want; got++ {
		ev, open := <-ch
		var r history.Record
		if !open || ev[0] != "record" || json.Unmarshal([]byte(ev[1]), &r) != nil || r.Seq != int64(got) {
			t.Fatalf("event %d of %d: %v (open %v)", got, want, ev, open)
		}
	}
}

// TestHistoryStreamRefusesALimit: a stream sends every record, so a
// limit it would ignore is 400 (it streamed them all).
func TestHistoryStreamRefusesALimit(t *testing.T) {
	w := newWorld(t)
	for _, accept := range []string{"", "text/event-stream"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		u := "/api/v1/jobs/done/history?limit=1"
		if accept == "" {
			u += "&follow=1"
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", w.srv.URL+u, nil)
		req.Header.Set("Authorization", "Bearer "+viewerTok)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(errMessage(body), `"limit": a page's, not a stream's`) {
			t.Errorf("%s (Accept %q): %d %s, want 400 naming limit", u, accept, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}

// TestHistoryFollowLastEventID: a reconnect's Last-Event-ID goes on
// after that record; one that is no record's seq leaves the query's
// after (it sent the history again from its first record).
func TestHistoryFollowLastEventID(t *testing.T) {
	w := newWorld(t)
	recs := w.k.Records("stuck")
	last := recs[len(recs)-1].Seq
	for lastID, want := range map[string]int64{"junk": last, jsonNum(last - 2): last - 1} {
		_, ch, end := stream(t, w.srv.URL+"/api/v1/jobs/stuck/history?follow=1&after="+jsonNum(last-1), "Last-Event-ID", lastID)
		ev := <-ch
		var r history.Record
		if err := json.Unmarshal([]byte(ev[1]), &r); err != nil || r.Seq != want {
			t.Errorf("Last-Event-ID %q: first record %v, want seq %d", lastID, ev, want)
		}
		end()
	}
}

// TestBulkSwitchedOff: a bulk action switched off is 403, as one job's
// is, and does nothing (it was 200 with each selected job refused).
func TestBulkSwitchedOff(t *testing.T) {
	w := newWorld(t, "halt")
	code, body := w.call("POST", "/api/v1/jobs:halt", stewardTok, map[string]any{"all": true})
	if code != http.StatusForbidden || errCode(body) != "permission_denied" || !strings.Contains(errMessage(body), "--console-disable halt") {
		t.Errorf("jobs:halt switched off: %d %v, want 403 permission_denied", code, body)
	}
	if m := w.k.Load("waiting"); m.Status != "PENDING" {
		t.Errorf("waiting is %s", m.Status)
	}
}

// TestHistoryFollowDecides: follow, when given, decides between the page
// and the stream whatever Accept says (follow=0 with Accept:
// text/event-stream streamed); without it, Accept does.
func TestHistoryFollowDecides(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		query, accept string
		stream        bool
	}{
		{"?follow=0", "text/event-stream", false},
		{"?follow=0&limit=1", "text/event-stream", false},
		{"?follow=0", "", false},
		{"?follow=", "text/event-stream", true}, // empty: no value
		{"", "text/event-stream", true},
		{"", "", false},
		{"?follow=1", "", true},
		{"?follow=1", "application/json", true},
	} {
		u := w.srv.URL + "/api/v1/jobs/done/history" + tc.query
		if tc.stream {
			resp, ch, end := stream(t, u, "Accept", tc.accept)
			ev := <-ch
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || ev[0] != "record" {
				t.Errorf("%s (Accept %q): %d %q, first event %v, want a stream", tc.query, tc.accept, resp.StatusCode, ct, ev)
			}
			end()
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+viewerTok)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s (Accept %q): %v (a stream that did not end?)", tc.query, tc.accept, err)
		}
		var body map[string]any
		derr := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		cancel()
		items, _ := body["items"].([]any)
		want := len(w.k.Records("done"))
		if strings.Contains(tc.query, "limit=1") {
			want = 1
		}
		if derr != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || body["ok"] != true || len(items) != want {
			t.Errorf("%s (Accept %q): %d %q %d items (%v), want a JSON page of %d", tc.query, tc.accept, resp.StatusCode, resp.Header.Get("Content-Type"), len(items), derr, want)
		}
	}
}

// TestListNamesNoServerPath: the listing's message tells a viewer how
// many jobs there are, not where the server keeps them (it named the
// jobs folder's path, as logist list does on the server's own machine).
func TestListNamesNoServerPath(t *testing.T) {
	w := newWorld(t)
	for _, tok := range []string{viewerTok, stewardTok} {
		code, body := w.call("GET", "/api/v1/jobs", tok, nil)
		msg, _ := body["message"].(string)
		if code != 200 || msg != "4 jobs in the jobs folder" {
			t.Errorf("message %q (%d), want \"4 jobs in the jobs folder\"", msg, code)
		}
		b, _ := json.Marshal(body)
		if strings.Contains(string(b), w.k.Dir) || strings.Contains(string(b), w.c.o.Store.Dir) {
			t.Errorf("the listing names the server's jobs folder %s: %s", w.k.Dir, b)
		}
	}
}

// TestDiffCut: a git workspace's diff over maxDiffText is cut at the end
// of the last line that fits, and the API says so (diff_truncated, the
// whole size in diff_bytes), as the page does; a smaller one is whole.
// openapi.json says the limit.
func TestDiffCut(t *testing.T) {
	w := newWorld(t)
	repo := testkit.GitRepo(t)
	var big strings.Builder
	for i := 0; big.Len() <= maxDiffText+maxDiffText/2; i++ {
		fmt.Fprintf(&big, "line %d of a file the worker rewrites whole\n", i)
	}
	writeAll(t, filepath.Join(repo, "big.txt"), big.String())
	testkit.Git(t, repo, "add", "big.txt")
	testkit.Git(t, repo, "commit", "-q", "-m", "big")
	step := testkit.Step("COMPLETED", "rewrote big.txt", "big.txt")
	step["files"] = map[string]string{"big.txt": "small now\n"}
	w.k.WriteJob("g", map[string]any{
		"workspace": map[string]any{"git": map[string]any{"repo": repo}},
		"agents":    map[string]any{"worker": testkit.Script(step), "supervisor": testkit.Script(testkit.Step("COMPLETED", "fine"))},
	})
	w.k.Run("g")
	cps := jobview.Checkpoints(w.k.Records("g"))
	if len(cps) < 2 {
		t.Fatalf("checkpoints %v", cps)
	}
	diff := func(from, to string) (int, map[string]any) {
		return w.call("GET", "/api/v1/jobs/g/diff?"+url.Values{"from": {from}, "to": {to}}.Encode(), viewerTok, nil)
	}
	code, body := diff(cps[0].ID, cps[len(cps)-1].ID)
	text, _ := body["diff"].(string)
	whole, _ := body["diff_bytes"].(float64)
	if code != 200 || body["diff_truncated"] != true || len(text) > maxDiffText || len(text) < maxDiffText-200 || !strings.HasSuffix(text, "\n") || int(whole) <= maxDiffText+maxDiffText/2 {
		t.Fatalf("big diff: %d, %d bytes shown, truncated %v, diff_bytes %v", code, len(text), body["diff_truncated"], body["diff_bytes"])
	}
	if !strings.Contains(text, "big.txt") || !strings.Contains(text, "-line 0 of a file") {
		t.Errorf("the cut diff does not begin as the diff does: %.300s", text)
	}
	// The page says it is cut, and how to see it whole.
	cl := w.browser()
	w.login(cl, viewerTok)
	_, page := get(t, cl, w.srv.URL+"/jobs/g/diff?"+url.Values{"from": {cps[0].ID}, "to": {cps[len(cps)-1].ID}}.Encode())
	if !strings.Contains(page, `id="patch-cut"`) || !strings.Contains(page, fmt.Sprintf("cut at %d bytes (it has %d)", maxDiffText, int(whole))) || len(page) > maxDiffText+maxDiffText/4 {
		t.Errorf("the page of a cut diff (%d bytes) does not say so: %.2000s", len(page), page)
	}
	// A diff under the limit is whole.
	code, body = diff(cps[0].ID, cps[0].ID)
	if code != 200 || body["diff_truncated"] != false || body["diff_bytes"] != float64(len(body["diff"].(string))) {
		t.Errorf("small diff: %d truncated %v diff_bytes %v", code, body["diff_truncated"], body["diff_bytes"])
	}
	if limit := fmt.Sprintf("at most 1 MiB (%d bytes)", maxDiffText); maxDiffText != 1<<20 || !strings.Contains(string(openapiDoc), limit) {
		t.Errorf("openapi.json does not say %q", limit)
	}
}

// TestCutDiff: a diff is cut at a line's end, or, a first line longer
// than the limit, at a rune's start.
func TestCutDiff(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
		cut  bool
	}{
		{"a\nb\n", 4, "a\nb\n", false},
		{"a\nbc\n", 4, "a\n", true},
		{"abcdef", 4, "abcd", true},
		{"ab€def", 4, "ab", true}, // € is 3 bytes: not split
		{"", 0, "", false},
	} {
		got, cut := cutDiff(tc.in, tc.max)
		if got != tc.want || cut != tc.cut {
			t.Errorf("cutDiff(%q, %d) = %q %v, want %q %v", tc.in, tc.max, got, cut, tc.want, tc.cut)
		}
	}
}

// TestSchedulesPaged: GET /api/v1/schedules pages as GET /api/v1/jobs
// does (offset, limit, total), and refuses what the listing refuses.
func TestSchedulesPaged(t *testing.T) {
	w := newWorld(t)
	for _, id := range []string{"tpl2", "tpl3"} {
		w.k.WriteJob(id, map[string]any{"schedule": map[string]any{"cron": "@daily"}})
	}
	ids := func(body map[string]any) []string {
		var out []string
		items, _ := body["items"].([]any)
		for _, it := range items {
			out = append(out, it.(map[string]any)["job_id"].(string))
		}
		return out
	}
	for q, want := range map[string][]string{
		"":                  {"tpl", "tpl2", "tpl3"},
		"?limit=2":          {"tpl", "tpl2"},
		"?offset=1&limit=1": {"tpl2"},
		"?offset=9":         nil,
		"?limit=0":          nil,
	} {
		code, body := w.call("GET", "/api/v1/schedules"+q, viewerTok, nil)
		if code != 200 || !slices.Equal(ids(body), want) || body["total"] != 3.0 {
			t.Errorf("%q: %d %v total %v, want %v of 3", q, code, ids(body), body["total"], want)
		}
	}
	code, body := w.call("GET", "/api/v1/schedules", viewerTok, nil)
	if body["offset"] != 0.0 || body["limit"] != 100.0 {
		t.Errorf("defaults: %d offset %v limit %v, want 0 and 100", code, body["offset"], body["limit"])
	}
	for _, q := range []string{"?limit=x", "?offset=-1", "?status=PENDING", "?limit=1&limit=2"} {
		if code, body := w.call("GET", "/api/v1/schedules"+q, viewerTok, nil); code != 400 || errCode(body) != "invalid" {
			t.Errorf("%q: %d %v, want 400", q, code, body)
		}
	}
}
