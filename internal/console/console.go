// Package console is the steward's web console that logistd serves on
// --listen: a JSON API under /api/v1/ and server-rendered pages at /, both
// behind a token. It changes jobs only through internal/steward and reads
// them through jobstore and history, as the CLI does, and its JSON has the
// CLI's shapes (internal/jobview), so the page, the API and logist agree.
// The routes are one table (routes) from which the mux and the OpenAPI
// document's test both read.
package console

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/steward"
)

// Actions are the steward's actions on one job the console offers, by the
// CLI command's name.
var Actions = []string{"halt", "resume", "rollback", "reply", "pm", "play"}

// Options configure a console.
type Options struct {
	Store   *jobstore.Store
	Steward *steward.Steward
	Logger  *slog.Logger
	Tokens  Tokens
	// Disabled actions are refused (403) whoever asks: the server's
	// switches for dangerous ones (rollback).
	Disabled []string
	// Secure marks the session cookie Secure (the server speaks TLS).
	Secure bool
	// Changed, when set, is told of a job a console action changed (the
	// daemon nudges its scheduler: a halted call in flight is killed).
	Changed func(id string)
	// Poll is how often the event stream looks for changed jobs (default 1s).
	Poll time.Duration
	// ContentKey is the content key file of encrypted histories
	// (secrets.KeyPath): the console shows their text opened, as logist
	// status and history do. Empty: shown sealed.
	ContentKey string
}

// opener opens what encrypt_history sealed, for the pages and the API
// (loaded per request: the key appears with the first encrypted job).
func (c *Console) opener() *jobview.Opener {
	if c.o.ContentKey == "" {
		return nil
	}
	return jobview.NewOpener(c.o.ContentKey)
}

// Console is the handler of the console's pages and API.
type Console struct {
	o Options
	// cl is set in cluster mode (NewCluster).
	cl       *clusterSide
	sessions *sessions
	mux      *http.ServeMux
	// patterns are the mux's patterns, methods the methods they serve
	// (apiNoRoute).
	patterns map[string]bool
	methods  []string
	// keys: file mode's memory of idempotency keys.
	keys keyBook
	// keepAlive is how often a history's stream pings (15 s).
	keepAlive time.Duration
}

// New makes the console; mount it at "/" (it answers /api/v1/ too).
func New(o Options) *Console {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Steward != nil {
		// The records name who acted: the console, for whoever held
		// the steward's token (the daemon's OS user is no person).
		st := *o.Steward
		st.User = "console"
		o.Steward = &st
	}
	c := &Console{o: o, sessions: newSessions(), mux: http.NewServeMux(), patterns: map[string]bool{}, keepAlive: 15 * time.Second}
	rs := c.routes()
	for _, r := range rs {
		if r.heldToQuery() {
			r.Handler = c.queryChecked(r)
		}
		c.mux.Handle(r.Method+" "+r.Pattern, c.guard(r))
		c.patterns[r.Method+" "+r.Pattern] = true
	}
	c.methods = routeMethods(rs)
	return c
}

func (c *Console) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := &watchedWriter{ResponseWriter: rw}
	defer c.recovered(w, r) // a handler's panic: recover.go
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: with no-referrer a browser sends
	// "Origin: null" on its own form posts, which sameOrigin refuses.
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	if c.apiNoRoute(w, r) {
		return
	}
	c.mux.ServeHTTP(w, r)
}

// CheckDisabled refuses a switched-off action (--console-disable) that is
// not one of Actions.
func CheckDisabled(names []string) error {
	for _, a := range names {
		if !slices.Contains(Actions, a) {
			return fmt.Errorf("--console-disable %s: not a console action (%s)", a, strings.Join(Actions, ", "))
		}
	}
	return nil
}

// disabled says whether action is switched off on this server.
func (c *Console) disabled(action string) bool { return slices.Contains(c.o.Disabled, action) }

// route is one endpoint: who may call it, and whether it is the API's
// (JSON errors, listed in the OpenAPI document) or a page's.
type route struct {
	Method  string
	Pattern string // net/http pattern; the OpenAPI path is the same
	Need    Role
	API     bool
	// Public routes answer without a token (the login page, the assets).
	Public bool
	// Query are the query parameters a GET takes (query.go); a GET
	// without them takes none.
	Query   queryParams
	Handler http.HandlerFunc
}

