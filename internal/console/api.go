package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/steward"
)

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

func errorsIsNotFound(err error) bool { return errors.Is(err, jobstore.ErrNotFound) }

// jobID is the {id} of a route, checked as the CLI checks a JOB argument.
func jobID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if err := manifest.ValidID(id); err != nil {
		return "", usagef("%v", err)
	}
	return id, nil
}

// filterOf reads a listing's filter from the query (held to listQuery):
// status (repeated or comma-separated, any case), workflow, text, since,
// until.
func filterOf(q url.Values) (Filter, error) {
	var f Filter
	for _, s := range q["status"] {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				f.Status = append(f.Status, strings.ToUpper(p))
			}
		}
	}
	f.Workflow, f.Text, f.Since, f.Until = q.Get("workflow"), q.Get("text"), q.Get("since"), q.Get("until")
	return f, f.check()
}

func (c *Console) apiSession(w http.ResponseWriter, r *http.Request) {
	who := callerOf(r)
	data := map[string]any{"role": who.role.String(), "disabled_actions": append([]string{}, c.o.Disabled...)}
	if who.session != nil {
		data["csrf_token"] = who.session.csrf
	}
	ok(w, "", data)
}

// listing is a page of the jobs f selects: the items and how many there
// are in all.
func (c *Console) listing(q url.Values) (items []map[string]any, total, offset, limit int, err error) {
	f, err := filterOf(q)
	if err != nil {
		return nil, 0, 0, 0, usagef("%v", err)
	}
	if offset, limit, err = pageOf(q); err != nil {
		return nil, 0, 0, 0, err
	}
	ens, err := c.jobs(f)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	items = []map[string]any{}
	for i := offset; i < len(ens) && i < offset+limit; i++ {
		items = append(items, c.item(ens[i]))
	}
	return items, len(ens), offset, limit, nil
}

// pageOf reads a listing's page from the query: offset (default 0),
// limit (default 100, at most 1000). GET /api/v1/jobs and
// /api/v1/schedules page so.
func pageOf(q url.Values) (offset, limit int, err error) {
	if offset, err = atoiDefault(q.Get("offset"), 0, 1<<30); err != nil {
		return 0, 0, usagef("offset: %v", err)
	}
	if limit, err = atoiDefault(q.Get("limit"), 100, 1000); err != nil {
		return 0, 0, usagef("limit: %v", err)
	}
	return offset, limit, nil
}

func (c *Console) apiJobs(w http.ResponseWriter, r *http.Request) {
	items, total, offset, limit, err := c.listing(r.URL.Query())
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	// logist list's message names the jobs folder's path; the server's
	// is not told to a viewer.
	ok(w, fmt.Sprintf("%d jobs in the jobs folder", total), map[string]any{"items": items, "total": total, "offset": offset, "limit": limit})
}

func (c *Console) apiJob(w http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d, err := c.jobDetail(id)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	ok(w, "", d)
}

// apiHistory pages a job's records (after=SEQ, limit=N), or streams them
// as they come (SSE) when the request asks for a stream (streamsHistory):
// historyQuery.
func (c *Console) apiHistory(w http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	q := r.URL.Query()
	after := int64(-1)
	if s := q.Get("after"); s != "" {
		if after, err = strconv.ParseInt(s, 10, 64); err != nil {
			c.failErr(w, r, usagef("after: %q is not a record number", s))
			return
		}
	}
	limit, err := atoiDefault(q.Get("limit"), 500, 5000)
	if err != nil {
		c.failErr(w, r, usagef("limit: %v", err))
		return
	}
	if _, err := c.o.Store.Load(id); errorsIsNotFound(err) {
		c.failErr(w, r, err) // "job ID: not found"
		return
	}
	dir := c.o.Store.JobDir(id)
	if streamsHistory(r) {
		if q.Get("limit") != "" {
			// A stream sends every record: a limit it would ignore.
			c.failErr(w, r, usagef("query parameter \"limit\": a page's, not a stream's (follow=1, or Accept: text/event-stream without follow, sends every record after after; follow=0 asks for a page)"))
			return
		}
		c.followHistory(w, r, id, dir, after)
		return
	}
	// The page alone is read, not the whole history (history.ReadAfter).
	items, more, err := history.ReadAfter(dir, after, limit)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.opener().Records(id, items)
	next := after
	if len(items) > 0 {
		next = items[len(items)-1].Seq
	}
	ok(w, "", map[string]any{"job_id": id, "items": items, "next_after": next, "more": more})
}

