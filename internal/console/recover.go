package console

import (
	"fmt"
	"net/http"
	"runtime/debug"

	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/textsafe"
)

// A handler's panic is answered in one place (ServeHTTP, recovered): it
// is logged, and the request answered as any other error is, 500 with the
// API's error envelope (code "error") or the error page, unless the
// handler had begun its answer: that one is cut off (http.ErrAbortHandler:
// the client sees a broken response, not a 200 that looks whole).

// watchedWriter is the ResponseWriter the handlers get: it tells whether
// the answer was begun (its status or any byte sent). It flushes (an event
// stream needs it) and unwraps (http.ResponseController, rawWriter).
type watchedWriter struct {
	http.ResponseWriter
	begun bool
}

func (w *watchedWriter) WriteHeader(status int) {
	if status >= 200 { // 1xx: informational, the answer is still to come
		w.begun = true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *watchedWriter) Write(b []byte) (int, error) {
	w.begun = true
	return w.ResponseWriter.Write(b)
}

func (w *watchedWriter) Flush() {
	w.begun = true // a flush sends the header
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *watchedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// rawWriter is the server's own ResponseWriter under w's wrappers:
// http.MaxBytesReader tells it of a body over its limit (it then closes
// the connection), which it cannot through a wrapper.
func rawWriter(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

// recovered, deferred by ServeHTTP, answers a handler's panic. r is the
// request the mux matched (its pattern and path values set). The log line
// has the request's method, path and route, the job's id when the route
// names a valid one, the panic's value and the stack; what a request or a
// panic carries (agent text) is logged escaped (textsafe.Line).
func (c *Console) recovered(w *watchedWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == any(http.ErrAbortHandler) {
		panic(v) // a handler's own abort: net/http's, unlogged
	}
	attrs := []any{"method", textsafe.Line(r.Method), "path", textsafe.Line(r.URL.Path), "panic", textsafe.Line(fmt.Sprint(v)), "begun", w.begun}
	if r.Pattern != "" {
		attrs = append(attrs, "route", r.Pattern)
	}
	if id := r.PathValue("id"); id != "" && manifest.ValidID(id) == nil {
		attrs = append(attrs, "job_id", id)
	}
	attrs = append(attrs, "stack", string(debug.Stack()))
	c.o.Logger.Error("console handler panicked", attrs...)
	if w.begun {
		panic(http.ErrAbortHandler)
	}
	c.fail(w, r, http.StatusInternalServerError, "error", "internal error: the server failed to answer this request (its log says why)")
}
