package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/logist/logist/internal/testkit"
)

// raw sends body as it is, with Content-Type ct ("" for none), by a
// Bearer token or (cl set) a browser's session with its CSRF header.
func (w *world) raw(cl *http.Client, csrf, method, path, tok, ct, body string) (*http.Response, []byte) {
	w.t.Helper()
	req, _ := http.NewRequest(method, w.srv.URL+path, strings.NewReader(body))
	if body == "" {
		req, _ = http.NewRequest(method, w.srv.URL+path, nil)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if csrf != "" {
		req.Header.Set(csrfHeader, csrf)
	}
	if cl == nil {
		cl = w.browser()
	}
	resp, err := cl.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// keep notes job id's status, schedule state and records, and checks
// they are still the same.
func (w *world) keep(id string) func(why string) {
	w.t.Helper()
	m := w.k.Load(id)
	st, sched, n := m.Status, m.ScheduleState(), len(w.k.Records(id))
	return func(why string) {
		w.t.Helper()
		m := w.k.Load(id)
		if m.Status != st || m.ScheduleState() != sched || len(w.k.Records(id)) != n {
			w.t.Fatalf("%s changed %s: %s/%s and %d records, was %s/%s and %d", why, id, m.Status, m.ScheduleState(), len(w.k.Records(id)), st, sched, n)
		}
	}
}

// apiRefusal checks an API's refusal: status, the JSON error envelope
// with code and a message holding msg, and no redirect.
func apiRefusal(t *testing.T, why string, resp *http.Response, body []byte, status int, code, msg string) {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil || env["ok"] != false {
		t.Fatalf("%s: %d, not the JSON error envelope: %s", why, resp.StatusCode, body)
	}
	e, _ := env["error"].(map[string]any)
	m, _ := e["message"].(string)
	if resp.StatusCode != status || e["code"] != code || !strings.Contains(m, msg) {
		t.Fatalf("%s: %d %s %q, want %d %s %q", why, resp.StatusCode, e["code"], m, status, code, msg)
	}
	if loc := resp.Header.Get("Location"); loc != "" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s: Location %q, Content-Type %q", why, loc, resp.Header.Get("Content-Type"))
	}
}

func multipartBody(fields map[string]string) (string, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	_ = mw.Close()
	return mw.FormDataContentType(), b.String()
}

// TestAPITakesOnlyJSON: a body the API did not decode as JSON (curl's
// default form encoding, a multipart form, text, no Content-Type) is 415
// in the JSON envelope, never a redirect, and nothing is done: the audit
// saw resume run and its guidance dropped.
func TestAPITakesOnlyJSON(t *testing.T) {
	w := newWorld(t)
	mct, mbody := multipartBody(map[string]string{"guidance": "Use the staging DB"})
	bodies := []struct{ ct, body, msg string }{
		{"application/x-www-form-urlencoded", `{"guidance":"Use the staging DB"}`, "body: Content-Type application/x-www-form-urlencoded: the API takes application/json"},
		{"application/x-www-form-urlencoded", "guidnce=typo", "body: Content-Type application/x-www-form-urlencoded: the API takes application/json"},
		{"application/x-www-form-urlencoded", "guidance=Use+the+staging+DB", "the API takes application/json"},
		{mct, mbody, "body: Content-Type multipart/form-data: the API takes application/json"},
		{"text/plain", `{"guidance":"Use the staging DB"}`, "body: Content-Type text/plain: the API takes application/json"},
		{"", `{"guidance":"Use the staging DB"}`, "body: no Content-Type: the API takes application/json"},
		{"application/json; charset=latin1", `{"guidance":"Use the staging DB"}`, "charset"},
		{"application/jsonx", `{}`, "the API takes application/json"},
		{"application/x-www-form-urlencoded", "", "the API takes application/json"},
	}
	routes := []struct{ path, id string }{
		{"/api/v1/jobs/stuck/resume", "stuck"},
		{"/api/v1/jobs:resume", "stuck"},
		{"/api/v1/jobs/waiting/halt", "waiting"},
		{"/api/v1/schedules/tpl/pause", "tpl"},
	}
	for _, rt := range routes {
		same := w.keep(rt.id)
		for _, b := range bodies {
			why := rt.path + " " + b.ct + " " + b.body
			resp, body := w.raw(nil, "", "POST", rt.path, stewardTok, b.ct, b.body)
			apiRefusal(t, why, resp, body, http.StatusUnsupportedMediaType, "unsupported_media_type", b.msg)
			same(why)
		}
	}

	// A browser's session posting a form to the API: JSON, not a page or
	// a redirect, and nothing done.
	cl := w.browser()
	csrf := w.login(cl, stewardTok)
	same := w.keep("stuck")
	resp, body := w.raw(cl, csrf, "POST", "/api/v1/jobs/stuck/resume", "", "application/x-www-form-urlencoded", url.Values{"csrf": {csrf}, "guidance": {"x"}}.Encode())
	apiRefusal(t, "a session's form to the API", resp, body, http.StatusUnsupportedMediaType, "unsupported_media_type", "the API takes application/json")
	same("a session's form to the API")

	// No body at all, or JSON, is what the API takes.
	if resp, body := w.raw(nil, "", "POST", "/api/v1/jobs/waiting/halt", stewardTok, "", ""); resp.StatusCode != 200 {
		t.Fatalf("halt without a body: %d %s", resp.StatusCode, body)
	}
	resp, body = w.raw(nil, "", "POST", "/api/v1/jobs/stuck/resume", stewardTok, "application/json; charset=UTF-8", `{"guidance":"Use the staging DB"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("resume by JSON: %d %s", resp.StatusCode, body)
	}
	if g := lastSteward(t, w, "stuck", "resume"); g != "Use the staging DB" {
		t.Fatalf("resume's guidance recorded %q", g)
	}
}

// lastSteward is the guidance of job id's last steward command named cmd.
func lastSteward(t *testing.T, w *world, id, cmd string) string {
	t.Helper()
	recs := w.k.Records(id)
	for i := len(recs) - 1; i >= 0; i-- {
		if s := recs[i].Steward; s != nil && s.Command == cmd {
			return s.Guidance
		}
	}
	t.Fatalf("%s has no %s", id, cmd)
	return ""
}

// TestAPIRefusesWhatItWouldDrop: a field the command does not take (a
// typo, another command's), a query string on a POST, and a non-object
// body are 400, and nothing is done.
func TestAPIRefusesWhatItWouldDrop(t *testing.T) {
	w := newWorld(t)
	cases := []struct{ path, id, body, msg string }{
		{"/api/v1/jobs/stuck/resume", "stuck", `{"guidnce":"typo"}`, `body: resume takes no field "guidnce" (it takes guidance, cost_threshold, time_threshold_minutes, max_agent_calls)`},
		{"/api/v1/jobs/stuck/resume", "stuck", `{"Guidance":"case"}`, `takes no field "Guidance"`},
		{"/api/v1/jobs/waiting/halt", "waiting", `{"guidance":"halt takes none"}`, `body: halt takes no field "guidance" (it takes reason)`},
		{"/api/v1/jobs/done/rollback", "done", `{"checkpoint":"cp-0000-work","as":"worker"}`, `rollback takes no field "as"`},
		{"/api/v1/jobs:halt", "waiting", `{"all":true,"guidance":"x"}`, `jobs:halt takes no field "guidance"`},
		{"/api/v1/jobs:halt", "waiting", `{"filter":{"stauts":["PENDING"]}}`, `unknown field "stauts"`},
		{"/api/v1/schedules/tpl/pause", "tpl", `{"reason":"x","all":true}`, `takes no field "all"`},
		{"/api/v1/jobs/stuck/resume", "stuck", `["guidance"]`, "body: a JSON object is required"},
		{"/api/v1/jobs/stuck/resume", "stuck", `"guidance"`, "body: a JSON object is required"},
		{"/api/v1/jobs/stuck/resume?guidance=x", "stuck", `{}`, `query "guidance=x": a POST takes its parameters in its body`},
		{"/api/v1/jobs/waiting/halt?reason=x", "waiting", ``, `query "reason=x"`},
		// A key given twice: Go kept the last value, another reader
		// the first (a form's field given twice is refused too).
		{"/api/v1/jobs/waiting/halt", "waiting", `{"reason":"a","reason":"b"}`, `body: key "reason" given twice in the object at /`},
		{"/api/v1/jobs:halt", "waiting", `{"filter":{"text":"kittens","text":"nothing"}}`, `body: key "text" given twice in the object at /filter`},
	}
	for _, c := range cases {
		same := w.keep(c.id)
		resp, body := w.raw(nil, "", "POST", c.path, stewardTok, "application/json", c.body)
		apiRefusal(t, c.path+" "+c.body, resp, body, http.StatusBadRequest, "invalid", c.msg)
		same(c.path + " " + c.body)
	}
}

// TestAPIRefusesASecondJSONValue: whatever follows a body's JSON value is
// refused (it was ignored), on a reply and every other body alike.
func TestAPIRefusesASecondJSONValue(t *testing.T) {
	w := newWorld(t)
	w.k.WriteJob("human", map[string]any{"agents": map[string]any{
		"worker":     map[string]any{"provider": "human"},
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "ok")),
	}})
	w.k.Run("human")
	answer := `{"as": "worker", "answer": {"action": "STUCK", "summary_for_supervisor": "stop here", "evidence_files": []}}`
	cases := []struct{ path, id, body, msg string }{
		{"/api/v1/jobs/human/reply", "human", answer + ` {"as": "supervisor"}`, "body: more than one JSON value"},
		{"/api/v1/jobs/human/reply", "human", answer + answer, "body: more than one JSON value"},
		{"/api/v1/jobs/human/reply", "human", answer + ` x`, "body: after the JSON value"},
		{"/api/v1/jobs/human/reply", "human", answer + ` }`, "body: after the JSON value"},
		{"/api/v1/jobs/stuck/resume", "stuck", `{} {"guidance": "dropped"}`, "body: more than one JSON value"},
		{"/api/v1/jobs:halt", "waiting", `{"all": true} null`, "body: more than one JSON value"},
		{"/api/v1/schedules/tpl/pause", "tpl", `{} {}`, "body: more than one JSON value"},
	}
	for _, c := range cases {
		same := w.keep(c.id)
		resp, body := w.raw(nil, "", "POST", c.path, stewardTok, "application/json", c.body)
		apiRefusal(t, c.path+" "+c.body, resp, body, http.StatusBadRequest, "invalid", c.msg)
		same(c.path + " " + c.body)
	}
	if m := w.k.Load("human"); m.Run.ErrorCode != "AWAITING_REPLY" {
		t.Fatalf("human is %s %s", m.Status, m.Run.ErrorCode)
	}
	// The one value alone is filed.
	if resp, body := w.raw(nil, "", "POST", "/api/v1/jobs/human/reply", stewardTok, "application/json", answer+"\n"); resp.StatusCode != 200 {
		t.Fatalf("the reply alone: %d %s", resp.StatusCode, body)
	}
}

// TestPageFormsTakeOnlyTheirFields: the pages' forms post to the pages'
// paths and are sent back to a page; a field the command does not take,
// a field given twice, or a body that is not a form is refused there too,
// and nothing is done.
func TestPageFormsTakeOnlyTheirFields(t *testing.T) {
	w := newWorld(t)
	cl := w.browser()
	csrf := w.login(cl, stewardTok)
	form := func(v url.Values) string {
		v.Set("csrf", csrf)
		return v.Encode()
	}
	const ft = "application/x-www-form-urlencoded"
	cases := []struct {
		path, id, ct, body string
		status             int
		msg                string
	}{
		{"/jobs/stuck/resume", "stuck", ft, form(url.Values{"guidnce": {"typo"}}), 400, `resume takes no field &#34;guidnce&#34;`},
		{"/jobs/stuck/resume", "stuck", ft, form(url.Values{"guidance": {"one", "two"}}), 400, `field &#34;guidance&#34; given 2 times`},
		{"/jobs/stuck/resume", "stuck", ft, form(url.Values{"f.text.summary": {"no answer here"}}), 400, `resume takes no field &#34;f.text.summary&#34;`},
		{"/jobs/waiting/halt", "waiting", ft, form(url.Values{"reason": {"r"}, "guidance": {"g"}}), 400, `halt takes no field &#34;guidance&#34;`},
		{"/schedules/tpl/pause", "tpl", ft, form(url.Values{"reason": {"r"}, "all": {"true"}}), 400, `takes no field &#34;all&#34;`},
		{"/jobs/stuck/resume?guidance=x", "stuck", ft, form(url.Values{}), 400, `a POST takes its parameters in its body`},
		{"/jobs/stuck/resume", "stuck", "application/json", `{"guidance":"x"}`, 415, "form posts application/x-www-form-urlencoded"},
	}
	for _, c := range cases {
		same := w.keep(c.id)
		resp, page := w.raw(cl, csrf, "POST", c.path, "", c.ct, c.body)
		if resp.StatusCode != c.status || !strings.Contains(string(page), c.msg) || resp.Header.Get("Location") != "" {
			t.Fatalf("%s %s: %d %s, want %d %q", c.path, c.body, resp.StatusCode, page, c.status, c.msg)
		}
		same(c.path + " " + c.body)
	}
	// The page's own form still works: the guidance is the command's,
	// and the browser goes back to the job's page.
	resp, page := w.raw(cl, "", "POST", "/jobs/stuck/resume", "", ft, form(url.Values{"guidance": {"Use the staging DB"}, "cost_threshold": {""}, "idempotency_key": {"k-form"}}))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/jobs/stuck?done=resume" {
		t.Fatalf("the resume form: %d %s %s", resp.StatusCode, resp.Header.Get("Location"), page)
	}
	if g := lastSteward(t, w, "stuck", "resume"); g != "Use the staging DB" {
		t.Fatalf("the form's guidance recorded %q", g)
	}
	// A form whose session ended: the login page, then back to the
	// form's page (not to the action's path, which has no GET).
	same := w.keep("waiting")
	req, _ := http.NewRequest("POST", w.srv.URL+"/jobs/waiting/halt", strings.NewReader("reason=late"))
	req.Header.Set("Content-Type", ft)
	req.Header.Set("Referer", w.srv.URL+"/jobs/waiting")
	if resp, err := w.browser().Do(req); err != nil || resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next=%2Fjobs%2Fwaiting" {
		t.Fatalf("an anonymous form: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	same("an anonymous form")
	resp, _ = w.raw(cl, "", "POST", "/schedules/tpl/pause", "", ft, form(url.Values{"reason": {"maintenance"}}))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/schedules" || w.k.Load("tpl").ScheduleState() != "paused" {
		t.Fatalf("the pause form: %d %s, tpl %s", resp.StatusCode, resp.Header.Get("Location"), w.k.Load("tpl").ScheduleState())
	}
}

