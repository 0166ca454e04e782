package console

import (
	"net/http"
	"strings"
	"testing"
)

// TestAPIAnswersNoRouteInItsEnvelope: under /api/ a path the API does not
// have is 404 and a path it has with a method it does not take is 405
// with Allow, both in the JSON envelope (they were net/http's plain text);
// a path not in its clean form is 404, not a redirect. A page keeps
// net/http's answer.
func TestAPIAnswersNoRouteInItsEnvelope(t *testing.T) {
	w := newWorld(t)
	notFound := []struct{ method, path, msg string }{
		{"GET", "/api/v1/nope", `path "/api/v1/nope": not in the API`},
		{"GET", "/api/v1/jobs/stuck/nope", `path "/api/v1/jobs/stuck/nope"`},
		{"POST", "/api/v1/jobs/stuck/bogus-action", `not in the API`},
		{"GET", "/api/v2/jobs", `path "/api/v2/jobs"`},
		{"GET", "/api/v1/", `path "/api/v1/"`},
		{"GET", "/api/v1/jobs/", `path "/api/v1/jobs/": not in the API (did you mean /api/v1/jobs?`},
		{"GET", "/api/v1//jobs", `did you mean /api/v1/jobs?`},
		{"GET", "/api/v1/jobs/stuck/../done", `did you mean /api/v1/jobs/done?`},
	}
	for _, c := range notFound {
		for _, tok := range []string{stewardTok, ""} {
			resp, body := w.raw(nil, "", c.method, c.path, tok, "", "")
			apiRefusal(t, c.method+" "+c.path, resp, body, http.StatusNotFound, "not_found", c.msg)
		}
	}
	notAllowed := []struct{ method, path, allow string }{
		{"DELETE", "/api/v1/jobs", "GET, HEAD"},
		{"POST", "/api/v1/jobs", "GET, HEAD"},
		{"GET", "/api/v1/jobs/stuck/resume", "POST"},
		{"PUT", "/api/v1/jobs/stuck/play", "GET, HEAD, POST"},
		{"POST", "/api/v1/openapi.json", "GET, HEAD"},
		{"GET", "/api/v1/jobs:halt", "POST"},
	}
	for _, c := range notAllowed {
		for _, tok := range []string{stewardTok, ""} {
			resp, body := w.raw(nil, "", c.method, c.path, tok, "application/json", "{}")
			why := c.method + " " + c.path
			apiRefusal(t, why, resp, body, http.StatusMethodNotAllowed, "method_not_allowed", "method "+c.method+": "+c.path+" takes "+c.allow)
			if got := resp.Header.Get("Allow"); got != c.allow {
				t.Errorf("%s: Allow %q, want %q", why, got, c.allow)
			}
		}
	}
	// A route's own answers are unchanged: HEAD of a GET, and the
	// handler's 404 for a job that is not there.
	if resp, _ := w.raw(nil, "", "HEAD", "/api/v1/jobs", viewerTok, "", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /api/v1/jobs: %d", resp.StatusCode)
	}
	resp, body := w.raw(nil, "", "GET", "/api/v1/jobs/nosuchjob", viewerTok, "", "")
	apiRefusal(t, "an unknown job", resp, body, http.StatusNotFound, "not_found", "nosuchjob")

	// The pages keep net/http's answers.
	resp, body = w.raw(nil, "", "GET", "/nope", stewardTok, "", "")
	if resp.StatusCode != http.StatusNotFound || strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("GET /nope: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp, _ = w.raw(nil, "", "DELETE", "/needs", stewardTok, "", "")
	if resp.StatusCode != http.StatusMethodNotAllowed || strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("DELETE /needs: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestOpenAPISaysNoRoute: the document names 404 and 405 as the API
// answers them.
func TestOpenAPISaysNoRoute(t *testing.T) {
	doc := string(openapiDoc)
	for _, s := range []string{"method_not_allowed 405", "not_found 404", "Allow header"} {
		if !strings.Contains(doc, s) {
			t.Errorf("openapi.json does not say %q", s)
		}
	}
}