// streamsHistory says whether a history request asks for the stream:
// follow decides when given (1 streams, 0 is a page whatever Accept
// says); without it (or empty: no value, query.go), Accept:
// text/event-stream streams. The query is held to historyQuery, whose
// checkFollow takes 0 and 1 only. openapi.json says the same rule.
func streamsHistory(r *http.Request) bool {
	switch r.URL.Query().Get("follow") {
	case "1":
		return true
	case "0":
		return false
	}
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

func (c *Console) apiDiff(w http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d, err := c.diff(r.Context(), id, r.URL.Query().Get("from"), r.URL.Query().Get("to"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	ok(w, "", d)
}

// diff is the workspace diff between two checkpoints of job id, as
// logist diff finds it: the files their snapshots differ in, and in a git
// workspace the commits' diff (stat and patch) too. from and to are the
// query's, there and given once as its routes' table (diffQuery) holds
// them before the handler runs.
func (c *Console) diff(ctx context.Context, id, from, to string) (map[string]any, error) {
	if _, err := c.o.Store.Load(id); errorsIsNotFound(err) {
		return nil, err // "job ID: not found"
	}
	dir := c.o.Store.JobDir(id)
	recs, err := history.ReadAll(dir)
	if err != nil {
		return nil, err
	}
	ps := jobview.Points(recs)
	fp, err := jobview.PointNamed(id, ps, from)
	if err != nil {
		return nil, err
	}
	tp, err := jobview.PointNamed(id, ps, to)
	if err != nil {
		return nil, err
	}
	ch, err := jobview.SnapshotChanges(dir, fp, tp)
	if err != nil {
		return nil, err
	}
	nz := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	d := map[string]any{"job_id": id, "from": from, "to": to, "added": nz(ch.Added), "modified": nz(ch.Modified), "deleted": nz(ch.Deleted)}
	if fp.Git != nil && tp.Git != nil {
		// Only what is shown is kept: a diff of gigabytes costs the
		// server its first megabyte (and git's time), not its size.
		head, total, err := gitws.DiffHead(ctx, c.o.Store.Workspace(id), fp.Git.Commit, tp.Git.Commit, maxDiffText)
		if err != nil {
			return nil, err
		}
		shown, cut := cutDiff(head, maxDiffText)
		d["from_commit"], d["to_commit"], d["diff"] = fp.Git.Commit, tp.Git.Commit, shown
		d["diff_truncated"], d["diff_bytes"] = cut, total
	}
	return d, nil
}

// maxDiffText is the most of a git workspace's diff (stat and patch) the
// console answers, the API's and the page's (diff): 1 MiB. A longer one
// is cut at the last line that fits, and says so (diff_truncated true,
// diff_bytes its whole size); logist diff prints it whole. openapi.json
// says the limit (TestDiffCut).
const maxDiffText = 1 << 20

// cutDiff is text cut to at most max bytes: at the end of the last line
// that fits, or, when the first line alone is longer, at the last rune
// that fits; cut says whether anything was left out.
func cutDiff(text string, max int) (shown string, cut bool) {
	if len(text) <= max {
		return text, false
	}
	if i := strings.LastIndexByte(text[:max], '\n'); i >= 0 {
		return text[:i+1], true
	}
	n := max
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n], true
}

// ActionBody is a POST's body, the API's JSON or a page's form's fields of
// the same names: the CLI's flags of the command (each command takes its
// own: actionShapes, body.go).
type ActionBody struct {
	Reason               string          `json:"reason,omitempty"`
	Guidance             string          `json:"guidance,omitempty"`
	CostThreshold        *float64        `json:"cost_threshold,omitempty"`
	TimeThresholdMinutes *float64        `json:"time_threshold_minutes,omitempty"`
	MaxAgentCalls        *int            `json:"max_agent_calls,omitempty"`
	Checkpoint           string          `json:"checkpoint,omitempty"` // rollback --to
	As                   string          `json:"as,omitempty"`         // reply --as, play --as
	Move                 string          `json:"move,omitempty"`       // play's move: answer, skip, end_conversation
	Answer               json.RawMessage `json:"answer,omitempty"`     // reply --answer
	Decision             string          `json:"decision,omitempty"`   // pm's decision
	Filter               *Filter         `json:"filter,omitempty"`     // bulk actions
	All                  bool            `json:"all,omitempty"`        // bulk: every job
}

// checkTexts refuses a reason or guidance over its limit (the steward's
// rule, steward.CheckTexts, which every command applies again) before
// anything is done, a bulk action's first job included: 400 naming the
// field, its length and the limit.
func (b ActionBody) checkTexts() error {
	if err := steward.CheckTexts(b.Reason, b.Guidance); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// act runs one steward command on job id: the CLI's, with the CLI's
// checks of its flags. It records the command's event for the daemon's
// metrics, as the CLI does. In cluster mode the command runs through the
// cluster's fenced steering path (clusterSide.steer), as the CLI's does.
// key is the caller's idempotency key ("" for none; see idempotency.go).
func (c *Console) act(ctx context.Context, action, id, key string, b ActionBody) (msg string, data map[string]any, err error) {
	if c.cl == nil && key != "" {
		return c.keys.once(key, commandWords(action, id, b), func() (string, map[string]any, error) { return c.act(ctx, action, id, "", b) })
	}
	defer func() {
		if data["repeat"] != true { // a repeat did nothing
			steward.RecordEvent(c.o.Store.Dir, action, jobview.OutcomeName(jobview.ExitCode(err)))
		}
	}()
	if err := c.enabled(action); err != nil {
		return "", nil, err
	}
	var m *manifest.Manifest
	run := func(do func(st *steward.Steward) error) error {
		if c.cl == nil {
			return do(c.o.Steward)
		}
		restore := ""
		if action == "rollback" {
			restore = b.Checkpoint
		}
		return c.cl.steer(ctx, id, key, commandWords(action, id, b), restore, do)
	}
	defer func() {
		if errors.Is(err, errRepeat) {
			msg, data, err = c.repeated(id)
		}
	}()
	switch action {
	case "halt":
		err = run(func(st *steward.Steward) (err error) {
			m, err = st.Halt(id, b.Reason)
			return err
		})
		msg = fmt.Sprintf("Job %s halted", id)
	case "resume":
		o := steward.ResumeOptions{Guidance: b.Guidance, CostThreshold: b.CostThreshold, TimeThresholdMinutes: b.TimeThresholdMinutes, MaxAgentCalls: b.MaxAgentCalls}
		var bad *steward.OptionError
		if err := o.Check(); errors.As(err, &bad) {
			return "", nil, usagef("%s %s", bad.Field, bad.Reason)
		}
		err = run(func(st *steward.Steward) (err error) {
			m, err = st.Resume(id, o)
			return err
		})
		if err == nil {
			msg = fmt.Sprintf("Job %s resumed at phase %s", id, m.Phase())
		}
	case "rollback":
		if b.Checkpoint == "" {
			return "", nil, usagef("checkpoint is required (the job's checkpoints are listed by GET /api/v1/jobs/%s)", id)
		}
		var cp *history.RecoveryPoint
		err = run(func(st *steward.Steward) (err error) {
			m, cp, err = st.Rollback(id, b.Checkpoint, steward.RollbackOptions{Guidance: b.Guidance, Reason: b.Reason})
			return err
		})
		if err == nil {
			msg = fmt.Sprintf("Job %s rolled back to %s; it resumes at phase %s", id, b.Checkpoint, cp.ResumePhase)
			d := jobview.Changed(m, "")
			d["restored_files"], d["checkpoint_id"] = cp.Snapshot.Files, b.Checkpoint
			return msg, d, c.changed(id)
		}
	case "reply":
		if b.As == "" {
			return "", nil, usagef("as (the role) is required")
		}
		if len(b.Answer) == 0 {
			return "", nil, usagef("answer (the answer's JSON) is required")
		}
		err = run(func(st *steward.Steward) (err error) {
			m, err = st.Reply(id, b.As, b.Answer)
			return err
		})
		msg = fmt.Sprintf("Reply as %s filed; job %s goes on", b.As, id)
	case "play":
		if b.As == "" {
			return "", nil, usagef("as (the party) is required")
		}
		mv, perr := playMove(b)
		if perr != nil {
			return "", nil, perr
		}
		err = run(func(st *steward.Steward) (err error) {
			m, err = st.Play(id, b.As, mv)
			return err
		})
		msg = mv.News(id, b.As)
	case "pm":
		in, perr := jobview.PMDecision(b.Decision, b.Reason, b.Guidance)
		if perr != nil {
			return "", nil, usagef("%v", perr)
		}
		err = run(func(st *steward.Steward) (err error) {
			m, err = st.Decide(id, in)
			return err
		})
		msg = fmt.Sprintf("Prime Minister's %s recorded; job %s goes on", b.Decision, id)
	default:
		return "", nil, usagef("unknown action %q", action)
	}
	if err != nil {
		return "", nil, err
	}
	return msg, jobview.Changed(m, ""), c.changed(id)
}

// errDisabled is an action the server switched off: 403.
var errDisabled = fs.ErrPermission

// enabled refuses an action switched off on this server (403).
func (c *Console) enabled(action string) error {
	if c.disabled(action) {
		return fmt.Errorf("%s is switched off on this server (--console-disable %s): %w", action, action, errDisabled)
	}
	return nil
}

func (c *Console) changed(id string) error {
	if c.o.Changed != nil {
		c.o.Changed(id)
	}
	return nil
}

// apiAction is POST /api/v1/jobs/{id}/ACTION: a JSON body (readJSON),
// answered with JSON.
func (c *Console) apiAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, msg, data, err := c.runAction(r, action, func() (ActionBody, error) {
			var b ActionBody
			err := readJSON(w, r, actionShapes[action], &b)
			return b, err
		})
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		ok(w, msg, data)
	}
}

// pageAction is POST /jobs/{id}/ACTION, a page's form (readForm): back to
// the job's page (a player's, to its play page), which shows the news.
func (c *Console) pageAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _, _, err := c.runAction(r, action, func() (ActionBody, error) { return readForm(w, r, actionShapes[action]) })
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		id := r.PathValue("id")
		to := "/jobs/" + url.PathEscape(id) + "?done=" + url.QueryEscape(action)
		if action == "play" {
			to = "/jobs/" + url.PathEscape(id) + "/play?as=" + url.QueryEscape(b.As) + "&done=" + url.QueryEscape(b.Move)
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
	}
}

