package modelstub

// OpenAI Chat Completions (POST /v1/chat/completions), the protocol of
// OpenCode's OpenAI-compatible providers, Qwen Code and Cline: streamed
// chat.completion.chunk lines ending in data: [DONE], or one
// chat.completion object when the request does not stream.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

func init() {
	protocolRoutes = append(protocolRoutes,
		route{"POST /v1/chat/completions", (*Server).chat},
		// Some programs join their base URL and the path themselves and
		// drop the /v1.
		route{"POST /chat/completions", (*Server).chat},
		route{"GET /v1/models", (*Server).chatModels},
		route{"GET /models", (*Server).chatModels},
	)
}

type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Tools         []chatTool    `json:"tools"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name string `json:"name"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatText is a message's text: content is a string or a list of parts.
func chatText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			if p.Text != "" {
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return string(raw)
}

// chatTurn decodes a request into the protocol-neutral Turn.
func chatTurn(path string, req *chatRequest) *Turn {
	t := &Turn{Protocol: Chat, Path: path, Model: req.Model, Stream: req.Stream}
	var sys []string
	for _, m := range req.Messages {
		text := chatText(m.Content)
		switch m.Role {
		case "system", "developer":
			sys = append(sys, text)
			continue
		case "tool":
			t.ToolResults++
		}
		for _, tc := range m.ToolCalls {
			text = strings.TrimSpace(text + "\n" + tc.Function.Name + " " + tc.Function.Arguments)
		}
		t.Messages = append(t.Messages, text)
	}
	t.System = strings.Join(sys, "\n")
	for _, tool := range req.Tools {
		t.Tools = append(t.Tools, Tool{Name: tool.Function.Name, Params: tool.Function.Parameters})
	}
	t.Side = chatSide(req, t)
	return t
}

// chatSideMarks are phrases of the programs' own side requests: OpenCode's
// title agent, summaries of a conversation for compaction, Qwen Code's
// next-speaker check.
var chatSideMarks = []string{
	"title generator",
	"generate a title",
	"thread title",
	"conversation title",
	"summarize the conversation",
	"summarize this conversation",
	"summary of the conversation",
	"next speaker",
	"next_speaker",
}

// chatSide tells the programs' side requests from the main conversation.
// A request asking for a JSON object (other than Logist's own answer
// schema) is one of Qwen Code's checks; a request without tools whose
// instructions name a title or a summary is a title or compaction call.
func chatSide(req *chatRequest, t *Turn) bool {
	if rf := req.ResponseFormat; rf != nil && (rf.Type == "json_object" || rf.Type == "json_schema") {
		if rf.JSONSchema == nil || rf.JSONSchema.Name != "logist_answer" {
			return true
		}
	}
	if len(req.Tools) > 0 {
		return false
	}
	text := strings.ToLower(t.System)
	if n := len(t.Messages); n > 0 {
		text += "\n" + strings.ToLower(t.Messages[n-1])
	}
	for _, m := range chatSideMarks {
		if strings.Contains(text, m) {
			return true
		}
	}
	return false
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	l, err := s.readRequest(r, Chat, &req)
	if err != nil {
		chatError(w, http.StatusBadRequest, "", "modelstub: request is not JSON: "+err.Error())
		return
	}
	t := chatTurn(r.URL.Path, &req)
	reply := s.decide(t)
	if tc := reply.ToolCall; tc != nil {
		chatAbsPath(tc, chatCwd(&req))
	}
	chatStructured(t, reply)
	l.Turn, l.Reply = t, reply
	s.record(l)
	if playFailure(w, r, reply.Failure, func(status int, _ string) {
		chatError(w, status, "", fmt.Sprintf("modelstub: scripted failure %d", status))
	}) {
		return
	}
	model := req.Model
	if model == "" {
		model = "stub-model"
	}
	if !req.Stream {
		chatWhole(w, reply, model)
		return
	}
	usage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	chatStream(w, reply, model, usage, s.chunks(4))
}

// chatCwdText is how the programs tell the model their working directory:
// Qwen Code ("I'm currently working in the directory: D"), OpenCode
// ("Working directory: D"), Cline ("Current Working Directory (D)").
var chatCwdText = regexp.MustCompile(`(?m)(?:I'm currently working in the directory: |Working directory: |Current Working Directory \()(/[^\n)]*)`)

// chatCwd is the working directory the program announced ("" if none).
func chatCwd(req *chatRequest) string {
	for _, m := range req.Messages {
		if c := chatCwdText.FindStringSubmatch(chatText(m.Content)); c != nil {
			return strings.TrimSpace(c[1])
		}
	}
	return ""
}

// chatAbsPath makes the write tool's relative path absolute against the
// working directory: some programs' tools (Qwen Code's write_file) take
// absolute paths only.
func chatAbsPath(tc *ToolCall, cwd string) {
	if cwd == "" {
		return
	}
	for _, k := range []string{"file_path", "absolute_path"} {
		if p, _ := tc.Args[k].(string); p != "" && !filepath.IsAbs(p) {
			tc.Args[k] = filepath.Join(cwd, p)
		}
	}
}

// ChatStructuredTool is the tool Qwen Code offers for the final answer
// under --json-schema: a model must call it with the answer object instead
// of writing the answer as text.
const ChatStructuredTool = "structured_output"

