// Package modelstub is a scripted model API for tests: it listens on
// 127.0.0.1 and speaks the wire protocols agent CLIs use — Anthropic
// Messages (SSE), OpenAI Responses (SSE), OpenAI Chat Completions
// (streaming) and Gemini streamGenerateContent (SSE). Every protocol plays
// the same scripted conversation: first a call of the program's own file
// write tool, then, once the tool's result is in the conversation, the
// final answer text. Scripted failures (401, 429, 500, malformed, a stream
// cut mid-answer, slow) are queued with Fail.
//
// Each protocol is one file: it decodes a request into a Turn, asks
// Server.decide for a Reply, and encodes the Reply in its own format.
package modelstub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Protocols the stub speaks (Turn.Protocol, Logged.Protocol).
const (
	Anthropic = "anthropic-messages"
	Responses = "openai-responses"
	Chat      = "openai-chat"
	Gemini    = "gemini"
)

// Options is the scripted conversation.
type Options struct {
	// Write is the file the program is asked to create with its own write
	// tool ("" Path: no tool call, the answer comes at once). Path is
	// relative to the program's working directory.
	Write FileWrite
	// Answer is the final text (the JSON answer Logist validates).
	Answer string
	// Usage is reported on every reply.
	Usage Usage
	// SessionTag, if set, is echoed in response ids so tests can tell
	// replies apart.
	SessionTag string
	// Answers, if set, are the final texts of successive conversations,
	// in order (the last one repeats); Answer is used when empty.
	Answers []string
	// Model is the model the stub lists (GET /v1/models) besides the
	// ones it was asked for.
	Model string
	// Chunks, if set, is how many streamed deltas a final answer text is
	// split into (each protocol's default is 3 or 4), so that a test can
	// play a long stream.
	Chunks int
}

// FileWrite is a file the stub asks the program to write.
type FileWrite struct {
	Path    string
	Content string
}

// Usage is the token usage reported with each reply.
type Usage struct {
	Input, Output, Cached int64
}

// Failure is what the next model request gets instead of a reply.
type Failure struct {
	// Status, if non-zero, is an HTTP error status with an error body in
	// the protocol's shape (401, 429, 500, ...).
	Status int
	// RetryAfter is sent as the Retry-After header with Status.
	RetryAfter string
	// Malformed replies 200 with a stream whose events are not JSON.
	Malformed bool
	// Cut sends the start of the reply and then drops the connection in
	// the middle of the answer text.
	Cut bool
	// Delay waits before replying (or until the client gives up).
	Delay time.Duration
}

// Tool is a tool the program offered the model.
type Tool struct {
	Name string
	// Params is the tool's JSON schema as sent (may be empty).
	Params json.RawMessage
}

// Turn is one model request, protocol-neutral.
type Turn struct {
	Protocol string
	Path     string
	Model    string
	Stream   bool
	System   string
	// Messages is every message text in order (user, assistant, tool
	// results), for tests that check what the model was told.
	Messages []string
	Tools    []Tool
	// ToolResults counts tool results already in the conversation.
	ToolResults int
	// Side marks a request that is not the main conversation (a title,
	// a summary, a quota probe, a next-speaker check): it gets a short
	// text reply and never consumes a scripted failure.
	Side bool
}

// ToolCall is a call of one of the program's tools.
type ToolCall struct {
	ID   string
	Name string
	Args map[string]any
}

// Reply is what the model says, protocol-neutral.
type Reply struct {
	ID       string
	ToolCall *ToolCall
	Text     string
	Usage    Usage
	Failure  *Failure
}

// Logged is one request the stub received.
type Logged struct {
	Protocol string
	Method   string
	Path     string
	Header   http.Header
	Body     []byte
	Turn     *Turn
	Reply    *Reply
}

// Server is a running stub.
type Server struct {
	// URL is the root, e.g. http://127.0.0.1:PORT (protocol paths below it:
	// /v1/messages, /v1/responses, /v1/chat/completions,
	// /v1beta/models/M:streamGenerateContent).
	URL string

	opts     Options
	ln       net.Listener
	srv      *http.Server
	mu       sync.Mutex
	failures []Failure
	log      []Logged
	seq      int
	answered int // final answers given (Options.Answers)
}

// Start listens on 127.0.0.1 (a free port) and serves until Close.
func Start(opts Options) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("modelstub: listen: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), opts: opts, ln: ln}
	mux := http.NewServeMux()
	s.routes(mux)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }() // ends at Close, with ErrServerClosed
	return s, nil
}

// Close stops the server and drops open connections.
func (s *Server) Close() error { return s.srv.Close() }

// Fail queues failures: the next len(f) main-conversation requests get
// them, in order.
func (s *Server) Fail(f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, f...)
}

// Requests returns every request received so far.
func (s *Server) Requests() []Logged {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Logged(nil), s.log...)
}

// MainTurns counts the main-conversation requests received.
func (s *Server) MainTurns() int {
	n := 0
	for _, l := range s.Requests() {
		if l.Turn != nil && !l.Turn.Side {
			n++
		}
	}
	return n
}

func (s *Server) record(l Logged) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, l)
}

// maxBody bounds a request body the stub reads.
const maxBody = 64 << 20

