package console

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// logBook keeps the records a logger is given, their attributes as the
// handler got them (before any handler's own escaping).
type logBook struct {
	mu   sync.Mutex
	recs []map[string]string
}

func (b *logBook) Enabled(context.Context, slog.Level) bool { return true }
func (b *logBook) WithAttrs([]slog.Attr) slog.Handler       { return b }
func (b *logBook) WithGroup(string) slog.Handler            { return b }
func (b *logBook) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message, "level": r.Level.String()}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recs = append(b.recs, m)
	return nil
}

func (b *logBook) panics() []map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]string
	for _, m := range b.recs {
		if m["msg"] == "console handler panicked" {
			out = append(out, m)
		}
	}
	return out
}

// panicking serves the world's console with test-only routes whose
// handlers panic (behind the guard, as every route is): an API route and
// a page's, which panic before answering, one that panics after its
// answer began, and one that aborts (http.ErrAbortHandler).
func panicking(t *testing.T, w *world) (*httptest.Server, *logBook) {
	t.Helper()
	book := &logBook{}
	o := w.c.o
	o.Logger = slog.New(book)
	c := New(o)
	add := func(rt route) {
		c.mux.Handle(rt.Method+" "+rt.Pattern, c.guard(rt))
		c.patterns[rt.Method+" "+rt.Pattern] = true
	}
	boom := func(http.ResponseWriter, *http.Request) { panic("agent said " + hostile) }
	add(route{Method: "GET", Pattern: "/api/v1/jobs/{id}/boom", Need: Viewer, API: true, Handler: boom})
	add(route{Method: "GET", Pattern: "/jobs/{id}/boom", Need: Viewer, Handler: boom})
	add(route{Method: "GET", Pattern: "/api/v1/late-boom", Need: Viewer, API: true, Handler: func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"ok": true, "items": [`))
		w.(http.Flusher).Flush()
		panic("half way")
	}})
	add(route{Method: "GET", Pattern: "/api/v1/abort", Need: Viewer, API: true, Handler: func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler)
	}})
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv, book
}

// TestPanicIsAnswered: a handler's panic is logged (method, path, route,
// job id, the panic escaped) and answered as the API's other errors are,
// 500 with the error envelope, or a page's error page; the connection
// goes on serving.
func TestPanicIsAnswered(t *testing.T) {
	w := newWorld(t)
	srv, book := panicking(t, w)
	w2 := *w
	w2.srv = srv

	code, body := w2.call("GET", "/api/v1/jobs/done/boom", viewerTok, nil)
	e, _ := body["error"].(map[string]any)
	if code != http.StatusInternalServerError || body["ok"] != false || errCode(body) != "error" || e["exit_code"] != float64(1) || !strings.Contains(errMessage(body), "internal error") {
		t.Errorf("API panic: %d %v, want 500 with the error envelope", code, body)
	}
	if strings.Contains(errMessage(body), "agent said") {
		t.Errorf("API panic: the answer shows the panic: %v", body)
	}
	logs := book.panics()
	if len(logs) != 1 {
		t.Fatalf("panic logs %v, want 1", logs)
	}
	l := logs[0]
	if l["level"] != "ERROR" || l["method"] != "GET" || l["path"] != "/api/v1/jobs/done/boom" || l["route"] != "GET /api/v1/jobs/{id}/boom" || l["job_id"] != "done" || l["begun"] != "false" || !strings.Contains(l["stack"], "recover_test.go") {
		t.Errorf("panic log %v", l)
	}
	if !strings.Contains(l["panic"], `agent said <script>alert('x')</script>\x1b[31mred`) || strings.ContainsAny(l["panic"], "\x1b\x07") {
		t.Errorf("panic log's panic %q: want the agent's text escaped", l["panic"])
	}

	// A page's panic is the error page, for a browser.
	req, _ := http.NewRequest("GET", srv.URL+"/jobs/done/boom", nil)
	req.Header.Set("Authorization", "Bearer "+viewerTok)
	req.Header.Set("Accept", "text/html")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(page), "internal error") {
		t.Errorf("page panic: %d %q %.300s", resp.StatusCode, resp.Header.Get("Content-Type"), page)
	}

	// The server goes on: the same client's next request is answered.
	if code, _ := w2.call("GET", "/api/v1/jobs/done", viewerTok, nil); code != 200 {
		t.Errorf("after the panics: %d", code)
	}
}

// TestPanicAfterTheAnswerBeganAborts: a panic once the status was sent
// cuts the answer off (the client reads a broken body, not a 200 that
// looks whole); it is logged. A handler's own http.ErrAbortHandler is
// net/http's, not logged.
func TestPanicAfterTheAnswerBeganAborts(t *testing.T) {
	w := newWorld(t)
	srv, book := panicking(t, w)
	get := func(path string) (*http.Response, []byte, error) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+viewerTok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	resp, b, err := get("/api/v1/late-boom")
	if err == nil {
		t.Errorf("late panic: %d %q read whole, want the body cut off", resp.StatusCode, b)
	}
	if resp != nil && strings.Contains(string(b), `"error"`) {
		t.Errorf("late panic: an error envelope appended to the answer: %q", b)
	}
	logs := book.panics()
	if len(logs) != 1 || logs[0]["begun"] != "true" || logs[0]["panic"] != "half way" || logs[0]["job_id"] != "" {
		t.Errorf("late panic logs %v", logs)
	}
	if _, _, err := get("/api/v1/abort"); err == nil {
		t.Error("abort: answered")
	}
	if logs := book.panics(); len(logs) != 1 {
		t.Errorf("abort logged: %v", logs)
	}
}
