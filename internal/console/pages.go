package console

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/textsafe"
)

//go:embed web/*.html
var webFS embed.FS

//go:embed static
var staticFS embed.FS

// pages are the templates, each page with the layout. html/template
// escapes every value; agent text also goes through textsafe (funcs
// "text"), so terminal escapes and bidi runes show as what they are.
// No template turns agent text into template.HTML. They are parsed at the
// first page served, not at start: logistd is re-executed for every
// contained call (the sandbox's launcher and helper), which serve none.
var pages = sync.OnceValue(func() map[string]*template.Template {
	funcs := template.FuncMap{
		"text":  func(s string) string { return textsafe.Block(s) },
		"line":  func(s string) string { return textsafe.Line(s) },
		"usd":   func(v float64) string { return "$" + trimFloat(v, 4) },
		"cents": func(v float64) string { return "$" + trimFloat(v/100, 2) },
		// budget is a cost budget: "no limit" past the largest Logist
		// counts (manifest.CostUnbounded), not its hundreds of digits.
		"budget": func(v float64) string {
			if manifest.CostUnbounded(v) {
				return "no limit"
			}
			return "$" + trimFloat(v/100, 2)
		},
		"secs": func(v float64) string { return trimFloat(v, 2) + " s" },
		"ptr":  func(p *float64) float64 { return deref(p) },
		"has":  func(list []string, s string) bool { return contains(list, s) },
		// actionKey is a new idempotency key for a form of a steward's
		// action: a double submit of the form is one command.
		"actionKey": func() string {
			b := make([]byte, 16)
			_, _ = rand.Read(b)
			return hex.EncodeToString(b)
		},
		"when": shortTime,
		"json": prettyJSON,
		"dec":  func(i int) int { return i - 1 },
		"args": func(kv ...any) map[string]any {
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[fmt.Sprint(kv[i])] = kv[i+1]
			}
			return m
		},
	}
	out := map[string]*template.Template{}
	names, _ := fs.Glob(webFS, "web/*.html")
	for _, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".html")
		if base == "layout" {
			continue
		}
		out[base] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(webFS, "web/layout.html", n))
	}
	return out
})

// render writes page name with data; the layout adds the session's role
// and CSRF token.
func (c *Console) render(w http.ResponseWriter, r *http.Request, name string, data map[string]any) {
	c.renderStatus(w, r, http.StatusOK, name, data)
}