// chatStructured turns the final answer into a call of the structured
// output tool when the program offers one.
func chatStructured(t *Turn, r *Reply) {
	if t.Side || r.ToolCall != nil || r.Text == "" || (r.Failure != nil && (r.Failure.Status != 0 || r.Failure.Cut || r.Failure.Malformed)) {
		return
	}
	offered := false
	for _, tool := range t.Tools {
		offered = offered || tool.Name == ChatStructuredTool
	}
	var args map[string]any
	if !offered || json.Unmarshal([]byte(r.Text), &args) != nil {
		return
	}
	r.ToolCall = &ToolCall{ID: "call_" + r.ID, Name: ChatStructuredTool, Args: args}
	r.Text = ""
}

// chatError writes an OpenAI-style error body with the status.
func chatError(w http.ResponseWriter, status int, code, msg string) {
	typ := "server_error"
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		typ, code = "invalid_request_error", "invalid_api_key"
		msg = "Incorrect API key provided (modelstub)."
	case status == http.StatusTooManyRequests:
		typ, code = "rate_limit_exceeded", "rate_limit_exceeded"
		msg = "Rate limit reached (modelstub)."
	case status < 500:
		typ = "invalid_request_error"
	}
	if code == "" {
		code = http.StatusText(status)
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func chatUsage(u Usage) map[string]any {
	return map[string]any{
		"prompt_tokens":         u.Input,
		"completion_tokens":     u.Output,
		"total_tokens":          u.Input + u.Output,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.Cached},
	}
}

func chatArgs(tc *ToolCall) string {
	b, _ := json.Marshal(tc.Args)
	return string(b)
}

// chatWhole answers a request that does not stream.
func chatWhole(w http.ResponseWriter, r *Reply, model string) {
	if f := r.Failure; f != nil && f.Malformed {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id": "`+r.ID+`", "choices": [ {not json`)
		return
	}
	msg := map[string]any{"role": "assistant", "content": r.Text}
	finish := "stop"
	if r.ToolCall != nil {
		msg["content"] = nil
		msg["tool_calls"] = []any{map[string]any{"id": r.ToolCall.ID, "type": "function",
			"function": map[string]any{"name": r.ToolCall.Name, "arguments": chatArgs(r.ToolCall)}}}
		finish = "tool_calls"
	}
	b, _ := json.Marshal(map[string]any{
		"id": r.ID, "object": "chat.completion", "created": time.Now().Unix(), "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   chatUsage(r.Usage),
	})
	w.Header().Set("Content-Type", "application/json")
	if f := r.Failure; f != nil && f.Cut {
		_, _ = w.Write(b[:len(b)/2])
		cut(w)
		return
	}
	_, _ = w.Write(b)
}

// chatStream answers a streaming request: a role chunk, the text or the
// tool call in pieces, the finish reason, the usage chunk when asked for,
// and [DONE]. The text comes in chunks deltas.
func chatStream(w http.ResponseWriter, r *Reply, model string, includeUsage bool, chunks int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	created := time.Now().Unix()
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": r.ID, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	f := r.Failure
	if f != nil && f.Malformed {
		_ = sse(w, "", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
		_ = sse(w, "", `{"id": "`+r.ID+`", "choices": [ {not json`)
		_ = sse(w, "", "<html>modelstub: malformed</html>")
		_ = sse(w, "", "[DONE]")
		return
	}
	if err := sse(w, "", chunk(map[string]any{"role": "assistant", "content": ""}, nil)); err != nil {
		return
	}
	finish := "stop"
	if tc := r.ToolCall; tc != nil {
		finish = "tool_calls"
		_ = sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""}}}}, nil))
		for _, p := range split(chatArgs(tc), 3) {
			_ = sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0,
				"function": map[string]any{"arguments": p}}}}, nil))
		}
	} else {
		parts := split(r.Text, chunks)
		if f != nil && f.Cut {
			// Half the answer, then the connection drops: no finish
			// reason, no [DONE].
			for _, p := range parts[:(len(parts)+1)/2] {
				_ = sse(w, "", chunk(map[string]any{"content": p}, nil))
			}
			cut(w)
			return
		}
		for _, p := range parts {
			_ = sse(w, "", chunk(map[string]any{"content": p}, nil))
		}
	}
	_ = sse(w, "", chunk(map[string]any{}, finish))
	if includeUsage {
		_ = sse(w, "", map[string]any{"id": r.ID, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{}, "usage": chatUsage(r.Usage)})
	}
	_ = sse(w, "", "[DONE]")
}

// chatModels lists the models the programs asked for so far (some
// programs check the model exists before they start), or a default.
func (s *Server) chatModels(w http.ResponseWriter, r *http.Request) {
	s.record(Logged{Protocol: Chat, Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()})
	seen := map[string]bool{}
	var data []any
	add := func(m string) {
		if m != "" && !seen[m] {
			seen[m] = true
			data = append(data, map[string]any{"id": m, "object": "model", "created": 1700000000, "owned_by": "modelstub"})
		}
	}
	add(s.opts.Model)
	for _, l := range s.Requests() {
		if l.Turn != nil {
			add(l.Turn.Model)
		}
	}
	add("stub-model")
	b, _ := json.Marshal(map[string]any{"object": "list", "data": data})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func init() {
	// OpenCode's write tool (filePath resolves against the working
	// directory), Qwen Code's write_file.
	if _, ok := writeTools["write"]; !ok {
		writeTools["write"] = func(w FileWrite) map[string]any { return map[string]any{"filePath": w.Path, "content": w.Content} }
	}
	if _, ok := writeTools["write_file"]; !ok {
		writeTools["write_file"] = func(w FileWrite) map[string]any { return map[string]any{"file_path": w.Path, "content": w.Content} }
	}
}