// TestListRefusesWhatItWouldIgnore: a status that is none, a parameter
// the listing does not know, or one given twice is 400 naming it (a
// status that is none answered 200 with no items); a bulk action's
// filter is held to the same statuses, and does nothing.
func TestListRefusesWhatItWouldIgnore(t *testing.T) {
	w := newWorld(t)
	for q, msg := range map[string]string{
		"status=BOGUS":                `query parameter "status": "BOGUS" is not one of NEEDS_YOU, PENDING, RUNNING`,
		"status=PENDING,bogus":        `query parameter "status": "BOGUS" is not one of`,
		"status=PENDING&status=NOPE":  `query parameter "status": "NOPE" is not one of`,
		"stauts=PENDING":              `query parameter "stauts": not one of status, workflow, text, since, until, offset, limit`,
		"limit=1&limit=2":             `query parameter "limit" given 2 times`,
		"workflow=a&workflow=b":       `query parameter "workflow" given 2 times`,
		"offset=x":                    `query parameter "offset": "x" is not a count`,
		"until=tomorrow":              `query parameter "until": "tomorrow" is not an RFC 3339 time`,
		"text=kittens&text=puppies":   `query parameter "text" given 2 times`,
		"status=PENDING&sort=created": `query parameter "sort"`,
	} {
		resp, body := w.raw(nil, "", "GET", "/api/v1/jobs?"+q, viewerTok, "", "")
		apiRefusal(t, q, resp, body, http.StatusBadRequest, "invalid", msg)
	}
	for _, st := range statuses {
		if resp, body := w.raw(nil, "", "GET", "/api/v1/jobs?status="+strings.ToLower(st), viewerTok, "", ""); resp.StatusCode != 200 {
			t.Fatalf("status=%s: %d %s", st, resp.StatusCode, body)
		}
	}
	same := w.keep("waiting")
	resp, body := w.raw(nil, "", "POST", "/api/v1/jobs:halt", stewardTok, "application/json", `{"filter": {"status": ["PENDING", "BOGUS"]}}`)
	apiRefusal(t, "bulk halt of status BOGUS", resp, body, http.StatusBadRequest, "invalid", `status: "BOGUS" is not one of`)
	same("bulk halt of status BOGUS")
}