// routes is the one list of the console's endpoints.
func (c *Console) routes() []route {
	rs := []route{
		{Method: "GET", Pattern: "/api/v1/openapi.json", Public: true, API: true, Handler: c.openAPI},
		{Method: "GET", Pattern: "/api/v1/session", Need: Viewer, API: true, Handler: c.apiSession},
		{Method: "GET", Pattern: "/api/v1/jobs", Need: Viewer, API: true, Query: listQuery, Handler: c.apiJobs},
		{Method: "GET", Pattern: "/api/v1/jobs/{id}", Need: Viewer, API: true, Handler: c.apiJob},
		{Method: "GET", Pattern: "/api/v1/jobs/{id}/history", Need: Viewer, API: true, Query: historyQuery, Handler: c.apiHistory},
		{Method: "GET", Pattern: "/api/v1/jobs/{id}/diff", Need: Viewer, API: true, Query: diffQuery, Handler: c.apiDiff},
		{Method: "GET", Pattern: "/api/v1/jobs/{id}/verify", Need: Viewer, API: true, Handler: c.apiVerify},
		{Method: "GET", Pattern: "/api/v1/jobs/{id}/play", Need: Viewer, API: true, Query: playQuery, Handler: c.apiPlay},
		{Method: "POST", Pattern: "/api/v1/jobs:halt", Need: StewardRole, API: true, Handler: c.apiBulk("halt")},
		{Method: "POST", Pattern: "/api/v1/jobs:resume", Need: StewardRole, API: true, Handler: c.apiBulk("resume")},
		{Method: "GET", Pattern: "/api/v1/events", Need: Viewer, API: true, Handler: c.apiEvents},
		{Method: "GET", Pattern: "/api/v1/schedules", Need: Viewer, API: true, Query: schedulesQuery, Handler: c.apiSchedules},
		{Method: "POST", Pattern: "/api/v1/schedules/{id}/pause", Need: StewardRole, API: true, Handler: c.apiSchedule(true)},
		{Method: "POST", Pattern: "/api/v1/schedules/{id}/resume", Need: StewardRole, API: true, Handler: c.apiSchedule(false)},

		{Method: "GET", Pattern: "/login", Public: true, Query: loginQuery, Handler: c.pageLogin},
		{Method: "POST", Pattern: "/login", Public: true, Handler: c.postLogin},
		{Method: "POST", Pattern: "/logout", Need: Viewer, Handler: c.postLogout},
		{Method: "GET", Pattern: "/static/{file}", Public: true, Handler: c.static},
		{Method: "GET", Pattern: "/{$}", Need: Viewer, Query: listQuery, Handler: c.pageJobs},
		{Method: "GET", Pattern: "/needs", Need: Viewer, Handler: c.pageNeeds},
		{Method: "GET", Pattern: "/schedules", Need: Viewer, Handler: c.pageSchedules},
		{Method: "GET", Pattern: "/jobs/{id}", Need: Viewer, Query: jobPageQuery, Handler: c.pageJob},
		{Method: "GET", Pattern: "/jobs/{id}/diff", Need: Viewer, Query: diffQuery, Handler: c.pageDiff},
		{Method: "GET", Pattern: "/jobs/{id}/ledger", Need: Viewer, Handler: c.pageLedger},
		{Method: "GET", Pattern: "/jobs/{id}/play", Need: Viewer, Query: playPageQuery, Handler: c.pagePlay},
	}
	for _, a := range Actions {
		rs = append(rs, route{Method: "POST", Pattern: "/api/v1/jobs/{id}/" + a, Need: StewardRole, API: true, Handler: c.apiAction(a)})
	}
	// The pages' forms post to pages' paths: the API reads JSON only.
	for _, a := range Actions {
		rs = append(rs, route{Method: "POST", Pattern: "/jobs/{id}/" + a, Need: StewardRole, Handler: c.pageAction(a)})
	}
	rs = append(rs,
		route{Method: "POST", Pattern: "/schedules/{id}/pause", Need: StewardRole, Handler: c.pageSchedule(true)},
		route{Method: "POST", Pattern: "/schedules/{id}/resume", Need: StewardRole, Handler: c.pageSchedule(false)})
	return rs
}
