package modelstub

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

const anthropicAnswer = `{"action":"COMPLETED","evidence_files":["hello.txt"],"summary_for_supervisor":"done"}`

// anthropicBody is a request shaped like Claude Code's: the working
// directory in a system message, the Write tool, maybe tool results.
func anthropicBody(stream bool, tools []string, toolResult bool) []byte {
	msgs := []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Create hello.txt"}}},
		map[string]any{"role": "system", "content": []any{map[string]any{"type": "text", "text": "# Environment\n - Primary working directory: /work/ws\n"}}},
	}
	if toolResult {
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "call_1", "name": "Write", "input": map[string]any{"file_path": "/work/ws/hello.txt"}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "call_1", "content": "File created successfully"}}})
	}
	var ts []any
	for _, n := range tools {
		ts = append(ts, map[string]any{"name": n, "input_schema": map[string]any{"type": "object"}})
	}
	b, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": stream,
		"system": []any{map[string]any{"type": "text", "text": "You are Claude Code."}}, "messages": msgs, "tools": ts})
	return b
}

func anthropicPost(t *testing.T, url string, body []byte) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type anthropicEvent struct {
	Name string
	Data map[string]any
	Raw  string
}

// readEvents reads an SSE stream until it ends (or breaks off).
func anthropicReadEvents(r io.Reader) ([]anthropicEvent, error) {
	var evs []anthropicEvent
	sc := bufio.NewScanner(r)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			raw := strings.TrimPrefix(line, "data: ")
			var d map[string]any
			_ = json.Unmarshal([]byte(raw), &d) // a malformed event (sent on purpose) has only Raw
			evs = append(evs, anthropicEvent{Name: name, Data: d, Raw: raw})
		}
	}
	return evs, sc.Err()
}

// streamed rebuilds the streamed message: its blocks' text or tool input
// JSON, the stop reason and the final usage.
func anthropicStreamed(t *testing.T, evs []anthropicEvent) (block map[string]any, text string, stop string, usage map[string]any) {
	t.Helper()
	for _, e := range evs {
		if typ, _ := e.Data["type"].(string); typ != e.Name {
			t.Errorf("event %q carries type %q", e.Name, typ)
		}
		switch e.Name {
		case "content_block_start":
			block, _ = e.Data["content_block"].(map[string]any)
		case "content_block_delta":
			d := e.Data["delta"].(map[string]any)
			if s, ok := d["text"].(string); ok {
				text += s
			}
			if s, ok := d["partial_json"].(string); ok {
				text += s
			}
		case "message_delta":
			stop, _ = e.Data["delta"].(map[string]any)["stop_reason"].(string)
			usage, _ = e.Data["usage"].(map[string]any)
		}
	}
	return
}