// TestOpenAPIBodiesAreJSON: the document says what readJSON does: every
// POST takes application/json alone and lists 415 and 413.
func TestOpenAPIBodiesAreJSON(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody *struct {
				Content map[string]json.RawMessage `json:"content"`
			} `json:"requestBody"`
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatal(err)
	}
	if limit := fmt.Sprintf("body over %d MiB (%d bytes) is 413", maxBody>>20, maxBody); !strings.Contains(string(openapiDoc), limit) {
		t.Errorf("openapi.json does not say %q", limit)
	}
	for p, ops := range doc.Paths {
		op, isPost := ops["post"]
		if !isPost {
			continue
		}
		if op.RequestBody == nil || len(op.RequestBody.Content) != 1 || op.RequestBody.Content[jsonType] == nil {
			t.Errorf("POST %s: its body is not application/json alone", p)
		}
		if op.Responses["415"] == nil || op.Responses["413"] == nil || op.Responses["400"] == nil {
			t.Errorf("POST %s: 415, 413 or 400 is not listed", p)
		}
	}
}

// TestBodyOverTheLimitIs413: a body over the 4 MiB cap is 413 in the
// JSON envelope naming the limit (it was 400 "http: request body too
// large"), and nothing is done; a body of the cap is read. A page's
// form is held to the same cap, answered with a page.
func TestBodyOverTheLimitIs413(t *testing.T) {
	w := newWorld(t)
	pad := func(json string, size int) string { return json + strings.Repeat(" ", size-len(json)) }
	same := w.keep("waiting")
	for _, path := range []string{"/api/v1/jobs/waiting/halt", "/api/v1/jobs:halt", "/api/v1/schedules/tpl/pause"} {
		resp, body := w.raw(nil, "", "POST", path, stewardTok, "application/json", pad(`{"reason": "too long"}`, maxBody+1))
		apiRefusal(t, path+" over the limit", resp, body, http.StatusRequestEntityTooLarge, "request_too_large", "body: larger than the limit of 4 MiB (4194304 bytes)")
	}
	same("a body over the limit")
	resp, body := w.raw(nil, "", "POST", "/jobs/waiting/halt", stewardTok, "application/x-www-form-urlencoded", pad("reason=too+long", maxBody+1))
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "form: larger than the limit of 4 MiB") {
		t.Fatalf("a page's form over the limit: %d %s", resp.StatusCode, body)
	}
	same("a page's form over the limit")
	if resp, body := w.raw(nil, "", "POST", "/api/v1/jobs/waiting/halt", stewardTok, "application/json", pad(`{"reason": "at the limit"}`, maxBody)); resp.StatusCode != 200 {
		t.Fatalf("a body of the limit: %d %s", resp.StatusCode, body)
	}
}

