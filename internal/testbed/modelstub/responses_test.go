package modelstub

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// respEvent is one SSE event of a Responses stream.
type respEvent struct {
	Name string
	Data map[string]any
	Raw  string
}

func respPost(t *testing.T, s *Server, body any) (*http.Response, []respEvent) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(s.URL+"/v1/responses", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var evs []respEvent
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, nil
	}
	sc := bufio.NewScanner(resp.Body)
	var name string
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			name = v
		} else if v, ok := strings.CutPrefix(line, "data: "); ok {
			ev := respEvent{Name: name, Raw: v}
			_ = json.Unmarshal([]byte(v), &ev.Data) // a malformed event (sent on purpose) has only Raw
			evs = append(evs, ev)
			name = ""
		}
	}
	return resp, evs
}

func respStart(t *testing.T, opts Options) *Server {
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// codexTools are the tools as Codex offers them: functions, a namespace,
// apply_patch as a freeform tool and hosted tools without a name.
var codexTools = []any{
	map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{"type": "object"}},
	map[string]any{"type": "namespace", "name": "multi_agent_v1", "tools": []any{map[string]any{"type": "function", "name": "close_agent"}}},
	map[string]any{"type": "custom", "name": "apply_patch", "format": map[string]any{"type": "grammar", "syntax": "lark"}},
	map[string]any{"type": "web_search"},
}

func TestResponsesToolCallThenAnswer(t *testing.T) {
	s := respStart(t, Options{Write: FileWrite{Path: "hello.txt", Content: "line 1\nline 2\n"}, Answer: `{"action":"COMPLETED"}`,
		Usage: Usage{Input: 100, Output: 10, Cached: 40}})
	input := []any{
		map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "be brief"}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "write it"}}},
	}
	_, evs := respPost(t, s, map[string]any{"model": "gpt-5.5", "stream": true, "input": input, "tools": codexTools})
	var names []string
	for _, e := range evs {
		names = append(names, e.Name)
		if e.Data["type"] != e.Name {
			t.Errorf("event %s has type %v", e.Name, e.Data["type"])
		}
	}
	want := "response.created response.in_progress response.output_item.added response.custom_tool_call_input.delta " +
		"response.custom_tool_call_input.delta response.custom_tool_call_input.delta response.custom_tool_call_input.done " +
		"response.output_item.done response.completed"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("events %s\nwant %s", got, want)
	}
	item := evs[len(evs)-2].Data["item"].(map[string]any)
	patch := "*** Begin Patch\n*** Add File: hello.txt\n+line 1\n+line 2\n*** End Patch\n"
	if item["type"] != "custom_tool_call" || item["name"] != "apply_patch" || item["input"] != patch || item["call_id"] == "" {
		t.Errorf("tool call item %v", item)
	}
	usage := evs[len(evs)-1].Data["response"].(map[string]any)["usage"].(map[string]any)
	if usage["input_tokens"] != 100.0 || usage["output_tokens"] != 10.0 || usage["input_tokens_details"].(map[string]any)["cached_tokens"] != 40.0 {
		t.Errorf("usage %v", usage)
	}
	l := s.Requests()[0]
	if l.Turn.System != "be brief" || len(l.Turn.Messages) != 1 || l.Turn.Side || l.Turn.ToolResults != 0 {
		t.Errorf("turn %+v", l.Turn)
	}
	var tools []string
	for _, tl := range l.Turn.Tools {
		tools = append(tools, tl.Name)
	}
	if strings.Join(tools, ",") != "exec_command,close_agent,apply_patch" {
		t.Errorf("tools %v", tools)
	}

	// The tool's output in the conversation: the answer, as text.
	input = append(input,
		map[string]any{"type": "custom_tool_call", "name": "apply_patch", "call_id": item["call_id"], "input": patch},
		map[string]any{"type": "custom_tool_call_output", "call_id": item["call_id"], "output": "Success. Updated the following files:\nA hello.txt"})
	_, evs = respPost(t, s, map[string]any{"model": "gpt-5.5", "stream": true, "input": input, "tools": codexTools})
	var text strings.Builder
	for _, e := range evs {
		if e.Name == "response.output_text.delta" {
			text.WriteString(e.Data["delta"].(string))
		}
	}
	if text.String() != `{"action":"COMPLETED"}` || evs[len(evs)-1].Name != "response.completed" {
		t.Errorf("answer %q, last event %s", text.String(), evs[len(evs)-1].Name)
	}
	done := evs[len(evs)-2].Data["item"].(map[string]any)
	if done["type"] != "message" || done["content"].([]any)[0].(map[string]any)["text"] != `{"action":"COMPLETED"}` {
		t.Errorf("message item %v", done)
	}
	if tr := s.Requests()[1].Turn.ToolResults; tr != 1 {
		t.Errorf("tool results %d", tr)
	}
}