// runAction runs action on the route's job with the body read: every
// check of the request (the id, the body, the key) before the command.
func (c *Console) runAction(r *http.Request, action string, read func() (ActionBody, error)) (b ActionBody, msg string, data map[string]any, err error) {
	id, err := jobID(r)
	if err != nil {
		return b, "", nil, err
	}
	if b, err = read(); err != nil {
		return b, "", nil, err
	}
	if err = b.checkTexts(); err != nil {
		return b, "", nil, err
	}
	key, err := requestKey(r)
	if err != nil {
		return b, "", nil, err
	}
	msg, data, err = c.act(r.Context(), action, id, key, b)
	if err != nil {
		return b, "", nil, err
	}
	c.o.Logger.Info("console steward command", "command", action, "job_id", id, "role", callerOf(r).role.String())
	return b, msg, data, nil
}

// apiBulk halts or resumes every job a filter selects (all: true for
// every job; an empty filter is refused), one command per job.
func (c *Console) apiBulk(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var b ActionBody
		if err := readJSON(w, r, bulkShapes[action], &b); err != nil {
			c.failErr(w, r, err)
			return
		}
		if err := b.checkTexts(); err != nil {
			c.failErr(w, r, err)
			return
		}
		key, err := requestKey(r)
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		// Switched off, the action is 403 as a job's is, not 200 with
		// each selected job refused.
		if err := c.enabled(action); err != nil {
			c.failErr(w, r, err)
			return
		}
		var f Filter
		if b.Filter != nil {
			f = *b.Filter
		}
		if f.empty() && !b.All {
			c.failErr(w, r, usagef("a filter is required (or \"all\": true)"))
			return
		}
		if err := f.check(); err != nil {
			c.failErr(w, r, usagef("%v", err))
			return
		}
		ens, err := c.jobs(f)
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		items := []map[string]any{}
		done := 0
		for _, en := range ens {
			if en.Err != nil {
				continue
			}
			one := b
			one.Filter = nil
			_, data, err := c.act(r.Context(), action, en.ID, jobKey(key, en.ID), one)
			it := map[string]any{"job_id": en.ID, "ok": err == nil}
			if err != nil {
				it["error"] = jobview.ErrorBody(err)
			} else {
				done++
				it["job"] = data["job"]
			}
			items = append(items, it)
		}
		ok(w, fmt.Sprintf("%s: %d of %d selected jobs", action, done, len(items)), map[string]any{"items": items})
	}
}

