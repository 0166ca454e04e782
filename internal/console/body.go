package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/logist/logist/internal/jsonkeys"
)

// A steward action's parameters come one of two ways, never both:
//
//   - the API (/api/v1/...) reads a JSON object (readJSON): the body's
//     Content-Type is application/json, or the body is empty;
//   - a page's form posts to the page's own path (/jobs/{id}/ACTION,
//     /schedules/{id}/pause|resume) as application/x-www-form-urlencoded
//     (readForm), and is sent back to a page.
//
// Whichever way, a field the command does not take, a value given twice,
// a second JSON value, a query string on a POST or a body of another type
// is refused before anything is done: a command never runs without a
// parameter its caller sent.

// maxBody bounds a POST's body (the CLI's reply limit).
const maxBody = 4 << 20

// maxLoginForm bounds the login's form: a token and the page to go to,
// read before anyone is known (the route is public), so far below maxBody.
const maxLoginForm = 64 << 10

// Media types of the bodies the console reads.
const (
	jsonType = "application/json"
	formType = "application/x-www-form-urlencoded"
)

// mediaError is a body of a type the endpoint does not read: 415.
type mediaError struct{ msg string }

func (e *mediaError) Error() string { return e.msg }

// tooLargeError is a body over maxBody: 413.
type tooLargeError struct{ msg string }

func (e *tooLargeError) Error() string { return e.msg }

// readError is the refusal of a body (where: "body" or "form") whose
// reading failed with err: 413 naming the limit when it is over it,
// else 400.
func readError(where string, err error) error {
	var big *http.MaxBytesError
	if errors.As(err, &big) {
		return &tooLargeError{fmt.Sprintf("%s: larger than the limit of %s", where, sizeText(big.Limit))}
	}
	return usagef("%s: %v", where, err)
}

// sizeText states a limit of n bytes: in the largest of MiB and KiB that
// divides it, with the bytes ("4 MiB (4194304 bytes)", "64 KiB (65536
// bytes)"), else in bytes alone ("1000 bytes"); never a rounded figure.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB (%d bytes)", n>>20, n)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB (%d bytes)", n>>10, n)
	}
	return fmt.Sprintf("%d bytes", n)
}

// bodyShape is what a command's body may hold: its name (for messages)
// and its fields, the CLI's flags of the command.
type bodyShape struct {
	name   string
	fields []string
	// answerFields: a page's form may carry the answer as the reply
	// form's f.KIND.NAME fields (answerFromForm).
	answerFields bool
}

var (
	filterFields = []string{"filter", "all"}
	resumeFields = []string{"guidance", "cost_threshold", "time_threshold_minutes", "max_agent_calls"}
)

// actionShapes are the bodies of the actions on one job (Actions).
var actionShapes = map[string]bodyShape{
	"halt":     {name: "halt", fields: []string{"reason"}},
	"resume":   {name: "resume", fields: resumeFields},
	"rollback": {name: "rollback", fields: []string{"checkpoint", "guidance", "reason"}},
	"reply":    {name: "reply", fields: []string{"as", "answer"}, answerFields: true},
	"pm":       {name: "pm", fields: []string{"decision", "reason", "guidance"}},
	"play":     {name: "play", fields: []string{"as", "move", "answer"}, answerFields: true},
}

// bulkShapes are the bodies of POST /api/v1/jobs:ACTION.
var bulkShapes = map[string]bodyShape{
	"halt":   {name: "jobs:halt", fields: append(slices.Clone(filterFields), "reason")},
	"resume": {name: "jobs:resume", fields: append(slices.Clone(filterFields), resumeFields...)},
}

// scheduleShape is the body of a schedule's pause and resume.
var scheduleShape = bodyShape{name: "schedules pause/resume", fields: []string{"reason"}}

func (s bodyShape) refuse(where, field string) error {
	return usagef("%s: %s takes no field %q (it takes %s)", where, s.name, field, strings.Join(s.fields, ", "))
}

// mediaType is the request's Content-Type without its parameters ("" for
// none; the header itself when it does not parse).
func mediaType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ct
	}
	return mt
}

func isForm(r *http.Request) bool { return mediaType(r) == formType }

// noQuery refuses a POST's query string: its parameters go in the body.
func noQuery(r *http.Request) error {
	if r.URL.RawQuery != "" {
		return usagef("query %q: a POST takes its parameters in its body, not the URL", r.URL.RawQuery)
	}
	return nil
}

