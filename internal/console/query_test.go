package console

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/logist/logist/internal/jobview"
)

// TestAPIRefusesQueryItWouldIgnore: every API GET refuses a query
// parameter it does not take (history and diff ignored them) naming it
// and those it takes, one given twice, a value that is none naming the
// parameter and why, a required one missing, and a query that does not
// parse.
func TestAPIRefusesQueryItWouldIgnore(t *testing.T) {
	w := newWorld(t)
	cps := jobview.Checkpoints(w.k.Records("done"))
	from, to := cps[0].ID, cps[len(cps)-1].ID
	for _, c := range []struct{ path, msg string }{
		{"/api/v1/jobs/done/history?bogus=1", `query parameter "bogus": not one of after, limit, follow`},
		{"/api/v1/jobs/done/history?limit=2&Limit=3", `query parameter "Limit": not one of after, limit, follow`},
		{"/api/v1/jobs/done/history?limit=x", `query parameter "limit": "x" is not a count`},
		{"/api/v1/jobs/done/history?limit=-1", `query parameter "limit": "-1" is not a count`},
		{"/api/v1/jobs/done/history?after=x", `query parameter "after": "x" is not a record number`},
		{"/api/v1/jobs/done/history?follow=yes", `query parameter "follow": "yes" is not 0 or 1`},
		{"/api/v1/jobs/done/history?limit=1&limit=2", `query parameter "limit" given 2 times`},
		{"/api/v1/jobs/done/history?limit=%zz", `query: invalid URL escape "%zz"`},
		{"/api/v1/jobs/done/diff?from=" + from + "&to=" + to + "&context=3", `query parameter "context": not one of from, to`},
		{"/api/v1/jobs/done/diff?from=" + from, `query parameter "to" is required: the checkpoint to diff to`},
		{"/api/v1/jobs/done/diff?from=" + from + "&to=", `query parameter "to" is required`},
		{"/api/v1/jobs/done/diff?from=" + from + "&to=" + to + "&to=" + from, `query parameter "to" given 2 times`},
		{"/api/v1/jobs/done/play?as=worker&round=2", `query parameter "round": not one of as`},
		{"/api/v1/jobs/done/play", `query parameter "as" is required: the party you play`},
		{"/api/v1/jobs/done?verbose=1", `query parameter "verbose": GET /api/v1/jobs/{id} takes none`},
		{"/api/v1/jobs?stauts=PENDING", `query parameter "stauts": not one of status, workflow, text, since, until, offset, limit`},
	} {
		resp, body := w.raw(nil, "", "GET", c.path, viewerTok, "", "")
		apiRefusal(t, c.path, resp, body, http.StatusBadRequest, "invalid", c.msg)
	}
	// Every API GET, the document's too: a parameter it does not take.
	for _, rt := range w.c.routes() {
		if !rt.API || rt.Method != http.MethodGet {
			continue
		}
		q := url.Values{"bogus": {"<b>"}}
		for _, p := range rt.Query {
			if p.required {
				q.Set(p.name, map[string]string{"as": "worker", "from": from, "to": to}[p.name])
			}
		}
		path := strings.NewReplacer("{id}", "done").Replace(rt.Pattern) + "?" + q.Encode()
		resp, body := w.raw(nil, "", "GET", path, viewerTok, "", "")
		apiRefusal(t, path, resp, body, http.StatusBadRequest, "invalid", `query parameter "bogus"`)
	}
	// What they take is taken.
	for _, path := range []string{
		"/api/v1/jobs/done/history?after=0&limit=1&follow=0",
		"/api/v1/jobs/done/history?after=-1&limit=",
		"/api/v1/jobs/done/diff?from=" + from + "&to=" + to,
		"/api/v1/jobs?status=pending,success&status=DRAFT&limit=5&offset=0&since=2020-01-02T15:04:05Z",
	} {
		if resp, body := w.raw(nil, "", "GET", path, viewerTok, "", ""); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
}

// TestOpenAPIQueryIsTheRoutes: the query parameters the document lists
// for each API GET are those its route takes, required alike.
func TestOpenAPIQueryIsTheRoutes(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name     string `json:"name"`
				In       string `json:"in"`
				Required bool   `json:"required"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatal(err)
	}
	for _, rt := range (&Console{}).routes() {
		if !rt.API || rt.Method != http.MethodGet {
			continue
		}
		var inDoc, served []string
		for _, p := range doc.Paths[rt.Pattern]["get"].Parameters {
			if p.In == "query" {
				inDoc = append(inDoc, p.Name+map[bool]string{true: " (required)"}[p.Required])
			}
		}
		for _, p := range rt.Query {
			served = append(served, p.name+map[bool]string{true: " (required)"}[p.required])
		}
		slices.Sort(inDoc)
		slices.Sort(served)
		if !slices.Equal(inDoc, served) {
			t.Errorf("GET %s: openapi.json's query %v, the route's %v", rt.Pattern, inDoc, served)
		}
	}
}

// page GETs path as a browser's page does (Accept: text/html), with cl's
// session, and returns the status, the Location and the body.
func (w *world) page(cl *http.Client, path string) (int, string, string) {
	w.t.Helper()
	req, _ := http.NewRequest("GET", w.srv.URL+path, nil)
	req.Header.Set("Accept", "text/html")
	resp, err := cl.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// TestPagesRefuseQueryTheyWouldIgnore: every page, as every API GET,
// refuses a query parameter it does not take (they ignored it), one
// given twice, a value that is none (the job page's done=, the play
// page's, the login page's next=//elsewhere, which it replaced with /)
// and a required one missing, with a 400 page naming the parameter and
// why, the parameter escaped.
func TestPagesRefuseQueryTheyWouldIgnore(t *testing.T) {
	w := newWorld(t)
	cl := w.browser()
	w.login(cl, viewerTok)
	for _, c := range []struct{ path, msg string }{
		{"/needs?sort=id", `query parameter &#34;sort&#34;: GET /needs takes none`},
		{"/jobs/done?verbose=1", `query parameter &#34;verbose&#34;: not one of done`},
		{"/jobs/done?done=<script>", `query parameter &#34;done&#34;: &#34;&lt;script&gt;&#34; is not one of halt, resume, rollback, reply, pm, play`},
		{"/jobs/done?done=halt&done=halt", `query parameter &#34;done&#34; given 2 times`},
		{"/jobs/done?done=%zz", `query: invalid URL escape &#34;%zz&#34;`},
		{"/jobs/done/diff?from=A", `query parameter &#34;to&#34; is required: the checkpoint to diff to`},
		{"/jobs/done/diff?from=A&to=B&context=3", `query parameter &#34;context&#34;: not one of from, to`},
		{"/jobs/done/play", `query parameter &#34;as&#34; is required: the party you play`},
		{"/jobs/done/play?as=worker&done=Shout!", `query parameter &#34;done&#34;: &#34;Shout!&#34; is not a move&#39;s name`},
		{"/?status=BOGUS", `query parameter &#34;status&#34;: &#34;BOGUS&#34; is not one of`},
		{"/login?next=//evil.example/", `query parameter &#34;next&#34;: &#34;//evil.example/&#34; is not a path of this server`},
		{"/login?next=/&next=/needs", `query parameter &#34;next&#34; given 2 times`},
	} {
		code, _, body := w.page(cl, c.path)
		if code != http.StatusBadRequest || !strings.Contains(body, c.msg) || !strings.Contains(body, `<h1>400: invalid</h1>`) {
			t.Errorf("%s: %d, want a 400 page saying %s:\n%s", c.path, code, c.msg, body)
		}
	}
	// Every page (and asset): a parameter it does not take, its name
	// markup.
	for _, rt := range w.c.routes() {
		if rt.API || rt.Method != http.MethodGet {
			continue
		}
		q := url.Values{"<b>x</b>": {"1"}}
		for _, p := range rt.Query {
			if p.required {
				q.Set(p.name, "A")
			}
		}
		path := strings.NewReplacer("{id}", "done", "{file}", "console.css", "{$}", "").Replace(rt.Pattern) + "?" + q.Encode()
		code, _, body := w.page(cl, path)
		if code != http.StatusBadRequest || !strings.Contains(body, `query parameter &#34;&lt;b&gt;x&lt;/b&gt;&#34;`) || strings.Contains(body, "<b>x") {
			t.Errorf("%s: %d, want a 400 page naming the parameter, escaped:\n%s", path, code, body)
		}
	}
}