// apiSchedules lists the schedule templates, paged as GET /api/v1/jobs
// is (offset, limit; total counts them all).
func (c *Console) apiSchedules(w http.ResponseWriter, r *http.Request) {
	offset, limit, err := pageOf(r.URL.Query())
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	items, err := c.schedules()
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	total := len(items)
	items = items[min(offset, total):min(offset+limit, total)]
	ok(w, "", map[string]any{"items": items, "total": total, "offset": offset, "limit": limit})
}

func (c *Console) schedules() ([]map[string]any, error) {
	ens, err := c.o.Store.ListSummaries(true)
	if err != nil {
		return nil, err
	}
	items := []map[string]any{}
	for _, en := range ens {
		if en.Err == nil && en.View().Schedule != nil {
			items = append(items, c.item(en))
		}
	}
	return items, nil
}

// apiSchedule is POST /api/v1/schedules/{id}/pause|resume: a JSON body.
func (c *Console) apiSchedule(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		msg, data, err := c.schedule(r, pause, func() (ActionBody, error) {
			var b ActionBody
			err := readJSON(w, r, scheduleShape, &b)
			return b, err
		})
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		ok(w, msg, data)
	}
}

// pageSchedule is POST /schedules/{id}/pause|resume, the schedules
// page's form: back to that page.
func (c *Console) pageSchedule(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, _, err := c.schedule(r, pause, func() (ActionBody, error) { return readForm(w, r, scheduleShape) }); err != nil {
			c.failErr(w, r, err)
			return
		}
		http.Redirect(w, r, "/schedules", http.StatusSeeOther)
	}
}

