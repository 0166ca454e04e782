package modelstub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// The Gemini API (generativelanguage.googleapis.com) as the Gemini CLI
// uses it through @google/genai:
//
//	POST /v1beta/models/{model}:streamGenerateContent?alt=sse  the conversation (SSE)
//	POST /v1beta/models/{model}:generateContent                side requests (JSON answers)
//	POST /v1beta/models/{model}:countTokens                    token counting
//	GET  /v1beta/models                                        model list
//
// Errors come as {"error":{"code","message","status","details"}}; a 429
// carries a google.rpc.RetryInfo detail, which is what the CLI reads (it
// ignores the Retry-After header).

func init() {
	protocolRoutes = append(protocolRoutes,
		route{pattern: "/v1beta/models", handle: geminiHandle},
		route{pattern: "/v1beta/models/", handle: geminiHandle},
	)
	// The Gemini CLI's (and its forks') file write tool.
	if _, ok := writeTools["write_file"]; !ok {
		writeTools["write_file"] = func(w FileWrite) map[string]any {
			return map[string]any{"file_path": w.Path, "content": w.Content}
		}
	}
}

// geminiRequest is the part of a GenerateContentRequest the stub reads.
type geminiRequest struct {
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiPart `json:"parts"`
}

type geminiPart struct {
	Text             string          `json:"text,omitempty"`
	Thought          bool            `json:"thought,omitempty"`
	FunctionCall     *geminiCall     `json:"functionCall,omitempty"`
	FunctionResponse json.RawMessage `json:"functionResponse,omitempty"`
}

type geminiCall struct {
	ID   string         `json:"id,omitempty"`
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

func geminiHandle(s *Server, w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1beta/models")
	rest = strings.TrimPrefix(rest, "/")
	model, method, _ := strings.Cut(rest, ":")
	if r.Method == http.MethodGet {
		// Model metadata: no body to read.
		s.record(Logged{Protocol: Gemini, Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()})
		if model == "" {
			geminiJSON(w, http.StatusOK, map[string]any{"models": []any{}})
			return
		}
		geminiJSON(w, http.StatusOK, map[string]any{"name": "models/" + model, "inputTokenLimit": 1048576, "outputTokenLimit": 65536})
		return
	}
	var req geminiRequest
	l, err := s.readRequest(r, Gemini, &req)
	if err != nil {
		geminiError(w, http.StatusBadRequest, "", "modelstub: request is not JSON: "+err.Error())
		return
	}
	t := geminiTurn(&req, r.URL.Path, model)
	l.Turn = t
	switch method {
	case "countTokens":
		t.Side = true
		s.record(l)
		geminiJSON(w, http.StatusOK, map[string]any{"totalTokens": max(s.opts.Usage.Input, 1)})
		return
	case "streamGenerateContent":
		t.Stream = true
	case "generateContent":
		// The CLI streams its conversation; a plain generateContent is one
		// of its helpers (next-speaker check, routing, summaries, titles).
		t.Side = true
	default:
		s.record(l)
		geminiError(w, http.StatusNotFound, "", "modelstub: no such method "+method)
		return
	}
	rep := s.decide(t)
	if t.Side {
		rep.Text = geminiSideText(&req, t)
	}
	l.Reply = rep
	s.record(l)

	if playFailure(w, r, rep.Failure, func(status int, retryAfter string) { geminiError(w, status, retryAfter, "") }) {
		return
	}
	if !t.Stream {
		geminiJSON(w, http.StatusOK, geminiResponse(rep, model, rep.Text, true))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	if f := rep.Failure; f != nil && f.Malformed {
		_ = sse(w, "", `{"candidates": [{"content": {"parts": [{"text": "`+"\x00not json")
		_ = sse(w, "", "}{]")
		return
	}
	if rep.ToolCall != nil {
		_ = sse(w, "", geminiResponse(rep, model, "", true))
		return
	}
	chunks := split(rep.Text, s.chunks(3))
	if f := rep.Failure; f != nil && f.Cut {
		// The start of the answer, then the connection drops.
		_ = sse(w, "", geminiResponse(&Reply{ID: rep.ID}, model, chunks[0], false))
		cut(w)
		return
	}
	for i, c := range chunks {
		last := i == len(chunks)-1
		if last {
			_ = sse(w, "", geminiResponse(rep, model, c, true))
		} else {
			_ = sse(w, "", geminiResponse(&Reply{ID: rep.ID}, model, c, false))
		}
	}
}

// geminiTurn reads a request into a protocol-neutral Turn.
func geminiTurn(req *geminiRequest, path, model string) *Turn {
	t := &Turn{Protocol: Gemini, Path: path, Model: model}
	if req.SystemInstruction != nil {
		var sys []string
		for _, p := range req.SystemInstruction.Parts {
			sys = append(sys, p.Text)
		}
		t.System = strings.Join(sys, "\n")
	}
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				a, _ := json.Marshal(p.FunctionCall.Args)
				t.Messages = append(t.Messages, "call "+p.FunctionCall.Name+" "+string(a))
			case len(p.FunctionResponse) > 0:
				t.ToolResults++
				t.Messages = append(t.Messages, string(p.FunctionResponse))
			case p.Text != "" && !p.Thought:
				t.Messages = append(t.Messages, p.Text)
			}
		}
	}
	for _, tool := range req.Tools {
		for _, d := range tool.FunctionDeclarations {
			params := d.ParametersJSONSchema
			if len(params) == 0 {
				params = d.Parameters
			}
			t.Tools = append(t.Tools, Tool{Name: d.Name, Params: params})
		}
	}
	return t
}