func TestAnthropicConversation(t *testing.T) {
	s, err := Start(Options{Write: FileWrite{Path: "hello.txt", Content: "hi\n"}, Answer: anthropicAnswer,
		Usage: Usage{Input: 1200, Output: 80, Cached: 200}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// Turn 1: the Write tool, with the path made absolute in the
	// announced working directory.
	resp := anthropicPost(t, s.URL+"/v1/messages?beta=true", anthropicBody(true, []string{"Bash", "Write"}, false))
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("status %d content type %q", resp.StatusCode, ct)
	}
	evs, _ := anthropicReadEvents(resp.Body)
	var names []string
	for _, e := range evs {
		names = append(names, e.Name)
	}
	if want := "message_start ping content_block_start content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"; strings.Join(names, " ") != want {
		t.Errorf("events %v, want %s", names, want)
	}
	block, input, stop, usage := anthropicStreamed(t, evs)
	if block["type"] != "tool_use" || block["name"] != "Write" || block["id"] == "" || stop != "tool_use" {
		t.Fatalf("block %v stop %q", block, stop)
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(input), &args); err != nil || args["file_path"] != "/work/ws/hello.txt" || args["content"] != "hi\n" {
		t.Errorf("Write input %q: %v", input, err)
	}
	// Usage in Anthropic's terms: uncached input apart from cache reads.
	if usage["input_tokens"] != 1000.0 || usage["cache_read_input_tokens"] != 200.0 || usage["output_tokens"] != 80.0 {
		t.Errorf("usage %v", usage)
	}

	// Turn 2: with the tool's result in, the answer as text.
	resp = anthropicPost(t, s.URL+"/v1/messages", anthropicBody(true, []string{"Bash", "Write"}, true))
	evs, _ = anthropicReadEvents(resp.Body)
	block, text, stop, _ := anthropicStreamed(t, evs)
	if block["type"] != "text" || text != anthropicAnswer || stop != "end_turn" {
		t.Errorf("block %v text %q stop %q", block, text, stop)
	}

	// With --json-schema (the StructuredOutput tool) the answer is that
	// tool's input.
	resp = anthropicPost(t, s.URL+"/v1/messages", anthropicBody(true, []string{"Write", AnthropicStructuredTool}, true))
	evs, _ = anthropicReadEvents(resp.Body)
	block, input, stop, _ = anthropicStreamed(t, evs)
	if block["name"] != AnthropicStructuredTool || stop != "tool_use" {
		t.Fatalf("block %v stop %q", block, stop)
	}
	var got, want map[string]any
	if err := json.Unmarshal([]byte(input), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(anthropicAnswer), &want); err != nil {
		t.Fatal(err)
	}
	if gb, _ := json.Marshal(got); string(gb) != anthropicMustJSON(want) {
		t.Errorf("structured input %s, want %s", input, anthropicAnswer)
	}

	// Not streaming: one message object.
	resp = anthropicPost(t, s.URL+"/v1/messages", anthropicBody(false, []string{"Write"}, true))
	var msg struct {
		Type       string `json:"type"`
		StopReason string `json:"stop_reason"`
		Content    []struct{ Type, Text string }
		Usage      map[string]int64
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if msg.Type != "message" || msg.StopReason != "end_turn" || len(msg.Content) != 1 || msg.Content[0].Text != anthropicAnswer || msg.Usage["output_tokens"] != 80 {
		t.Errorf("message %+v", msg)
	}

	if n := s.MainTurns(); n != 4 {
		t.Errorf("main turns %d, want 4", n)
	}
	turn := s.Requests()[0].Turn
	if turn.Protocol != Anthropic || turn.Model != "claude-sonnet-4-5" || !turn.Stream || turn.System != "You are Claude Code." || len(turn.Tools) != 2 {
		t.Errorf("turn %+v", turn)
	}
	if turn2 := s.Requests()[1].Turn; turn2.ToolResults != 1 || !strings.Contains(strings.Join(turn2.Messages, "\n"), "File created successfully") {
		t.Errorf("turn 2 %+v", turn2)
	}
}

func anthropicMustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestAnthropicFailures(t *testing.T) {
	s, err := Start(Options{Answer: anthropicAnswer, Usage: Usage{Input: 10, Output: 5}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Fail(Failure{Status: 401}, Failure{Status: 429, RetryAfter: "2"}, Failure{Status: 529}, Failure{Cut: true}, Failure{Malformed: true})
	body := anthropicBody(true, []string{"Write"}, true)

	// Side requests (no tools: titles, quota probes) and the probes around
	// the conversation never take a scripted failure.
	if resp := anthropicPost(t, s.URL+"/v1/messages", anthropicBody(false, nil, false)); resp.StatusCode != 200 {
		t.Errorf("side request: %d", resp.StatusCode)
	}
	if resp := anthropicPost(t, s.URL+"/v1/messages/count_tokens", body); resp.StatusCode != 200 {
		t.Errorf("count_tokens: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodHead, s.URL+"/api/hello", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("HEAD /api/hello: %v %v", resp, err)
	}

	for _, c := range []struct {
		status     int
		typ, retry string
	}{{401, "authentication_error", ""}, {429, "rate_limit_error", "2"}, {529, "overloaded_error", ""}} {
		resp := anthropicPost(t, s.URL+"/v1/messages", body)
		var e struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != c.status || e.Type != "error" || e.Error.Type != c.typ || e.Error.Message == "" || resp.Header.Get("Retry-After") != c.retry {
			t.Errorf("failure %d: got %d %+v retry-after %q", c.status, resp.StatusCode, e, resp.Header.Get("Retry-After"))
		}
	}

	// Cut: the start of the answer, then the connection drops.
	resp := anthropicPost(t, s.URL+"/v1/messages", body)
	evs, _ := anthropicReadEvents(resp.Body)
	_, text, stop, _ := anthropicStreamed(t, evs)
	if stop != "" || text == "" || !strings.HasPrefix(anthropicAnswer, text) || text == anthropicAnswer {
		t.Errorf("cut stream gave %q stop %q", text, stop)
	}

	// Malformed: events that are not JSON.
	resp = anthropicPost(t, s.URL+"/v1/messages", body)
	evs, _ = anthropicReadEvents(resp.Body)
	if len(evs) == 0 || json.Valid([]byte(evs[0].Raw)) {
		t.Errorf("malformed stream %+v", evs)
	}

	// The same without streaming (Claude Code's fallback).
	s.Fail(Failure{Cut: true}, Failure{Malformed: true})
	resp = anthropicPost(t, s.URL+"/v1/messages", anthropicBody(false, []string{"Write"}, true))
	if b, err := io.ReadAll(resp.Body); err == nil || json.Valid(b) {
		t.Errorf("cut message read whole: %q %v", b, err)
	}
	resp = anthropicPost(t, s.URL+"/v1/messages", anthropicBody(false, []string{"Write"}, true))
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || json.Valid(b) {
		t.Errorf("malformed message: %d %q", resp.StatusCode, b)
	}

	// Then the conversation goes on.
	resp = anthropicPost(t, s.URL+"/v1/messages", body)
	evs, _ = anthropicReadEvents(resp.Body)
	if _, text, _, _ := anthropicStreamed(t, evs); text != anthropicAnswer {
		t.Errorf("after the failures: %q", text)
	}
}

func TestAnthropicDelay(t *testing.T) {
	s, err := Start(Options{Answer: anthropicAnswer})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Fail(Failure{Delay: 300 * time.Millisecond})
	start := time.Now()
	resp := anthropicPost(t, s.URL+"/v1/messages", anthropicBody(true, []string{"Write"}, true))
	evs, _ := anthropicReadEvents(resp.Body)
	if _, text, _, _ := anthropicStreamed(t, evs); text != anthropicAnswer || time.Since(start) < 300*time.Millisecond {
		t.Errorf("delayed reply %q after %v", text, time.Since(start))
	}
}
