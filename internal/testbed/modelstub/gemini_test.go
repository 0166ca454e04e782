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

const geminiAnswer = `{"action":"COMPLETED","evidence_files":["hello.txt"],"summary_for_supervisor":"done"}`

func geminiStart(t *testing.T) *Server {
	t.Helper()
	s, err := Start(Options{Write: FileWrite{Path: "hello.txt", Content: "hi\n"}, Answer: geminiAnswer, Usage: Usage{Input: 100, Output: 20, Cached: 10}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// geminiBody is a request as the Gemini CLI sends it: system
// instruction, the conversation, its tools (parametersJsonSchema).
func geminiBody(toolResult bool) []byte {
	contents := []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "<session_context>"}, map[string]any{"text": "Create hello.txt"}}}}
	if toolResult {
		contents = append(contents,
			map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"id": "c1", "name": "write_file", "args": map[string]any{"file_path": "hello.txt", "content": "hi\n"}}}}},
			map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"id": "c1", "name": "write_file", "response": map[string]any{"output": "Successfully created"}}}}})
	}
	b, _ := json.Marshal(map[string]any{
		"contents":          contents,
		"systemInstruction": map[string]any{"role": "user", "parts": []any{map[string]any{"text": "You are Gemini CLI."}, map[string]any{"text": "Answer with JSON."}}},
		"tools": []any{map[string]any{"functionDeclarations": []any{
			map[string]any{"name": "read_file", "parametersJsonSchema": map[string]any{"type": "object"}},
			map[string]any{"name": "write_file", "parametersJsonSchema": map[string]any{"type": "object", "properties": map[string]any{"file_path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}},
		}}},
		"generationConfig": map[string]any{"temperature": 1},
	})
	return b
}

func geminiPost(t *testing.T, s *Server, path string, body []byte) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Goog-Api-Key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

const geminiStream = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"

type geminiChunk struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         string `json:"text"`
				FunctionCall *struct {
					Name string         `json:"name"`
					Args map[string]any `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount        int64 `json:"promptTokenCount"`
		CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
		TotalTokenCount         int64 `json:"totalTokenCount"`
		CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
}

// geminiChunks reads the SSE data lines; it stops at a read error (a
// dropped connection) and reports it.
func geminiChunks(r io.Reader) (chunks []geminiChunk, raw []string, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		raw = append(raw, line)
		var c geminiChunk
		if json.Unmarshal([]byte(line), &c) == nil {
			chunks = append(chunks, c)
		}
	}
	return chunks, raw, sc.Err()
}

func TestGeminiConversation(t *testing.T) {
	s := geminiStart(t)
	// First turn: the write_file call.
	resp := geminiPost(t, s, geminiStream, geminiBody(false))
	chunks, _, err := geminiChunks(resp.Body)
	resp.Body.Close()
	if err != nil || len(chunks) != 1 {
		t.Fatalf("chunks %+v %v", chunks, err)
	}
	c := chunks[0].Candidates[0]
	fc := c.Content.Parts[0].FunctionCall
	if fc == nil || fc.Name != "write_file" || fc.Args["file_path"] != "hello.txt" || fc.Args["content"] != "hi\n" || c.FinishReason != "STOP" {
		t.Fatalf("first reply %+v", c)
	}
	if chunks[0].ModelVersion != "gemini-2.5-flash" {
		t.Errorf("modelVersion %q", chunks[0].ModelVersion)
	}
	// Second turn, with the tool's result: the answer in pieces, usage
	// and finishReason on the last one.
	resp = geminiPost(t, s, geminiStream, geminiBody(true))
	chunks, _, err = geminiChunks(resp.Body)
	resp.Body.Close()
	if err != nil || len(chunks) < 2 {
		t.Fatalf("chunks %+v %v", chunks, err)
	}
	var text strings.Builder
	for _, ch := range chunks {
		text.WriteString(ch.Candidates[0].Content.Parts[0].Text)
	}
	last := chunks[len(chunks)-1]
	if text.String() != geminiAnswer || last.Candidates[0].FinishReason != "STOP" {
		t.Errorf("answer %q finish %q", text.String(), last.Candidates[0].FinishReason)
	}
	if u := last.UsageMetadata; u == nil || u.PromptTokenCount != 100 || u.CandidatesTokenCount != 20 || u.TotalTokenCount != 120 || u.CachedContentTokenCount != 10 {
		t.Errorf("usage %+v", last.UsageMetadata)
	}
	// What the stub read from the requests.
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	t0, t1 := reqs[0].Turn, reqs[1].Turn
	if t0.Protocol != Gemini || t0.Model != "gemini-2.5-flash" || !t0.Stream || t0.Side || t0.System != "You are Gemini CLI.\nAnswer with JSON." {
		t.Errorf("turn %+v", t0)
	}
	if len(t0.Tools) != 2 || t0.Tools[1].Name != "write_file" || !strings.Contains(string(t0.Tools[1].Params), "file_path") {
		t.Errorf("tools %+v", t0.Tools)
	}
	if t0.ToolResults != 0 || t1.ToolResults != 1 {
		t.Errorf("tool results %d, %d", t0.ToolResults, t1.ToolResults)
	}
	if j := strings.Join(t1.Messages, "\n"); !strings.Contains(j, "Create hello.txt") || !strings.Contains(j, "call write_file") || !strings.Contains(j, "Successfully created") {
		t.Errorf("messages %q", t1.Messages)
	}
}

func TestGeminiFailures(t *testing.T) {
	s := geminiStart(t)
	s.Fail(Failure{Status: 401}, Failure{Status: 429, RetryAfter: "2"}, Failure{Status: 500}, Failure{Malformed: true}, Failure{Cut: true})
	type apiErr struct {
		Error struct {
			Code    int              `json:"code"`
			Message string           `json:"message"`
			Status  string           `json:"status"`
			Details []map[string]any `json:"details"`
		} `json:"error"`
	}
	for _, want := range []struct {
		status int
		name   string
	}{{401, "UNAUTHENTICATED"}, {429, "RESOURCE_EXHAUSTED"}, {500, "INTERNAL"}} {
		resp := geminiPost(t, s, geminiStream, geminiBody(false))
		var e apiErr
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want.status || e.Error.Code != want.status || e.Error.Status != want.name {
			t.Errorf("got %d %+v, want %d %s", resp.StatusCode, e, want.status, want.name)
		}
		if want.status == 429 {
			// The CLI reads the delay from RetryInfo, not from the header.
			if resp.Header.Get("Retry-After") != "2" || len(e.Error.Details) != 1 || e.Error.Details[0]["retryDelay"] != "2s" ||
				!strings.Contains(e.Error.Message, "Please retry in 2s") {
				t.Errorf("429 without its delay: %+v", e)
			}
		}
	}
	// Malformed: 200 with data lines that are not JSON.
	resp := geminiPost(t, s, geminiStream, geminiBody(false))
	chunks, raw, _ := geminiChunks(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(chunks) != 0 || len(raw) == 0 {
		t.Errorf("malformed: %d chunks %+v raw %q", resp.StatusCode, chunks, raw)
	}
	// Cut: the start of the answer, no finishReason, then the connection
	// drops.
	resp = geminiPost(t, s, geminiStream, geminiBody(true))
	chunks, _, err := geminiChunks(resp.Body)
	resp.Body.Close()
	if len(chunks) != 1 || chunks[0].Candidates[0].FinishReason != "" || !strings.HasPrefix(geminiAnswer, chunks[0].Candidates[0].Content.Parts[0].Text) {
		t.Errorf("cut: %+v (%v)", chunks, err)
	}
	// The queue is empty: the next request is answered.
	resp = geminiPost(t, s, geminiStream, geminiBody(false))
	chunks, _, _ = geminiChunks(resp.Body)
	resp.Body.Close()
	if len(chunks) != 1 || chunks[0].Candidates[0].Content.Parts[0].FunctionCall == nil {
		t.Errorf("after the failures: %+v", chunks)
	}
}

func TestGeminiDelay(t *testing.T) {
	s := geminiStart(t)
	s.Fail(Failure{Delay: 300 * time.Millisecond})
	start := time.Now()
	resp := geminiPost(t, s, geminiStream, geminiBody(false))
	chunks, _, _ := geminiChunks(resp.Body)
	resp.Body.Close()
	if time.Since(start) < 300*time.Millisecond || len(chunks) != 1 {
		t.Errorf("delay: %v, %d chunks", time.Since(start), len(chunks))
	}
}

// Side requests (generateContent with a JSON schema, countTokens, the
// model list) get sensible answers and leave the scripted failures alone.
func TestGeminiSideRequests(t *testing.T) {
	s := geminiStart(t)
	s.Fail(Failure{Status: 500})
	next, _ := json.Marshal(map[string]any{
		"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "Who speaks next?"}}}},
		"generationConfig": map[string]any{"responseMimeType": "application/json", "responseJsonSchema": map[string]any{
			"type": "object", "required": []string{"reasoning", "next_speaker"},
			"properties": map[string]any{"reasoning": map[string]any{"type": "string"}, "next_speaker": map[string]any{"type": "string", "enum": []string{"model", "user"}}}}},
	})
	resp := geminiPost(t, s, "/v1beta/models/gemini-2.5-flash-lite:generateContent", next)
	var out geminiChunk
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var ns map[string]any
	if resp.StatusCode != 200 || json.Unmarshal([]byte(out.Candidates[0].Content.Parts[0].Text), &ns) != nil || ns["next_speaker"] != "user" || ns["reasoning"] == nil {
		t.Errorf("next speaker: %d %+v", resp.StatusCode, out)
	}
	// The CLI's model router validates a score of 1..100.
	route, _ := json.Marshal(map[string]any{
		"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "Create hello.txt"}}}},
		"generationConfig": map[string]any{"responseMimeType": "application/json", "responseJsonSchema": map[string]any{
			"type": "OBJECT", "properties": map[string]any{"complexity_reasoning": map[string]any{"type": "STRING"}, "complexity_score": map[string]any{"type": "INTEGER"}}}},
	})
	resp = geminiPost(t, s, "/v1beta/models/gemini-2.5-flash-lite:generateContent", route)
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var score map[string]any
	if json.Unmarshal([]byte(out.Candidates[0].Content.Parts[0].Text), &score) != nil || score["complexity_score"] != float64(1) {
		t.Errorf("routing: %+v", out)
	}
	resp = geminiPost(t, s, "/v1beta/models/gemini-2.5-flash:countTokens", geminiBody(false))
	var ct struct{ TotalTokens int64 }
	if err := json.NewDecoder(resp.Body).Decode(&ct); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct.TotalTokens != 100 {
		t.Errorf("countTokens %+v", ct)
	}
	g, err := http.Get(s.URL + "/v1beta/models")
	if err != nil || g.StatusCode != 200 {
		t.Errorf("model list: %v %v", g, err)
	}
	if g != nil {
		g.Body.Close()
	}
	for _, l := range s.Requests() {
		if l.Turn != nil && !l.Turn.Side {
			t.Errorf("%s counted as main conversation", l.Path)
		}
	}
	if s.MainTurns() != 0 {
		t.Errorf("main turns %d", s.MainTurns())
	}
	// The failure is still queued for the conversation.
	resp = geminiPost(t, s, geminiStream, geminiBody(false))
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Errorf("queued failure not served: %d", resp.StatusCode)
	}
}