// TestPagesTakeTheirOwnLinks: every link and GET form the pages render
// (for a steward, with a job of each kind: checkpoints, a ledger, a party
// to play), and every page the console sends a browser to (after an
// action, a move, to log in and back), is taken: 200, where a page that
// checks its query could refuse what the console itself produces.
func TestPagesTakeTheirOwnLinks(t *testing.T) {
	defer func(n int) { timelineCalls = n }(timelineCalls)
	timelineCalls = 1 // the job page links older records (the API)
	w := newWorld(t)
	writeHumanMercury(t, w.k.Dir, "m")
	w.k.Run("m")
	cl := w.browser()
	csrf := w.login(cl, stewardTok)

	var (
		hrefRe   = regexp.MustCompile(`\b(?:href|src)="([^"]*)"`)
		formRe   = regexp.MustCompile(`(?s)<form method="get" action="([^"]*)"[^>]*>(.*?)</form>`)
		fieldRe  = regexp.MustCompile(`<(input|select|textarea)\b([^>]*)>`)
		attrRe   = func(a string) *regexp.Regexp { return regexp.MustCompile(`\b` + a + `="([^"]*)"`) }
		nameRe   = attrRe("name")
		valueRe  = attrRe("value")
		listRe   = attrRe("list")
		optionRe = regexp.MustCompile(`<option value="([^"]*)"`)
	)
	// links are the URLs of this server a page links: its hrefs and
	// sources, and its GET forms as a browser submits them, once with
	// each value their select or list offers.
	links := func(body string) []string {
		var out []string
		for _, m := range hrefRe.FindAllStringSubmatch(body, -1) {
			if u := html.UnescapeString(m[1]); strings.HasPrefix(u, "/") && !strings.HasPrefix(u, "//") {
				out = append(out, u)
			}
		}
		for _, f := range formRe.FindAllStringSubmatch(body, -1) {
			var names []string
			choice := ""
			fixed := url.Values{}
			for _, fl := range fieldRe.FindAllStringSubmatch(f[2], -1) {
				n := nameRe.FindStringSubmatch(fl[2])
				if n == nil {
					continue
				}
				names = append(names, n[1])
				if fl[1] == "select" || listRe.MatchString(fl[2]) {
					choice = n[1]
				} else if v := valueRe.FindStringSubmatch(fl[2]); v != nil {
					fixed.Set(n[1], html.UnescapeString(v[1]))
				} else {
					fixed.Set(n[1], "")
				}
			}
			var options []string
			for _, o := range optionRe.FindAllStringSubmatch(f[2], -1) {
				options = append(options, html.UnescapeString(o[1]))
			}
			if len(options) == 0 {
				options = []string{""}
			}
			for _, o := range options {
				q := url.Values{}
				for _, n := range names {
					if n == choice {
						q.Set(n, o)
					} else {
						q.Set(n, fixed.Get(n))
					}
				}
				out = append(out, html.UnescapeString(f[1])+"?"+q.Encode())
			}
		}
		return out
	}
	seen := map[string]bool{}
	var crawl func(path string)
	crawl = func(path string) {
		if seen[path] {
			return
		}
		seen[path] = true
		code, _, body := w.page(cl, path)
		if code != http.StatusOK {
			t.Errorf("%s, a link the console renders: %d\n%s", path, code, body)
			return
		}
		if strings.Contains(body, "<html") {
			for _, l := range links(body) {
				crawl(l)
			}
		}
	}
	crawl("/")
	// The crawl reached what checks its query, with a query.
	for _, want := range []string{"/?status=NEEDS_YOU&text=&workflow=", "/jobs/m/play?as=estoria", "/jobs/m/ledger", "/api/v1/jobs/done/history", "/static/console.js"} {
		if !seen[want] {
			t.Errorf("the crawl did not reach %s", want)
		}
	}
	var diff string
	for p := range seen {
		if strings.HasPrefix(p, "/jobs/done/diff?from=") {
			diff = p
		}
	}
	if diff == "" {
		t.Fatal("the crawl reached no diff")
	}

	// Where the console sends a browser: after an action, after a move,
	// to log in (naming the page it asked for) and back.
	post := func(path string, v url.Values) string {
		t.Helper()
		v.Set("csrf", csrf)
		resp, err := cl.PostForm(w.srv.URL+path, v)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST %s: %d", path, resp.StatusCode)
		}
		return resp.Header.Get("Location")
	}
	sent := []string{
		post("/jobs/waiting/halt", url.Values{"reason": {"r"}}),
		post("/jobs/m/play", url.Values{"as": {"estoria"}, "move": {"end_conversation"}}),
	}
	anon := w.browser()
	_, login, _ := w.page(anon, diff)
	sent = append(sent, login)
	resp, err := anon.PostForm(w.srv.URL+"/login", url.Values{"token": {viewerTok}, "next": {diff}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Location") != diff {
		t.Errorf("after logging in: to %q, want %q", resp.Header.Get("Location"), diff)
	}
	for _, to := range sent {
		if code, _, body := w.page(cl, to); code != http.StatusOK {
			t.Errorf("%s, where the console sends a browser: %d\n%s", to, code, body)
		}
	}
	if !slices.Contains(sent, "/jobs/waiting?done=halt") || !slices.Contains(sent, "/jobs/m/play?as=estoria&done=end_conversation") {
		t.Errorf("sent to %v", sent)
	}
}

// The query table is the one place a route's parameters are decided
// (missing, repeated, bad): the diff and play handlers read as, from and
// to as the table passed them and check none again. Run without the
// table, they have no message of their own for a missing one (they had:
// "from and to (checkpoint ids) are both required", "as (the party you
// play) is required", never seen behind the table, and a second rule).
func TestHandlersLeaveTheQueryToTheTable(t *testing.T) {
	w := newWorld(t)
	for _, rt := range w.c.routes() {
		if !slices.ContainsFunc(rt.Query, func(p queryParam) bool { return p.name == "as" || p.name == "from" || p.name == "to" }) {
			continue
		}
		r := httptest.NewRequest(rt.Method, strings.Replace(rt.Pattern, "{id}", "done", 1), nil)
		r.SetPathValue("id", "done")
		rec := httptest.NewRecorder()
		rt.Handler(rec, r)
		if body := html.UnescapeString(rec.Body.String()); strings.Contains(body, "required") {
			t.Errorf("%s %s checks its query itself: %d %s", rt.Method, rt.Pattern, rec.Code, body)
		}
	}
}
