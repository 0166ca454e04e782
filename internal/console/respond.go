package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/textsafe"
)

type callerKey struct{}

func withCaller(ctx context.Context, who caller) context.Context {
	return context.WithValue(ctx, callerKey{}, who)
}

func callerOf(r *http.Request) caller {
	who, _ := r.Context().Value(callerKey{}).(caller)
	return who
}

// httpStatus is the HTTP status of an exit code (jobview.ExitCode).
var httpStatus = map[int]int{
	jobview.ExitUsage:      http.StatusBadRequest,
	jobview.ExitOutOfOrder: http.StatusConflict,
	jobview.ExitPermission: http.StatusForbidden,
	jobview.ExitNotFound:   http.StatusNotFound,
}

// writeJSON answers v with status, the runes a terminal acts on escaped
// as the CLI's JSON does (the values unchanged).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"ok": false, "error": {"code": "error", "message": "encode output"}}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(textsafe.EscapeJSON(b))
	_, _ = w.Write([]byte("\n"))
}

// ok answers the CLI's success envelope: {"ok": true, "message", DATA}.
func ok(w http.ResponseWriter, msg string, data map[string]any) {
	obj := map[string]any{"ok": true}
	if msg != "" {
		obj["message"] = msg
	}
	for k, v := range data {
		obj[k] = v
	}
	writeJSON(w, http.StatusOK, obj)
}

// failErr answers a command's error as the CLI's envelope does, with the
// HTTP status of its exit code.
func (c *Console) failErr(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, clusterstore.ErrIdempotency) {
		// A key reused by another command: a conflict, not the
		// caller's syntax (the CLI's exit 2, cli.clusterExit).
		c.reply(w, r, http.StatusConflict, map[string]any{"code": "idempotency_conflict", "exit_code": jobview.ExitOutOfOrder, "message": err.Error()})
		return
	}
	var media *mediaError
	if errors.As(err, &media) {
		c.reply(w, r, http.StatusUnsupportedMediaType, map[string]any{"code": "unsupported_media_type", "exit_code": jobview.ExitUsage, "message": err.Error()})
		return
	}
	var big *tooLargeError
	if errors.As(err, &big) {
		c.reply(w, r, http.StatusRequestEntityTooLarge, map[string]any{"code": "request_too_large", "exit_code": jobview.ExitUsage, "message": err.Error()})
		return
	}
	code := jobview.ExitCode(err)
	status, known := httpStatus[code]
	if !known {
		status = http.StatusInternalServerError
	}
	c.reply(w, r, status, jobview.ErrorBody(err))
}

// fail answers a refusal of the console's own (401, 403, 400, 404, 405).
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	exit := jobview.ExitUsage
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		exit = jobview.ExitPermission
	case http.StatusNotFound:
		exit = jobview.ExitNotFound
	}
	c.reply(w, r, status, map[string]any{"code": code, "exit_code": exit, "message": msg})
}

func (c *Console) reply(w http.ResponseWriter, r *http.Request, status int, body map[string]any) {
	if wantsHTML(r) {
		msg, _ := body["message"].(string)
		c.renderStatus(w, r, status, "error", map[string]any{"Status": status, "Code": body["code"], "Message": msg})
		return
	}
	writeJSON(w, status, map[string]any{"ok": false, "error": body})
}

// wantsHTML: a form posted by a page, or a page's GET, is answered with
// a page; the API's callers get JSON, whatever they sent.
func wantsHTML(r *http.Request) bool {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		return false
	}
	return isForm(r) || strings.Contains(r.Header.Get("Accept"), "text/html")
}