// readJSON is the API's one rule for a request body: at most one JSON
// object (an empty body is {}), of Content-Type application/json (charset
// utf-8, if named), holding only the fields of shape, decoded into v; no
// query string. A form, a multipart body, text, or a body without a
// Content-Type is 415; a body over maxBody is 413; anything after the
// object is 400.
func readJSON(w http.ResponseWriter, r *http.Request, shape bodyShape, v any) error {
	if err := noQuery(r); err != nil {
		return err
	}
	ct := r.Header.Get("Content-Type")
	if ct != "" {
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil {
			return &mediaError{fmt.Sprintf("body: Content-Type %q: the API takes %s", ct, jsonType)}
		}
		if mt != jsonType {
			return &mediaError{fmt.Sprintf("body: Content-Type %s: the API takes %s", mt, jsonType)}
		}
		for k, p := range params {
			if k != "charset" || !strings.EqualFold(p, "utf-8") {
				return &mediaError{fmt.Sprintf("body: Content-Type %s; %s=%s: the API takes %s (charset utf-8)", mt, k, p, jsonType)}
			}
		}
	}
	raw, err := io.ReadAll(http.MaxBytesReader(rawWriter(w), r.Body, maxBody))
	if err != nil {
		return readError("body", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if ct == "" {
		return &mediaError{"body: no Content-Type: the API takes " + jsonType}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var first json.RawMessage
	if err := dec.Decode(&first); err != nil {
		return usagef("body: %v", err)
	}
	var more json.RawMessage
	if err := dec.Decode(&more); err == nil {
		return usagef("body: more than one JSON value")
	} else if !errors.Is(err, io.EOF) {
		return usagef("body: after the JSON value: %v", err)
	}
	var fields map[string]json.RawMessage
	if bytes.TrimSpace(first)[0] != '{' || json.Unmarshal(first, &fields) != nil {
		return usagef("body: a JSON object is required")
	}
	// Go keeps a key's last value: a key given twice is refused, as a
	// form's field given twice is (first decoded, so nested at most as
	// deep as encoding/json takes).
	if key, at := jsonkeys.Duplicate(first); key != "" {
		return usagef("body: key %q given twice in the object at %s", key, at)
	}
	for k := range fields {
		if !slices.Contains(shape.fields, k) {
			return shape.refuse("body", k)
		}
	}
	one := json.NewDecoder(bytes.NewReader(first))
	one.DisallowUnknownFields() // a bulk action's filter
	if err := one.Decode(v); err != nil {
		return usagef("body: %v", err)
	}
	return nil
}

// parseForm reads a form body (application/x-www-form-urlencoded) into
// r.PostForm, under the API's cap: a body over maxBody is 413 naming the
// limit (readError), one that does not parse 400. It is the one read of a
// form, whoever reads it first: the guard, for a session's CSRF field
// (csrfToken), or readForm, for the command's fields. A form read already
// is not read again (the guard answers when its read fails).
func parseForm(w http.ResponseWriter, r *http.Request) error {
	return parseFormUnder(w, r, maxBody)
}

// parseFormUnder is parseForm under a cap of limit bytes (the login's
// form: maxLoginForm).
func parseFormUnder(w http.ResponseWriter, r *http.Request, limit int64) error {
	if r.PostForm != nil {
		return nil
	}
	raw, err := io.ReadAll(http.MaxBytesReader(rawWriter(w), r.Body, limit))
	if err != nil {
		return readError("form", err)
	}
	f, err := url.ParseQuery(string(raw))
	if err != nil {
		return usagef("form: %v", err)
	}
	r.PostForm = f
	return nil
}

// readForm is a page's form (application/x-www-form-urlencoded): the
// fields of shape, each at most once, besides the form's CSRF token and
// idempotency key (and, for an answer, the f.KIND.NAME fields). Any
// other Content-Type is 415.
func readForm(w http.ResponseWriter, r *http.Request, shape bodyShape) (ActionBody, error) {
	var b ActionBody
	if err := noQuery(r); err != nil {
		return b, err
	}
	if mt := mediaType(r); mt != formType {
		if mt == "" {
			mt = "none"
		}
		return b, &mediaError{fmt.Sprintf("body: Content-Type %s: a page's form posts %s (scripts use the API, /api/v1/, with %s)", mt, formType, jsonType)}
	}
	if err := parseForm(w, r); err != nil {
		return b, err
	}
	f := r.PostForm
	for k, vals := range f {
		switch {
		case k == csrfField || k == keyField:
		case shape.answerFields && strings.HasPrefix(k, "f."):
			// answerFromForm checks their kinds.
		case !slices.Contains(shape.fields, k):
			return b, shape.refuse("form", k)
		case len(vals) > 1:
			return b, usagef("form: field %q given %d times", k, len(vals))
		}
	}
	b.Reason, b.Guidance, b.Checkpoint, b.As, b.Decision = f.Get("reason"), f.Get("guidance"), f.Get("checkpoint"), f.Get("as"), f.Get("decision")
	b.Move = f.Get("move")
	if a := strings.TrimSpace(f.Get("answer")); a != "" {
		b.Answer = json.RawMessage(a)
	} else if a, err := answerFromForm(f); err != nil {
		return b, usagef("%v", err)
	} else if a != nil {
		b.Answer = a
	}
	for name, dst := range map[string]**float64{"cost_threshold": &b.CostThreshold, "time_threshold_minutes": &b.TimeThresholdMinutes} {
		if s := strings.TrimSpace(f.Get(name)); s != "" {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return b, usagef("%s: %q is not a number", name, s)
			}
			*dst = &v
		}
	}
	if s := strings.TrimSpace(f.Get("max_agent_calls")); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			return b, usagef("max_agent_calls: %q is not a whole number", s)
		}
		b.MaxAgentCalls = &v
	}
	return b, nil
}
