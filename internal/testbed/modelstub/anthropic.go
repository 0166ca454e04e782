package modelstub

// Anthropic Messages API (POST /v1/messages), the protocol of Claude Code:
// a streamed sequence of typed SSE events (message_start,
// content_block_start/delta/stop, message_delta, message_stop) or one
// message object when the request does not stream. Claude Code appends
// ?beta=true to the path, sends the working directory in an environment
// message, and probes HEAD /api/hello before its first request.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
)

func init() {
	protocolRoutes = append(protocolRoutes,
		route{"POST /v1/messages", (*Server).anthropic},
		route{"POST /v1/messages/count_tokens", (*Server).anthropicCountTokens},
		// Claude Code's connectivity probe.
		route{"/api/hello", func(s *Server, w http.ResponseWriter, r *http.Request) {
			s.record(Logged{Protocol: Anthropic, Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Turn: &Turn{Protocol: Anthropic, Path: r.URL.Path, Side: true}})
			w.WriteHeader(http.StatusOK)
		}},
	)
	// Claude Code's Write tool takes an absolute file_path; the handler
	// makes a relative one absolute against the working directory the
	// program announced.
	if _, ok := writeTools["Write"]; !ok {
		writeTools["Write"] = func(w FileWrite) map[string]any {
			return map[string]any{"file_path": w.Path, "content": w.Content}
		}
	}
}

// AnthropicStructuredTool is the tool Claude Code offers with --json-schema:
// the model gives the structured answer as this tool's input.
const AnthropicStructuredTool = "StructuredOutput"