// TestSessionFormHeldToTheBodyCap: a browser's form (a session, its CSRF
// token in the form) is read for its token under the cap every body has:
// a reply of 2 MiB is taken (the token's read stopped at 1 MiB, and the
// guard said 403 "wrong CSRF token"), a form over 4 MiB is 413 naming the
// limit, as a Bearer form and the API are, one that does not parse 400,
// and nothing is done; a wrong token or another origin is still 403.
func TestSessionFormHeldToTheBodyCap(t *testing.T) {
	w := newWorld(t)
	w.k.WriteJob("human", map[string]any{"agents": map[string]any{
		"worker":     map[string]any{"provider": "human"},
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "ok")),
	}})
	w.k.Run("human")
	cl := w.browser()
	csrf := w.login(cl, stewardTok)
	// A reply whose answer holds size bytes (JSON's whitespace), the
	// token last.
	form := func(tok string, size int) string {
		answer := `{"action": "STUCK", "summary_for_supervisor": "A human says: stop here.",` + strings.Repeat(" ", size) + `"evidence_files": []}`
		return url.Values{"as": {"worker"}, "answer": {answer}}.Encode() + "&csrf=" + tok
	}
	post := func(body, origin string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", w.srv.URL+"/jobs/human/reply", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	same := w.keep("human")
	resp, page := post(form(csrf, maxBody), "")
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(page), "form: larger than the limit of 4 MiB (4194304 bytes)") {
		t.Fatalf("a session's form over the limit: %d %s", resp.StatusCode, page)
	}
	resp, page = post(form("forged", 2<<20), "")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(page), "missing or wrong CSRF token") {
		t.Fatalf("a 2 MiB form with a wrong token: %d %s", resp.StatusCode, page)
	}
	if resp, page := post(form(csrf, 2<<20), "http://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a 2 MiB form from another origin: %d %s", resp.StatusCode, page)
	}
	// A form that does not parse is refused as such, not as forged.
	resp, page = post("as=worker&answer=%zz&csrf="+csrf, "")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(page), "form: invalid URL escape") {
		t.Fatalf("a form that does not parse: %d %s", resp.StatusCode, page)
	}
	same("a refused form")
	resp, page = post(form(csrf, 2<<20), w.srv.URL)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/jobs/human?done=reply" {
		t.Fatalf("a 2 MiB reply with its token: %d %s", resp.StatusCode, page)
	}
	if m := w.k.Load("human"); m.Status != "PENDING" {
		t.Fatalf("human is %s %s after the reply", m.Status, m.Run.ErrorCode)
	}
}