// geminiSideText answers a helper request: JSON matching its response
// schema when it asks for JSON (the next-speaker check gets "user", so
// the CLI ends its turn), else a short text.
func geminiSideText(req *geminiRequest, t *Turn) string {
	schema := req.GenerationConfig.ResponseJSONSchema
	if len(schema) == 0 {
		schema = req.GenerationConfig.ResponseSchema
	}
	if req.GenerationConfig.ResponseMimeType != "application/json" && len(schema) == 0 {
		return "ok"
	}
	var sc map[string]any
	_ = json.Unmarshal(schema, &sc) // no schema: a nil one
	v := geminiSchemaValue(sc, "")
	if m, ok := v.(map[string]any); ok {
		if _, ok := m["next_speaker"]; ok {
			m["next_speaker"] = "user"
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// geminiSchemaValue builds a small value that satisfies a (Gemini or JSON)
// schema: enums take their first value, objects fill their properties.
func geminiSchemaValue(sc map[string]any, name string) any {
	if e, ok := sc["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	typ, _ := sc["type"].(string)
	switch strings.ToLower(typ) {
	case "object", "":
		props, _ := sc["properties"].(map[string]any)
		if typ == "" && props == nil {
			return "ok"
		}
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := map[string]any{}
		for _, k := range keys {
			p, _ := props[k].(map[string]any)
			out[k] = geminiSchemaValue(p, k)
		}
		return out
	case "array":
		return []any{}
	case "boolean":
		return false
	case "integer", "number":
		// Scores the CLI validates are 1..100; 1 is valid for both.
		if m, ok := sc["minimum"].(float64); ok {
			return m
		}
		return 1
	default:
		return "stub " + name
	}
}

// geminiResponse is one GenerateContentResponse (one SSE chunk); usage
// and finishReason go with the last one.
func geminiResponse(rep *Reply, model, text string, last bool) map[string]any {
	var parts []any
	if rep.ToolCall != nil {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": rep.ToolCall.Name, "args": rep.ToolCall.Args}})
	} else {
		parts = append(parts, map[string]any{"text": text})
	}
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	out := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": rep.ID}
	if last {
		cand["finishReason"] = "STOP"
		u := rep.Usage
		um := map[string]any{"promptTokenCount": u.Input, "candidatesTokenCount": u.Output, "totalTokenCount": u.Input + u.Output}
		if u.Cached > 0 {
			um["cachedContentTokenCount"] = u.Cached
		}
		out["usageMetadata"] = um
	}
	return out
}

// geminiError writes an error body in the Gemini API's shape.
func geminiError(w http.ResponseWriter, status int, retryAfter, msg string) {
	st, def := "INTERNAL", "Internal error encountered."
	switch status {
	case http.StatusUnauthorized:
		st, def = "UNAUTHENTICATED", "API key not valid. Please pass a valid API key."
	case http.StatusForbidden:
		st, def = "PERMISSION_DENIED", "Permission denied on resource."
	case http.StatusTooManyRequests:
		st, def = "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing details."
	case http.StatusBadRequest:
		st, def = "INVALID_ARGUMENT", "Request contains an invalid argument."
	case http.StatusNotFound:
		st, def = "NOT_FOUND", "Not found."
	case http.StatusServiceUnavailable:
		st, def = "UNAVAILABLE", "The model is overloaded. Please try again later."
	}
	if msg == "" {
		msg = def
	}
	e := map[string]any{"code": status, "message": msg, "status": st}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
		if status == http.StatusTooManyRequests {
			// The CLI reads the delay from RetryInfo, not the header.
			e["message"] = fmt.Sprintf("%s Please retry in %ss.", msg, retryAfter)
			e["details"] = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retryAfter + "s"}}
		}
	}
	geminiJSON(w, status, map[string]any{"error": e})
}

func geminiJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