// schedule pauses or resumes the route's schedule with the body read.
func (c *Console) schedule(r *http.Request, pause bool, read func() (ActionBody, error)) (string, map[string]any, error) {
	id, err := jobID(r)
	if err != nil {
		return "", nil, err
	}
	b, err := read()
	if err != nil {
		return "", nil, err
	}
	if err := b.checkTexts(); err != nil {
		return "", nil, err
	}
	key, err := requestKey(r)
	if err != nil {
		return "", nil, err
	}
	event, verb := history.CommandSchedulePause, "paused"
	if !pause {
		event, verb = history.CommandScheduleResume, "resumed"
	}
	words := commandWords(string(event), id, b)
	one := func() (msg string, data map[string]any, err error) {
		var m *manifest.Manifest
		do := func(st *steward.Steward) (err error) {
			if pause {
				m, err = st.PauseSchedule(id, b.Reason)
			} else {
				m, err = st.ResumeSchedule(id, b.Reason)
			}
			return err
		}
		if c.cl == nil {
			err = do(c.o.Steward)
		} else if err = c.cl.steer(r.Context(), id, key, words, "", do); errors.Is(err, errRepeat) {
			return c.repeated(id)
		}
		steward.RecordEvent(c.o.Store.Dir, event, jobview.OutcomeName(jobview.ExitCode(err)))
		if err != nil {
			return "", nil, err
		}
		_ = c.changed(id)
		return fmt.Sprintf("Schedule %s %s", id, verb), jobview.Changed(m, ""), nil
	}
	if c.cl == nil && key != "" {
		return c.keys.once(key, words, one)
	}
	return one()
}
