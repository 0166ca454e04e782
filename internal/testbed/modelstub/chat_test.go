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

const chatAnswerText = `{"action":"COMPLETED","evidence_files":["hello.txt"],"summary_for_supervisor":"done"}`

func chatStart(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func chatOpts() Options {
	return Options{Write: FileWrite{Path: "hello.txt", Content: "hi\n"}, Answer: chatAnswerText, Usage: Usage{Input: 100, Output: 20, Cached: 10}}
}

// chatBody is a request as OpenCode sends it: system prompt, the
// conversation (with the tool call and its result when toolResult), its
// tools, streaming with usage.
func chatBody(stream, toolResult bool) map[string]any {
	msgs := []any{
		map[string]any{"role": "system", "content": "You are opencode."},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Create hello.txt"}}},
	}
	if toolResult {
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
				"function": map[string]any{"name": "write", "arguments": `{"filePath":"hello.txt","content":"hi\n"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "Wrote file successfully."})
	}
	return map[string]any{
		"model": "gpt-4o-mini", "messages": msgs, "stream": stream,
		"stream_options": map[string]any{"include_usage": true},
		"tools": []any{
			map[string]any{"type": "function", "function": map[string]any{"name": "read", "parameters": map[string]any{"type": "object"}}},
			map[string]any{"type": "function", "function": map[string]any{"name": "write", "parameters": map[string]any{"type": "object"}}},
		},
	}
}

func chatPost(t *testing.T, s *Server, path string, body any) *http.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, s.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-stub")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

type chatChunkDoc struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// chatRead collects a streamed reply: the text, the tool call's name and
// arguments, the finish reason, the usage chunk, whether [DONE] came, and
// the data lines that were not JSON.
type chatStreamed struct {
	text, tool, toolID, args, finish string
	usage                            *chatChunkDoc
	done                             bool
	bad                              []string
}

func chatRead(t *testing.T, r io.Reader) (*chatStreamed, error) {
	t.Helper()
	st := &chatStreamed{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			st.done = true
			continue
		}
		var c chatChunkDoc
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			st.bad = append(st.bad, data)
			continue
		}
		if c.Object != "chat.completion.chunk" {
			t.Errorf("object %q", c.Object)
		}
		if c.Usage != nil {
			st.usage = &c
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				st.text += *ch.Delta.Content
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Function.Name != "" {
					st.tool, st.toolID = tc.Function.Name, tc.ID
				}
				st.args += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				st.finish = *ch.FinishReason
			}
		}
	}
	return st, sc.Err()
}

func TestChatConversation(t *testing.T) {
	s := chatStart(t, chatOpts())
	// First turn: the write tool, its arguments in pieces.
	resp := chatPost(t, s, "/v1/chat/completions", chatBody(true, false))
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	st, err := chatRead(t, resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(st.args), &args); err != nil {
		t.Fatalf("arguments %q: %v", st.args, err)
	}
	if st.tool != "write" || st.toolID == "" || args["filePath"] != "hello.txt" || args["content"] != "hi\n" || st.finish != "tool_calls" || !st.done {
		t.Errorf("first reply %+v args %v", st, args)
	}
	if st.usage == nil || st.usage.Usage.PromptTokens != 100 || st.usage.Usage.CompletionTokens != 20 || st.usage.Usage.PromptTokensDetails.CachedTokens != 10 {
		t.Errorf("usage %+v", st.usage)
	}
	// Second turn, the tool's result in the conversation, at the path
	// without /v1: the answer text.
	resp = chatPost(t, s, "/chat/completions", chatBody(true, true))
	st, err = chatRead(t, resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if st.text != chatAnswerText || st.tool != "" || st.finish != "stop" || !st.done || len(st.bad) > 0 {
		t.Errorf("second reply %+v", st)
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	tn := reqs[1].Turn
	if tn.Protocol != Chat || tn.Model != "gpt-4o-mini" || !tn.Stream || tn.System != "You are opencode." || tn.ToolResults != 1 ||
		len(tn.Tools) != 2 || tn.Side || reqs[1].Header.Get("Authorization") != "Bearer sk-stub" {
		t.Errorf("turn %+v", tn)
	}
	if want := []string{"Create hello.txt", "write {\"filePath\":\"hello.txt\",\"content\":\"hi\\n\"}", "Wrote file successfully."}; strings.Join(tn.Messages, "|") != strings.Join(want, "|") {
		t.Errorf("messages %q", tn.Messages)
	}
	if s.MainTurns() != 2 {
		t.Errorf("main turns %d", s.MainTurns())
	}
}

func TestChatNotStreaming(t *testing.T) {
	s := chatStart(t, chatOpts())
	resp := chatPost(t, s, "/v1/chat/completions", chatBody(false, false))
	var c struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name, Arguments string
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int64 `json:"prompt_tokens"`
		} `json:"usage"`
	}
	err := json.NewDecoder(resp.Body).Decode(&c)
	resp.Body.Close()
	if err != nil || c.Object != "chat.completion" || len(c.Choices) != 1 || c.Usage.PromptTokens != 100 {
		t.Fatalf("%v %+v", err, c)
	}
	ch := c.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != "write" ||
		!strings.Contains(ch.Message.ToolCalls[0].Function.Arguments, `"filePath":"hello.txt"`) {
		t.Errorf("reply %+v", ch)
	}
	resp = chatPost(t, s, "/v1/chat/completions", chatBody(false, true))
	err = json.NewDecoder(resp.Body).Decode(&c)
	resp.Body.Close()
	if err != nil || c.Choices[0].FinishReason != "stop" || c.Choices[0].Message.Content == nil || *c.Choices[0].Message.Content != chatAnswerText {
		t.Errorf("%v %+v", err, c)
	}
}

func TestChatFailures(t *testing.T) {
	s := chatStart(t, chatOpts())
	s.Fail(Failure{Status: 401}, Failure{Status: 429, RetryAfter: "7"}, Failure{Status: 500}, Failure{Cut: true}, Failure{Malformed: true})
	for _, c := range []struct {
		status int
		code   string
	}{{401, "invalid_api_key"}, {429, "rate_limit_exceeded"}, {500, "Internal Server Error"}} {
		resp := chatPost(t, s, "/v1/chat/completions", chatBody(true, true))
		var e struct {
			Error struct {
				Message, Type, Code string
			} `json:"error"`
		}
		err := json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != c.status || e.Error.Message == "" || e.Error.Type == "" || e.Error.Code != c.code {
			t.Errorf("%d: status %d body %+v %v", c.status, resp.StatusCode, e, err)
		}
		if c.status == 429 && resp.Header.Get("Retry-After") != "7" {
			t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
		}
	}
	// Cut: half the answer, then the connection drops (no finish, no
	// [DONE]).
	resp := chatPost(t, s, "/v1/chat/completions", chatBody(true, true))
	st, err := chatRead(t, resp.Body)
	resp.Body.Close()
	if err == nil && (st.done || st.finish != "") {
		t.Errorf("cut stream ended cleanly: %+v", st)
	}
	if st.text == "" || st.text == chatAnswerText || !strings.HasPrefix(chatAnswerText, st.text) {
		t.Errorf("cut text %q", st.text)
	}
	// Malformed: 200, data lines that are not JSON.
	resp = chatPost(t, s, "/v1/chat/completions", chatBody(true, true))
	st, _ = chatRead(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(st.bad) == 0 || st.finish != "" {
		t.Errorf("malformed %d %+v", resp.StatusCode, st)
	}
	// The queue is empty: the conversation goes on.
	resp = chatPost(t, s, "/v1/chat/completions", chatBody(true, true))
	st, _ = chatRead(t, resp.Body)
	resp.Body.Close()
	if st.text != chatAnswerText {
		t.Errorf("after the failures %+v", st)
	}
}

func TestChatDelay(t *testing.T) {
	s := chatStart(t, chatOpts())
	s.Fail(Failure{Delay: 300 * time.Millisecond})
	start := time.Now()
	resp := chatPost(t, s, "/v1/chat/completions", chatBody(true, false))
	st, _ := chatRead(t, resp.Body)
	resp.Body.Close()
	if time.Since(start) < 300*time.Millisecond || st.tool != "write" {
		t.Errorf("after %v: %+v", time.Since(start), st)
	}
	// A client that gives up is not answered.
	s.Fail(Failure{Delay: time.Minute})
	b, _ := json.Marshal(chatBody(true, false))
	client := &http.Client{Timeout: 200 * time.Millisecond}
	if _, err := client.Post(s.URL+"/v1/chat/completions", "application/json", bytes.NewReader(b)); err == nil {
		t.Error("the delayed reply came at once")
	}
}

func TestChatSideRequests(t *testing.T) {
	s := chatStart(t, chatOpts())
	s.Fail(Failure{Status: 500})
	// OpenCode's title request: no tools, a title generator prompt.
	title := map[string]any{"model": "gpt-4o-mini", "stream": true, "messages": []any{
		map[string]any{"role": "system", "content": "You are a title generator. You output ONLY a thread title."},
		map[string]any{"role": "user", "content": "Generate a title for this conversation:"},
	}}
	// Qwen Code's next-speaker check: a JSON object asked for.
	check := chatBody(false, true)
	check["response_format"] = map[string]any{"type": "json_object"}
	delete(check, "tools")
	for _, body := range []map[string]any{title, check} {
		resp := chatPost(t, s, "/v1/chat/completions", body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("side request got %d: %s", resp.StatusCode, b)
		}
	}
	for _, l := range s.Requests() {
		if !l.Turn.Side {
			t.Errorf("not a side request: %+v", l.Turn)
		}
	}
	// The scripted failure is still there for the main conversation.
	resp := chatPost(t, s, "/v1/chat/completions", chatBody(true, false))
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Errorf("main request got %d", resp.StatusCode)
	}
	// Logist's own answer schema is not a side request.
	main := chatBody(true, false)
	delete(main, "tools")
	main["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "logist_answer", "schema": map[string]any{}}}
	resp = chatPost(t, s, "/v1/chat/completions", main)
	resp.Body.Close()
	if l := s.Requests(); l[len(l)-1].Turn.Side {
		t.Error("Logist's answer request taken for a side request")
	}
}

func TestChatModels(t *testing.T) {
	opts := chatOpts()
	opts.Model = "qwen3-coder-plus"
	s := chatStart(t, opts)
	resp := chatPost(t, s, "/v1/chat/completions", chatBody(true, false))
	resp.Body.Close()
	r, err := http.Get(s.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	err = json.NewDecoder(r.Body).Decode(&list)
	r.Body.Close()
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	if err != nil || list.Object != "list" || strings.Join(ids, ",") != "qwen3-coder-plus,gpt-4o-mini,stub-model" {
		t.Errorf("%v %+v", err, list)
	}
}

// TestChunksSplitsTheAnswer: Options.Chunks streams the final answer in
// that many deltas, in every protocol (tests of a stream cut in the middle
// need long streams).
func TestChunksSplitsTheAnswer(t *testing.T) {
	answer := strings.Repeat("0123456789", 30)
	s := chatStart(t, Options{Answer: answer, Chunks: 15})
	for _, c := range []struct {
		path  string
		body  map[string]any
		delta string
	}{
		{"/v1/chat/completions", map[string]any{"model": "m", "stream": true, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, `"content":"0123`},
		{"/v1/messages", map[string]any{"model": "m", "stream": true, "tools": []any{map[string]any{"name": "Read"}}, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, `"text_delta"`},
		{"/v1/responses", map[string]any{"model": "m", "stream": true, "input": "hi"}, "event: response.output_text.delta"},
		{"/v1beta/models/m:streamGenerateContent?alt=sse", map[string]any{"contents": []any{map[string]any{"parts": []any{map[string]any{"text": "hi"}}}}}, `"text":"0123`},
	} {
		resp := chatPost(t, s, c.path, c.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if n := strings.Count(string(b), c.delta); n != 15 {
			t.Errorf("%s: %d deltas, want 15:\n%s", c.path, n, b)
		}
	}
}