type anthropicRequest struct {
	Model     string             `json:"model"`
	System    json.RawMessage    `json:"system"`
	Messages  []anthropicMessage `json:"messages"`
	Tools     []anthropicTool    `json:"tools"`
	Stream    bool               `json:"stream"`
	MaxTokens int                `json:"max_tokens"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or blocks
}

type anthropicTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// anthropicBlock is one content block of a message.
type anthropicBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Name    string          `json:"name"`
	Input   json.RawMessage `json:"input"`
	Content json.RawMessage `json:"content"` // tool_result: a string or blocks
}

// anthropicBlocks reads a content field: a plain string is one text block.
func anthropicBlocks(raw json.RawMessage) []anthropicBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var bs []anthropicBlock
	_ = json.Unmarshal(raw, &bs) // neither a string nor blocks: no blocks
	return bs
}

// anthropicText joins the text of a content field.
func anthropicText(raw json.RawMessage) string {
	var parts []string
	for _, b := range anthropicBlocks(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

var anthropicCwd = regexp.MustCompile(`(?m)Primary working directory: (.+)$`)

// anthropicTurn reads a request into a protocol-neutral Turn, and the
// working directory the program announced ("" if none).
func anthropicTurn(path string, req *anthropicRequest) (*Turn, string) {
	t := &Turn{Protocol: Anthropic, Path: path, Model: req.Model, Stream: req.Stream, System: anthropicText(req.System)}
	for _, m := range req.Messages {
		for _, b := range anthropicBlocks(m.Content) {
			switch b.Type {
			case "text":
				t.Messages = append(t.Messages, b.Text)
			case "tool_use":
				t.Messages = append(t.Messages, "call "+b.Name+" "+string(b.Input))
			case "tool_result":
				t.ToolResults++
				t.Messages = append(t.Messages, anthropicText(b.Content))
			}
		}
	}
	for _, tool := range req.Tools {
		t.Tools = append(t.Tools, Tool{Name: tool.Name, Params: tool.InputSchema})
	}
	cwd := ""
	if m := anthropicCwd.FindStringSubmatch(t.System + "\n" + strings.Join(t.Messages, "\n")); m != nil {
		cwd = strings.TrimSpace(m[1])
	}
	// Side requests (a session title, a summary, a quota probe) come
	// without tools; the conversation always offers some.
	t.Side = len(req.Tools) == 0
	return t, cwd
}

func (s *Server) anthropicCountTokens(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	s.record(Logged{Protocol: Anthropic, Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body,
		Turn: &Turn{Protocol: Anthropic, Path: r.URL.Path, Side: true}})
	anthropicJSON(w, http.StatusOK, map[string]any{"input_tokens": max(s.opts.Usage.Input, 1)})
}

func (s *Server) anthropic(w http.ResponseWriter, r *http.Request) {
	var req anthropicRequest
	l, err := s.readRequest(r, Anthropic, &req)
	if err != nil {
		anthropicError(w, http.StatusBadRequest, "", "modelstub: request is not JSON: "+err.Error())
		return
	}
	t, cwd := anthropicTurn(r.URL.Path, &req)
	l.Turn = t
	rep := s.decide(t)
	if tc := rep.ToolCall; tc != nil && tc.Name == "Write" && cwd != "" {
		if p, _ := tc.Args["file_path"].(string); p != "" && !filepath.IsAbs(p) {
			tc.Args["file_path"] = filepath.Join(cwd, p)
		}
	}
	structured := false
	for _, tool := range t.Tools {
		structured = structured || tool.Name == AnthropicStructuredTool
	}
	if rep.ToolCall == nil && structured && (rep.Failure == nil || rep.Failure.Status == 0) {
		// With --json-schema the answer is the structured tool's input.
		var in map[string]any
		if json.Unmarshal([]byte(rep.Text), &in) == nil {
			rep.ToolCall = &ToolCall{ID: fmt.Sprintf("call_%s", rep.ID), Name: AnthropicStructuredTool, Args: in}
		}
	}
	l.Reply = rep
	s.record(l)

	if playFailure(w, r, rep.Failure, func(status int, retryAfter string) { anthropicError(w, status, retryAfter, "") }) {
		return
	}
	model := req.Model
	if model == "" {
		model = "claude-stub"
	}
	e := &anthropicEncoder{rep: rep, model: model, chunks: s.chunks(3)}
	if !req.Stream {
		e.whole(w)
		return
	}
	e.stream(w)
}

type anthropicEncoder struct {
	rep    *Reply
	model  string
	chunks int // deltas of the answer text
}

// usage is the reply's usage in Anthropic's terms: input_tokens are the
// uncached ones, cache reads are counted apart.
func (e *anthropicEncoder) usage(final bool) map[string]any {
	u := e.rep.Usage
	out := int64(1)
	if final {
		out = u.Output
	}
	return map[string]any{"input_tokens": max(u.Input-u.Cached, 0), "output_tokens": out,
		"cache_read_input_tokens": u.Cached, "cache_creation_input_tokens": 0}
}

func (e *anthropicEncoder) stopReason() string {
	if e.rep.ToolCall != nil {
		return "tool_use"
	}
	return "end_turn"
}

func (e *anthropicEncoder) toolID() string {
	if e.rep.ToolCall.ID != "" {
		return e.rep.ToolCall.ID
	}
	return "toolu_" + e.rep.ID
}

// message is the whole message (the non-streaming reply), or its start.
func (e *anthropicEncoder) message(whole bool) map[string]any {
	m := map[string]any{"id": "msg_" + e.rep.ID, "type": "message", "role": "assistant", "model": e.model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": e.usage(whole)}
	if whole {
		if tc := e.rep.ToolCall; tc != nil {
			m["content"] = []any{map[string]any{"type": "tool_use", "id": e.toolID(), "name": tc.Name, "input": tc.Args}}
		} else {
			m["content"] = []any{map[string]any{"type": "text", "text": e.rep.Text}}
		}
		m["stop_reason"] = e.stopReason()
	}
	return m
}

// whole writes the non-streaming reply; a scripted Malformed or Cut
// breaks it too (Claude Code falls back to a non-streaming request when a
// stream fails).
func (e *anthropicEncoder) whole(w http.ResponseWriter) {
	b, _ := json.Marshal(e.message(true))
	f := e.rep.Failure
	switch {
	case f != nil && f.Malformed:
		b = []byte(`{"id":"msg_` + e.rep.ID + `","type":"message",` + "\x00not json")
	case f != nil && f.Cut:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b[:len(b)/2])
		cut(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func (e *anthropicEncoder) stream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f := e.rep.Failure
	if f != nil && f.Malformed {
		_ = sse(w, "message_start", `{"type":"message_start","message":{"id":`+"\x00not json")
		_ = sse(w, "content_block_delta", "}{]")
		return
	}
	_ = sse(w, "message_start", map[string]any{"type": "message_start", "message": e.message(false)})
	_ = sse(w, "ping", map[string]any{"type": "ping"})
	if tc := e.rep.ToolCall; tc != nil {
		args, _ := json.Marshal(tc.Args)
		_ = sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": e.toolID(), "name": tc.Name, "input": map[string]any{}}})
		for i, part := range split(string(args), 3) {
			_ = sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			if i == 0 && f != nil && f.Cut {
				// The start of the answer, then the connection drops.
				cut(w)
				return
			}
		}
	} else {
		_ = sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		for i, part := range split(e.rep.Text, e.chunks) {
			_ = sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "text_delta", "text": part}})
			if i == 0 && f != nil && f.Cut {
				// The start of the answer, then the connection drops.
				cut(w)
				return
			}
		}
	}
	_ = sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	_ = sse(w, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": e.stopReason(), "stop_sequence": nil}, "usage": e.usage(true)})
	_ = sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

// anthropicError writes an error body in the Messages API's shape.
func anthropicError(w http.ResponseWriter, status int, retryAfter, msg string) {
	typ, def := "api_error", "Internal server error"
	switch status {
	case http.StatusBadRequest:
		typ, def = "invalid_request_error", "Invalid request"
	case http.StatusUnauthorized:
		typ, def = "authentication_error", "invalid x-api-key"
	case http.StatusForbidden:
		typ, def = "permission_error", "Your API key does not have permission to use the specified resource."
	case http.StatusNotFound:
		typ, def = "not_found_error", "Not found"
	case http.StatusTooManyRequests:
		typ, def = "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"
	case 529:
		typ, def = "overloaded_error", "Overloaded"
	}
	if msg == "" {
		msg = def
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Request-Id", "req_stub")
	anthropicJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

func anthropicJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