// renderStatus is render answering status: its headers are set before
// the status is written (after it, net/http drops them).
func (c *Console) renderStatus(w http.ResponseWriter, r *http.Request, status int, name string, data map[string]any) {
	who := c.who(r)
	data["Role"] = who.role.String()
	data["Steward"] = who.role == StewardRole
	if who.session != nil {
		data["CSRF"] = who.session.csrf
	}
	data["Page"] = name
	var b bytes.Buffer
	if err := pages()[name].Execute(&b, data); err != nil {
		c.o.Logger.Warn("console page failed", "page", name, "err", err.Error())
		http.Error(w, "page failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func (c *Console) static(w http.ResponseWriter, r *http.Request) {
	b, err := staticFS.ReadFile("static/" + r.PathValue("file"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(r.PathValue("file")) {
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	_, _ = w.Write(b)
}

func (c *Console) pageJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	items, total, _, _, err := c.listing(q)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.render(w, r, "jobs", map[string]any{"Items": items, "Total": total, "Statuses": statuses,
		"Status": q.Get("status"), "Text": q.Get("text"), "Workflow": q.Get("workflow")})
}

func (c *Console) pageNeeds(w http.ResponseWriter, r *http.Request) {
	ens, err := c.jobs(Filter{Status: []string{"NEEDS_YOU"}})
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	var jobs []map[string]any
	for _, en := range ens {
		d, err := c.jobDetail(en.ID)
		if err != nil {
			continue
		}
		jobs = append(jobs, d)
	}
	c.render(w, r, "needs", map[string]any{"Jobs": jobs, "PMDecisions": jobview.PMDecisions})
}

func (c *Console) pageSchedules(w http.ResponseWriter, r *http.Request) {
	items, err := c.schedules()
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.render(w, r, "schedules", map[string]any{"Items": items})
}

// timelineCalls is how many of the last interactions a job page shows (a
// variable for the tests).
var timelineCalls = 50

func (c *Console) pageJob(w http.ResponseWriter, r *http.Request) {
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
	// The page shows the end of the history, read at the cost of what it
	// shows; older records are paged through the API. A history that
	// cannot be read says so instead of showing an empty timeline.
	recs, whole, err := history.ReadLast(c.o.Store.JobDir(id), timelineCalls)
	c.opener().Records(id, recs)
	if err != nil {
		d["TimelineError"] = err.Error()
	} else if !whole && len(recs) > 0 {
		d["TimelineFrom"] = recs[0].Seq
	}
	d["ID"] = id
	d["Timeline"] = timeline(recs)
	d["Done"] = r.URL.Query().Get("done")
	d["PMDecisions"] = jobview.PMDecisions
	if wf, _ := d["workflow"].(string); hasLedger(wf) {
		d["LedgerTitle"] = ledgerTitle(wf)
	}
	d["Verify"] = "not checked: no history yet"
	if rep, err := c.verifyJob(id); err == nil && rep.Records > 0 {
		d["Verify"], d["VerifyOK"] = verdict(rep), rep.OK()
	} else if err != nil {
		d["Verify"] = "not checked: " + err.Error()
	}
	d["LastSeq"] = int64(-1)
	if len(recs) > 0 {
		d["LastSeq"] = recs[len(recs)-1].Seq
	}
	c.render(w, r, "job", d)
}

func (c *Console) pageDiff(w http.ResponseWriter, r *http.Request) {
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
	d["ID"], d["DiffLimit"] = id, maxDiffText
	c.render(w, r, "diff", d)
}

// entry is one line of a job's timeline: a history record said for a
// person (agent text stays text: the template escapes it).
type entry struct {
	Seq    int64
	Time   string
	Kind   string // request, answer, transition, steward, checkpoint, error, event, message
	Who    string
	Phase  string
	Title  string
	Detail string
	Items  []string
}

// timeline is a history as the job page shows it, oldest first.
func timeline(recs []history.Record) []entry {
	out := make([]entry, 0, len(recs))
	for _, r := range recs {
		if e, ok := timelineEntry(r); ok {
			out = append(out, e)
		}
	}
	return out
}

func timelineEntry(r history.Record) (entry, bool) {
	e := entry{Seq: r.Seq, Time: r.Time, Who: r.Role, Phase: r.Phase, Kind: r.Type}
	switch {
	case r.Request != nil:
		e.Kind, e.Title = "request", "Request to "+r.Role
		e.Detail = r.Request.Prompt
	case r.Response != nil:
		rs := r.Response
		e.Kind = "answer"
		e.Title = strings.TrimSpace(rs.Status + " " + rs.Action)
		e.Detail = rs.Summary
		if rs.ErrorCode != "" {
			e.Detail = rs.ErrorCode + ": " + rs.Error + "\n" + rs.Summary
		}
		e.Items = append(e.Items, rs.EvidenceFiles...)
		for _, w := range rs.Warnings {
			e.Items = append(e.Items, "warning: "+w)
		}
	case r.Transition != nil:
		e.Kind, e.Title = "transition", r.Transition.From+" → "+r.Transition.To
		e.Who, e.Detail = r.Transition.Actor, r.Transition.Reason
	case r.Steward != nil:
		e.Kind, e.Title, e.Who = "steward", "Steward: "+r.Steward.Command, "Steward"
		e.Detail = strings.TrimSpace(r.Steward.Reason + "\n" + r.Steward.Guidance)
	case r.RecoveryPoint != nil:
		e.Kind, e.Title = "checkpoint", "Recovery point "+r.RecoveryPoint.CheckpointID
		e.Detail = r.RecoveryPoint.Description
		e.Items = r.RecoveryPoint.RollbackFiles
	case r.Error != nil:
		e.Kind, e.Title, e.Detail = "error", "Error "+r.Error.Code, r.Error.Message
	case r.Event != nil:
		e.Kind, e.Title, e.Detail = "event", "Protocol event "+r.Event.Type, r.Event.Subject
	case len(r.Message) > 0:
		e.Kind, e.Title, e.Detail = "message", "Ledger message", string(r.Message)
	default:
		return e, false
	}
	return e, true
}

func shortTime(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func trimFloat(v float64, prec int) string {
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

// prettyJSON is v as indented JSON text (escaped by the template).
func prettyJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return ""
	}
	return string(b)
}
