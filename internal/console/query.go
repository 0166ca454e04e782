package console

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A GET takes its parameters in its query, each route those of its table
// (route.Query) and no other: a parameter it does not take, one given
// twice (but a repeat one), a value its check refuses or a required one
// missing is 400 naming the parameter, before the handler runs; the
// handler then reads values that are what it takes. A GET without a
// table takes none. So it is for the API and the pages alike (a page's
// 400 is a page naming the parameter, escaped as every value): a link
// with a typo or a forged value says so, rather than showing a page that
// is not what it asked for. The OpenAPI document lists the API's
// parameters (TestOpenAPIQueryIsTheRoutes); the pages take those of the
// links, forms and redirects they make (TestPagesTakeTheirOwnLinks).

// queryParam is one query parameter of a route.
type queryParam struct {
	name string
	// about says what it is, in the message of a required one missing.
	about    string
	required bool
	// repeat: it may be given more than once (status).
	repeat bool
	// check refuses a value that is none (nil: any value); an empty
	// value is no value and is not checked.
	check func(string) error
}

// queryParams are a route's query parameters.
type queryParams []queryParam

var (
	// listQuery is a listing's: GET /api/v1/jobs and the jobs page.
	listQuery = queryParams{
		{name: "status", repeat: true, check: checkStatuses},
		{name: "workflow"},
		{name: "text"},
		{name: "since", check: checkTime},
		{name: "until", check: checkTime},
		{name: "offset", check: checkCount},
		{name: "limit", check: checkCount},
	}
	// schedulesQuery is GET /api/v1/schedules's: a listing's paging
	// (pageOf).
	schedulesQuery = queryParams{
		{name: "offset", check: checkCount},
		{name: "limit", check: checkCount},
	}
	historyQuery = queryParams{
		{name: "after", check: checkRecordNumber},
		{name: "limit", check: checkPageSize},
		{name: "follow", check: checkFollow},
	}
	diffQuery = queryParams{
		{name: "from", about: "the checkpoint to diff from", required: true},
		{name: "to", about: "the checkpoint to diff to", required: true},
	}
	playQuery = queryParams{{name: "as", about: "the party you play", required: true}}

	// The pages' own: the login page's next (the page to go to, which
	// the guard puts when it sends a browser to log in), and the news
	// of the action or move a form just did (pageAction's redirect).
	loginQuery    = queryParams{{name: "next", check: checkNext}}
	jobPageQuery  = queryParams{{name: "done", check: checkDone}}
	playPageQuery = append(slices.Clone(playQuery), queryParam{name: "done", check: checkMove})
)

func (ps queryParams) names() []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.name
	}
	return out
}

// check refuses a query (raw, the URL's) that route (for messages:
// "GET /api/v1/jobs/{id}") would ignore or misread.
func (ps queryParams) check(route, raw string) error {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return usagef("query: %v", err)
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		i := slices.IndexFunc(ps, func(p queryParam) bool { return p.name == k })
		switch {
		case len(ps) == 0:
			return usagef("query parameter %q: %s takes none", k, route)
		case i < 0:
			return usagef("query parameter %q: not one of %s", k, strings.Join(ps.names(), ", "))
		case !ps[i].repeat && len(q[k]) > 1:
			return usagef("query parameter %q given %d times", k, len(q[k]))
		}
		for _, v := range q[k] {
			if v == "" || ps[i].check == nil {
				continue
			}
			if err := ps[i].check(v); err != nil {
				return usagef("query parameter %q: %v", k, err)
			}
		}
	}
	for _, p := range ps {
		if p.required && q.Get(p.name) == "" {
			return usagef("query parameter %q is required: %s", p.name, p.about)
		}
	}
	return nil
}

// heldToQuery says whether a route's query is checked: every GET's (with
// no table, it takes none).
func (rt route) heldToQuery() bool {
	return rt.Method == http.MethodGet
}

// queryChecked is the route's handler behind the check of its query.
func (c *Console) queryChecked(rt route) http.HandlerFunc {
	where := rt.Method + " " + rt.Pattern
	return func(w http.ResponseWriter, r *http.Request) {
		if err := rt.Query.check(where, r.URL.RawQuery); err != nil {
			c.failErr(w, r, err)
			return
		}
		rt.Handler(w, r)
	}
}

// The checks of values.

func checkCount(s string) error {
	_, err := atoiDefault(s, 0, 0)
	return err
}

// checkPageSize refuses a count of records to page by that is none or 0:
// a page of none would never move on (next_after stays, more stays true).
func checkPageSize(s string) error {
	if err := checkCount(s); err != nil {
		return err
	}
	if n, _ := strconv.Atoi(s); n == 0 {
		return fmt.Errorf("%q: a page has at least 1 record", s)
	}
	return nil
}

func checkRecordNumber(s string) error {
	if _, err := strconv.ParseInt(s, 10, 64); err != nil {
		return fmt.Errorf("%q is not a record number", s)
	}
	return nil
}

func checkFollow(s string) error {
	if s != "0" && s != "1" {
		return fmt.Errorf("%q is not 0 or 1 (1 streams the records)", s)
	}
	return nil
}

// checkStatuses checks a status value: statuses, comma-separated, any
// case.
func checkStatuses(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			if err := checkStatus(strings.ToUpper(p)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkStatus refuses a status a filter does not take.
func checkStatus(s string) error {
	if !slices.Contains(statuses, s) {
		return fmt.Errorf("%q is not one of %s", s, strings.Join(statuses, ", "))
	}
	return nil
}

// checkNext refuses a page to go to after logging in that is not a path
// of this server (safeNext would send the browser to / instead).
func checkNext(s string) error {
	if safeNext(s) != s {
		return fmt.Errorf("%q is not a path of this server", s)
	}
	return nil
}

// checkDone refuses news of an action that is none of Actions.
func checkDone(s string) error {
	if !slices.Contains(Actions, s) {
		return fmt.Errorf("%q is not one of %s", s, strings.Join(Actions, ", "))
	}
	return nil
}

// checkMove refuses news of a move that is no move's name: a control
// (steward.ControlAnswer, ControlSkip) or a game's input, such as
// end_conversation: a lower case letter, then letters, digits and _.
func checkMove(s string) error {
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || i > 0 && (r == '_' || r >= '0' && r <= '9')) {
			return fmt.Errorf("%q is not a move's name (answer, skip, or a game's input such as end_conversation)", s)
		}
	}
	return nil
}

// checkTime refuses a time that is not RFC 3339.
func checkTime(s string) error {
	if _, err := time.Parse(time.RFC3339, s); err != nil {
		return fmt.Errorf("%q is not an RFC 3339 time (2026-01-02T15:04:05Z)", s)
	}
	return nil
}
