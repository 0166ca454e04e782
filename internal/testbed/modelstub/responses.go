package modelstub

// OpenAI Responses API (POST /v1/responses), the protocol of Codex CLI:
// a streamed sequence of typed SSE events (response.created, ...
// response.completed) or one response object when the request does not
// stream. Codex offers its file-edit tool apply_patch as a freeform
// ("custom") tool whose call carries the raw patch text instead of JSON
// arguments.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

func init() {
	protocolRoutes = append(protocolRoutes,
		route{"POST /v1/responses", (*Server).responses},
		// Base URLs configured without /v1.
		route{"POST /responses", (*Server).responses},
	)
	// apply_patch is Codex's (and OpenCode's, for GPT models) file-edit
	// tool; another protocol file may have registered it already with its
	// own argument name, which responsesToolInput also understands.
	if _, ok := writeTools["apply_patch"]; !ok {
		writeTools["apply_patch"] = func(w FileWrite) map[string]any {
			return map[string]any{"input": AddFilePatch(w)}
		}
	}
}

// AddFilePatch is an apply_patch patch that creates the file.
func AddFilePatch(w FileWrite) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Add File: " + w.Path + "\n")
	for _, line := range strings.SplitAfter(strings.TrimSuffix(w.Content, "\n"), "\n") {
		b.WriteString("+" + strings.TrimSuffix(line, "\n") + "\n")
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

type responsesRequest struct {
	Model        string          `json:"model"`
	Instructions string          `json:"instructions"`
	Input        json.RawMessage `json:"input"`
	Tools        []responsesTool `json:"tools"`
	Stream       bool            `json:"stream"`
	Text         *struct {
		Format *struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"format"`
	} `json:"text"`
}

type responsesTool struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
	Format     json.RawMessage `json:"format"` // custom (freeform) tools
	// Tools are a namespace's tools.
	Tools []responsesTool `json:"tools"`
}

// responsesItem is one input item: a message, a tool call the model made
// earlier, or a tool's output.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	Output    json.RawMessage `json:"output"`
}

// responsesText is the text of content or output: a string or a list of
// typed parts (input_text, output_text, ...).
func responsesText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var out []string
		for _, p := range parts {
			if p.Text != "" {
				out = append(out, p.Text)
			}
		}
		return strings.Join(out, "\n")
	}
	return string(raw)
}

// responsesTurn decodes a request into the protocol-neutral Turn.
func responsesTurn(path string, req *responsesRequest) *Turn {
	t := &Turn{Protocol: Responses, Path: path, Model: req.Model, Stream: req.Stream}
	sys := []string{}
	if req.Instructions != "" {
		sys = append(sys, req.Instructions)
	}
	var items []responsesItem
	var s string
	if json.Unmarshal(req.Input, &s) == nil {
		items = []responsesItem{{Type: "message", Role: "user", Content: req.Input}}
	} else {
		_ = json.Unmarshal(req.Input, &items) // neither: no items
	}
	for _, it := range items {
		switch it.Type {
		case "message", "":
			text := responsesText(it.Content)
			if it.Role == "system" || it.Role == "developer" {
				sys = append(sys, text)
				continue
			}
			t.Messages = append(t.Messages, text)
		case "function_call":
			t.Messages = append(t.Messages, it.Name+" "+it.Arguments)
		case "custom_tool_call":
			t.Messages = append(t.Messages, it.Name+" "+it.Input)
		case "function_call_output", "custom_tool_call_output":
			t.ToolResults++
			t.Messages = append(t.Messages, responsesText(it.Output))
		}
		// Reasoning items carry no text the tests look at.
	}
	t.System = strings.Join(sys, "\n")
	var add func(tools []responsesTool)
	add = func(tools []responsesTool) {
		for _, tool := range tools {
			switch {
			case tool.Type == "namespace":
				add(tool.Tools)
			case tool.Name != "":
				params := tool.Parameters
				if tool.Type == "custom" {
					params = tool.Format
				}
				t.Tools = append(t.Tools, Tool{Name: tool.Name, Params: params})
			}
			// Hosted tools (web_search, tool_search) have no name.
		}
	}
	add(req.Tools)
	t.Side = responsesSide(req, t)
	return t
}

// responsesSide tells side requests (a title, a summary for compaction)
// from the main conversation: they come without tools and say what they
// are in their instructions or last message.
func responsesSide(req *responsesRequest, t *Turn) bool {
	if len(req.Tools) > 0 {
		return false
	}
	text := strings.ToLower(t.System)
	if n := len(t.Messages); n > 0 {
		text += "\n" + strings.ToLower(t.Messages[n-1])
	}
	for _, m := range []string{"title generator", "generate a title", "thread title", "conversation title",
		"summarize the conversation", "summarize this conversation", "summary of the conversation", "context checkpoint compaction"} {
		if strings.Contains(text, m) {
			return true
		}
	}
	return false
}

// customTools are the tools a request offered as freeform ("custom").
func customTools(req *responsesRequest) map[string]bool {
	out := map[string]bool{}
	var add func(tools []responsesTool)
	add = func(tools []responsesTool) {
		for _, tool := range tools {
			if tool.Type == "custom" {
				out[tool.Name] = true
			}
			add(tool.Tools)
		}
	}
	add(req.Tools)
	return out
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	l, err := s.readRequest(r, Responses, &req)
	if err != nil {
		responsesError(w, http.StatusBadRequest, "modelstub: request is not JSON: "+err.Error())
		return
	}
	t := responsesTurn(r.URL.Path, &req)
	reply := s.decide(t)
	l.Turn, l.Reply = t, reply
	s.record(l)
	if playFailure(w, r, reply.Failure, func(status int, _ string) {
		responsesError(w, status, fmt.Sprintf("modelstub: scripted failure %d", status))
	}) {
		return
	}
	model := req.Model
	if model == "" {
		model = "stub-model"
	}
	enc := &responsesEncoder{reply: reply, model: model, custom: customTools(&req), created: time.Now().Unix(), chunks: s.chunks(4)}
	if !req.Stream {
		enc.whole(w)
		return
	}
	enc.stream(w)
}

// responsesError writes an OpenAI error body {"error":{message,type,code}}.
func responsesError(w http.ResponseWriter, status int, msg string) {
	typ, code := "server_error", "server_error"
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		typ, code = "invalid_request_error", "invalid_api_key"
		msg = "Incorrect API key provided (modelstub)."
	case status == http.StatusTooManyRequests:
		typ, code = "rate_limit_exceeded", "rate_limit_exceeded"
		msg = "Rate limit reached (modelstub)."
	case status < 500:
		typ, code = "invalid_request_error", "invalid_request"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code, "param": nil}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

type responsesEncoder struct {
	reply   *Reply
	model   string
	custom  map[string]bool
	created int64
	seq     int
	chunks  int // deltas of the answer text
}

// item is the reply's one output item, complete.
func (e *responsesEncoder) item() map[string]any {
	r := e.reply
	if tc := r.ToolCall; tc != nil {
		if e.custom[tc.Name] {
			return map[string]any{"id": "ctc_" + r.ID, "type": "custom_tool_call", "status": "completed",
				"call_id": tc.ID, "name": tc.Name, "input": responsesToolInput(tc)}
		}
		return map[string]any{"id": "fc_" + r.ID, "type": "function_call", "status": "completed",
			"call_id": tc.ID, "name": tc.Name, "arguments": responsesArgs(tc)}
	}
	return map[string]any{"id": "msg_" + r.ID, "type": "message", "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": r.Text, "annotations": []any{}}}}
}

// responsesToolInput is the raw input of a freeform tool call: the
// "input" argument, else the only string argument (e.g. patchText).
func responsesToolInput(tc *ToolCall) string {
	if s, ok := tc.Args["input"].(string); ok {
		return s
	}
	for _, v := range tc.Args {
		if s, ok := v.(string); ok {
			return s
		}
	}
	return ""
}

func responsesArgs(tc *ToolCall) string {
	b, _ := json.Marshal(tc.Args)
	return string(b)
}

func (e *responsesEncoder) response(status string, output []any) map[string]any {
	u := e.reply.Usage
	resp := map[string]any{"id": "resp_" + e.reply.ID, "object": "response", "created_at": e.created,
		"status": status, "model": e.model, "output": output}
	if status == "completed" {
		resp["usage"] = map[string]any{
			"input_tokens":          u.Input,
			"input_tokens_details":  map[string]any{"cached_tokens": u.Cached},
			"output_tokens":         u.Output,
			"output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens":          u.Input + u.Output,
		}
	}
	return resp
}

// whole answers a request that does not stream.
func (e *responsesEncoder) whole(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	if f := e.reply.Failure; f != nil && f.Malformed {
		_, _ = io.WriteString(w, `{"id": "resp_`+e.reply.ID+`", "output": [ {not json`)
		return
	}
	b, _ := json.Marshal(e.response("completed", []any{e.item()}))
	if f := e.reply.Failure; f != nil && f.Cut {
		_, _ = w.Write(b[:len(b)/2])
		cut(w)
		return
	}
	_, _ = w.Write(b)
}

// event sends one typed event (the type is both the SSE event name and
// the data's "type").
func (e *responsesEncoder) event(w http.ResponseWriter, typ string, data map[string]any) error {
	data["type"] = typ
	data["sequence_number"] = e.seq
	e.seq++
	return sse(w, typ, data)
}

// stream answers a streaming request: created, in_progress, the output
// item added, its deltas, done events, and completed with the usage. A
// cut stream stops in the middle of the text deltas and drops the
// connection; a malformed one sends events that are not JSON and ends
// without response.completed.
func (e *responsesEncoder) stream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	r := e.reply
	if err := e.event(w, "response.created", map[string]any{"response": e.response("in_progress", []any{})}); err != nil {
		return
	}
	_ = e.event(w, "response.in_progress", map[string]any{"response": e.response("in_progress", []any{})})
	f := r.Failure
	if f != nil && f.Malformed {
		_ = sse(w, "response.output_item.added", `{"type": "response.output_item.added", "item": {not json`)
		_ = sse(w, "", "<html>modelstub: malformed</html>")
		return
	}
	item := e.item()
	id := item["id"].(string)
	added := map[string]any{}
	for k, v := range item {
		added[k] = v
	}
	added["status"] = "in_progress"
	switch item["type"] {
	case "message":
		added["content"] = []any{}
		_ = e.event(w, "response.output_item.added", map[string]any{"output_index": 0, "item": added})
		_ = e.event(w, "response.content_part.added", map[string]any{"item_id": id, "output_index": 0, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
		parts := split(r.Text, e.chunks)
		if f != nil && f.Cut {
			// Half the answer, then the connection drops: no
			// response.completed.
			for _, p := range parts[:(len(parts)+1)/2] {
				_ = e.event(w, "response.output_text.delta", map[string]any{"item_id": id, "output_index": 0, "content_index": 0, "delta": p})
			}
			cut(w)
			return
		}
		for _, p := range parts {
			_ = e.event(w, "response.output_text.delta", map[string]any{"item_id": id, "output_index": 0, "content_index": 0, "delta": p})
		}
		_ = e.event(w, "response.output_text.done", map[string]any{"item_id": id, "output_index": 0, "content_index": 0, "text": r.Text})
		_ = e.event(w, "response.content_part.done", map[string]any{"item_id": id, "output_index": 0, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": r.Text, "annotations": []any{}}})
	case "custom_tool_call":
		added["input"] = ""
		_ = e.event(w, "response.output_item.added", map[string]any{"output_index": 0, "item": added})
		in := item["input"].(string)
		for _, p := range split(in, 3) {
			_ = e.event(w, "response.custom_tool_call_input.delta", map[string]any{"item_id": id, "output_index": 0, "delta": p})
		}
		_ = e.event(w, "response.custom_tool_call_input.done", map[string]any{"item_id": id, "output_index": 0, "input": in})
	case "function_call":
		added["arguments"] = ""
		_ = e.event(w, "response.output_item.added", map[string]any{"output_index": 0, "item": added})
		args := item["arguments"].(string)
		for _, p := range split(args, 3) {
			_ = e.event(w, "response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": 0, "delta": p})
		}
		_ = e.event(w, "response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": 0, "arguments": args})
	}
	_ = e.event(w, "response.output_item.done", map[string]any{"output_index": 0, "item": item})
	_ = e.event(w, "response.completed", map[string]any{"response": e.response("completed", []any{item})})
}