// readRequest starts the log entry of a model request and decodes its
// JSON body into v. A body that cannot be read or decoded is recorded as
// it came (the caller answers 400 with the error); otherwise the caller
// fills in the entry's Turn and Reply and records it.
func (s *Server) readRequest(r *http.Request, protocol string, v any) (Logged, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	l := Logged{Protocol: protocol, Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	if err == nil {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		s.record(l)
	}
	return l, err
}

// playFailure plays a reply's scripted failure, if any, up to its error
// status: Retry-After is set, the body is writeError's, in the protocol's
// shape. It reports
// whether the reply is over: the client gave up during the delay, or the
// error went out. A pure delay is followed by the reply.
func playFailure(w http.ResponseWriter, r *http.Request, f *Failure, writeError func(status int, retryAfter string)) bool {
	if f == nil {
		return false
	}
	if f.Delay > 0 && !sleep(r.Context(), f.Delay) {
		return true
	}
	if f.Status == 0 {
		return false
	}
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	writeError(f.Status, f.RetryAfter)
	return true
}

// sleep waits d or until the client gives up (false).
func sleep(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// decide plays the script for one turn: a queued failure, else the write
// tool call if the program offered a write tool and no tool result is in
// the conversation yet, else the final answer.
func (s *Server) decide(t *Turn) *Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	r := &Reply{ID: fmt.Sprintf("stub%s-%d", s.opts.SessionTag, s.seq), Usage: s.opts.Usage}
	if t.Side {
		r.Text = "ok"
		return r
	}
	if len(s.failures) > 0 {
		f := s.failures[0]
		s.failures = s.failures[1:]
		r.Failure = &f
		if f.Status != 0 || f.Malformed || f.Cut {
			r.Text = s.opts.Answer // a cut stream starts the answer
			return r
		}
		// A pure delay still answers, late.
	}
	if s.opts.Write.Path != "" && t.ToolResults == 0 {
		if tc := writeCall(t.Tools, s.opts.Write); tc != nil {
			tc.ID = fmt.Sprintf("call_%d", s.seq)
			r.ToolCall = tc
			return r
		}
	}
	r.Text = s.finalAnswer()
	return r
}

// finalAnswer is the current answer of Answers (each main-conversation
// final answer advances it), else Answer.
func (s *Server) finalAnswer() string {
	if len(s.opts.Answers) == 0 {
		return s.opts.Answer
	}
	a := s.opts.Answers[min(s.answered, len(s.opts.Answers)-1)]
	s.answered++
	return a
}

// writeTools maps the file-write tools of the programs we know to the
// arguments they take. Names are matched case-sensitively first, then
// case-insensitively.
var writeTools = map[string]func(w FileWrite) map[string]any{
	// Filled in per protocol/program (see the protocol files).
}

func writeCall(tools []Tool, w FileWrite) *ToolCall {
	for _, t := range tools {
		if f, ok := writeTools[t.Name]; ok {
			return &ToolCall{Name: t.Name, Args: f(w)}
		}
	}
	for _, t := range tools {
		for name, f := range writeTools {
			if strings.EqualFold(name, t.Name) {
				return &ToolCall{Name: t.Name, Args: f(w)}
			}
		}
	}
	return nil
}

func (s *Server) routes(mux *http.ServeMux) {
	// Each protocol file adds its routes in an init-time table.
	for _, r := range protocolRoutes {
		r := r
		mux.HandleFunc(r.pattern, func(w http.ResponseWriter, req *http.Request) { r.handle(s, w, req) })
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		s.record(Logged{Method: req.Method, Path: req.URL.Path, Header: req.Header.Clone()})
		http.Error(w, `{"error":{"message":"modelstub: no such endpoint"}}`, http.StatusNotFound)
	})
}

type route struct {
	pattern string
	handle  func(s *Server, w http.ResponseWriter, r *http.Request)
}

// protocolRoutes is filled by the protocol files' init functions.
var protocolRoutes []route

// sse writes one server-sent event and flushes it. Callers check the
// first event's error (a client gone before the answer began) and ignore
// the rest's, as they do a plain body's write errors: a client that goes
// away midway is for the test that drove it to notice.
func sse(w http.ResponseWriter, event string, data any) error {
	var b []byte
	switch d := data.(type) {
	case string:
		b = []byte(d)
	case []byte:
		b = d
	default:
		var err error
		if b, err = json.Marshal(d); err != nil {
			return err
		}
	}
	if event != "" {
		if _, err := fmt.Fprintf(w, "event: %s\n", event); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
		return err
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// cut drops the connection without finishing the response.
func cut(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close() // dropped on purpose: how it closes is no matter
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// chunks is the number of deltas a final answer text is streamed in:
// Options.Chunks, else the protocol's default.
func (s *Server) chunks(def int) int {
	if s.opts.Chunks > 0 {
		return s.opts.Chunks
	}
	return def
}

// split cuts a text into a few streaming deltas.
func split(s string, n int) []string {
	if n <= 1 || len(s) <= n {
		return []string{s}
	}
	var out []string
	size := (len(s) + n - 1) / n
	for len(s) > 0 {
		k := min(size, len(s))
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}
