package console

import (
	"encoding/json"
	"net/http"
	"net/url"
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