func TestResponsesFunctionTool(t *testing.T) {
	// apply_patch offered as a function: a function_call with JSON
	// arguments.
	s := respStart(t, Options{Write: FileWrite{Path: "a.txt", Content: "x"}, Answer: "done"})
	tools := []any{map[string]any{"type": "function", "name": "apply_patch", "parameters": map[string]any{"type": "object"}}}
	_, evs := respPost(t, s, map[string]any{"model": "m", "stream": true, "input": "go", "tools": tools})
	item := evs[len(evs)-2].Data["item"].(map[string]any)
	var args map[string]any
	if item["type"] != "function_call" || json.Unmarshal([]byte(item["arguments"].(string)), &args) != nil || args["input"] == nil {
		t.Errorf("function call item %v", item)
	}
	if s.Requests()[0].Turn.Messages[0] != "go" {
		t.Errorf("string input: %q", s.Requests()[0].Turn.Messages)
	}
}

func TestResponsesFailures(t *testing.T) {
	s := respStart(t, Options{Answer: `{"action":"COMPLETED","summary":"a long enough answer to cut"}`})
	s.Fail(Failure{Status: 429, RetryAfter: "7"}, Failure{Status: 401}, Failure{Cut: true}, Failure{Malformed: true})
	req := map[string]any{"model": "m", "stream": true, "input": "hi", "tools": codexTools}

	resp, _ := respPost(t, s, req)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" {
		t.Errorf("429: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	b, _ := json.Marshal(req)
	r2, err := http.Post(s.URL+"/v1/responses", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	var eb struct {
		Error struct{ Message, Type, Code string } `json:"error"`
	}
	if r2.StatusCode != 401 || json.Unmarshal(body, &eb) != nil || eb.Error.Code != "invalid_api_key" || eb.Error.Message == "" {
		t.Errorf("401: %d %s", r2.StatusCode, body)
	}

	// Cut: part of the text, then the connection drops; no completion.
	_, evs := respPost(t, s, req)
	var deltas int
	for _, e := range evs {
		if e.Name == "response.completed" || e.Name == "response.output_item.done" {
			t.Errorf("cut stream sent %s", e.Name)
		}
		if e.Name == "response.output_text.delta" {
			deltas++
		}
	}
	if deltas == 0 || deltas >= 4 {
		t.Errorf("cut stream sent %d deltas", deltas)
	}

	// Malformed: events that are not JSON, no completion.
	_, evs = respPost(t, s, req)
	bad := false
	for _, e := range evs {
		if e.Data == nil {
			bad = true
		}
		if e.Name == "response.completed" {
			t.Error("malformed stream completed")
		}
	}
	if !bad {
		t.Error("malformed stream was all JSON")
	}

	// The queue is used up: a normal answer.
	_, evs = respPost(t, s, req)
	if evs[len(evs)-1].Name != "response.completed" {
		t.Errorf("last event %s", evs[len(evs)-1].Name)
	}
}

func TestResponsesWholeAndSide(t *testing.T) {
	s := respStart(t, Options{Write: FileWrite{Path: "a.txt", Content: "x"}, Answer: "final", Usage: Usage{Input: 5, Output: 2}})
	s.Fail(Failure{Status: 500})
	// A compaction summary without tools is a side request: it does not
	// take the queued failure.
	resp, evs := respPost(t, s, map[string]any{"model": "m", "stream": true, "instructions": "Summarize the conversation so far.", "input": "..."})
	if resp.StatusCode != 200 || evs[len(evs)-1].Name != "response.completed" || !s.Requests()[0].Turn.Side {
		t.Errorf("side request: %d %v", resp.StatusCode, s.Requests()[0].Turn)
	}
	resp, _ = respPost(t, s, map[string]any{"model": "m", "stream": true, "input": "go", "tools": codexTools})
	if resp.StatusCode != 500 {
		t.Errorf("main request after the side one: %d", resp.StatusCode)
	}
	// Not streaming: one response object.
	b, _ := json.Marshal(map[string]any{"model": "m", "input": "go"})
	r, err := http.Post(s.URL+"/v1/responses", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var whole struct {
		Status string `json:"status"`
		Output []struct {
			Type    string                  `json:"type"`
			Content []struct{ Text string } `json:"content"`
		} `json:"output"`
		Usage struct {
			Input int64 `json:"input_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(r.Body).Decode(&whole); err != nil || whole.Status != "completed" || whole.Output[0].Content[0].Text != "final" || whole.Usage.Input != 5 {
		t.Errorf("whole response %+v %v", whole, err)
	}
}