// TestSizeText: a limit is stated as it is, whatever its size (the 413
// of a 64 KiB cap said "0 MiB").
func TestSizeText(t *testing.T) {
	for n, want := range map[int64]string{
		maxBody:      "4 MiB (4194304 bytes)",
		maxLoginForm: "64 KiB (65536 bytes)",
		3 << 19:      "1536 KiB (1572864 bytes)",
		1000:         "1000 bytes",
		1<<20 + 1:    "1048577 bytes",
		512:          "512 bytes",
		1 << 10:      "1 KiB (1024 bytes)",
	} {
		if got := sizeText(n); got != want {
			t.Errorf("sizeText(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestLoginFormOverItsCapIs413: the login's form keeps its small cap (the
// route is public) and is refused over it as every body over its cap is:
// 413 naming the limit, not 400 "bad login form"; a form of the cap is
// read, and one that does not parse is 400.
func TestLoginFormOverItsCapIs413(t *testing.T) {
	w := newWorld(t)
	post := func(body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", w.srv.URL+"/login", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	form := url.Values{"token": {stewardTok}, "next": {"/jobs/waiting"}}.Encode() + "&pad="
	resp, page := post(form + strings.Repeat("x", maxLoginForm-len(form)+1))
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(page, "form: larger than the limit of 64 KiB (65536 bytes)") {
		t.Fatalf("a login form over its cap: %d %s", resp.StatusCode, page)
	}
	if resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("a login form over its cap logged in: %q", resp.Header.Get("Set-Cookie"))
	}
	resp, page = post("token=%zz")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "form: invalid URL escape") {
		t.Fatalf("a login form that does not parse: %d %s", resp.StatusCode, page)
	}
	resp, page = post(form + strings.Repeat("x", maxLoginForm-len(form)))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/jobs/waiting" || resp.Header.Get("Set-Cookie") == "" {
		t.Fatalf("a login form of its cap: %d %q %s", resp.StatusCode, resp.Header.Get("Location"), page)
	}
}
