package agent

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"

	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/manifest"
)

const testKey = "sk-test-0123456789abcdef"

// stub is an in-process Chat Completions server: each request is answered
// by the next scripted handler (the last repeats) and recorded.
type stub struct {
	t        *testing.T
	mu       sync.Mutex
	handlers []http.HandlerFunc
	bodies   []map[string]any
	headers  []http.Header
}

func (s *stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	n := len(s.bodies)
	s.bodies = append(s.bodies, body)
	s.headers = append(s.headers, r.Header.Clone())
	h := s.handlers[min(n, len(s.handlers)-1)]
	s.mu.Unlock()
	h(w, r)
}

func (s *stub) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

func newStub(t *testing.T, hs ...http.HandlerFunc) (*stub, *httptest.Server) {
	s := &stub{t: t, handlers: hs}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

// sse writes server-sent events, flushing each.
func sse(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, e := range events {
		fmt.Fprintf(w, "data: %s\n\n", e)
		w.(http.Flusher).Flush()
	}
}

func contentChunk(s string) string {
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-42", "object": "chat.completion.chunk",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": s}, "finish_reason": nil}}})
	return string(b)
}

func toolChunk(args string) string {
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-7", "choices": []any{map[string]any{"index": 0,
		"delta": map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": args}}}}}}})
	return string(b)
}

func finishChunk(reason string) string {
	return fmt.Sprintf(`{"id":"chatcmpl-42","choices":[{"index":0,"delta":{},"finish_reason":%q}]}`, reason)
}

const usageChunk = `{"id":"chatcmpl-42","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200,"prompt_tokens_details":{"cached_tokens":400}}}`

const answer = `{"action":"COMPLETED","evidence_files":["a.go"],"summary_for_supervisor":"Done."}`

// answerStream streams answer in three pieces, then finish, usage, [DONE].
func answerStream(w http.ResponseWriter, r *http.Request) {
	sse(w, contentChunk(answer[:10]), contentChunk(answer[10:40]), contentChunk(answer[40:]),
		finishChunk("stop"), usageChunk, "[DONE]")
}

func provider(srv *httptest.Server, mut ...func(*manifest.HTTP)) *OpenAI {
	cfg := manifest.HTTP{BaseURL: srv.URL + "/v1", Model: "gpt-4o-mini", APIKeyEnv: "TEST_OPENAI_KEY"}
	for _, m := range mut {
		m(&cfg)
	}
	return &OpenAI{Cfg: cfg, Getenv: func(k string) string {
		if k == "TEST_OPENAI_KEY" {
			return testKey
		}
		return ""
	}}
}

func testRequest() *Request {
	return &Request{JobID: "j", Phase: "work", Role: "worker", SystemPrompt: "You are the Worker.",
		Prompt: "You are the Worker.\n\n## Task\nFix it.", Interaction: 1}
}

// wantErr asserts that err is an *Error with code and transience that
// does not reveal the API key, and returns it; callers that want only the
// assertion drop it.
func wantErr(t *testing.T, err error, code string, transient bool) *Error {
	t.Helper()
	ae, ok := AsError(err)
	if !ok {
		t.Fatalf("error %v (%T) is not *agent.Error", err, err)
	}
	if ae.Code != code || ae.Transient != transient {
		t.Fatalf("error %+v, want code %s transient %v", ae, code, transient)
	}
	if strings.Contains(ae.Error(), testKey) {
		t.Fatalf("error message contains the API key: %s", ae.Error())
	}
	return ae
}

func TestOpenAIStreamedAnswer(t *testing.T) {
	s, srv := newStub(t, answerStream)
	res, err := provider(srv).Call(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Raw) != answer {
		t.Errorf("Raw = %s", res.Raw)
	}
	if res.SessionID != "chatcmpl-42" {
		t.Errorf("SessionID = %q", res.SessionID)
	}
	if res.Tokens == nil || res.Tokens.Input != 1000 || res.Tokens.Output != 200 || res.Tokens.Cache != 400 {
		t.Errorf("Tokens = %+v", res.Tokens)
	}
	// gpt-4o-mini: 600 uncached·0.15 + 400 cached·0.075 + 200 out·0.6, per million.
	want := (600*0.15 + 400*0.075 + 200*0.6) / 1e6
	if d := res.CostUSD - want; d > 1e-12 || d < -1e-12 {
		t.Errorf("CostUSD = %v, want %v", res.CostUSD, want)
	}

	h := s.headers[0]
	if h.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("Authorization = %q", h.Get("Authorization"))
	}
	b := s.bodies[0]
	if b["model"] != "gpt-4o-mini" || b["stream"] != true {
		t.Errorf("model/stream: %v %v", b["model"], b["stream"])
	}
	if so, _ := b["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("stream_options = %v", b["stream_options"])
	}
	msgs, _ := b["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("messages = %v", msgs)
	}
	sys, user := msgs[0].(map[string]any), msgs[1].(map[string]any)
	if sys["role"] != "system" || sys["content"] != "You are the Worker." {
		t.Errorf("system message = %v", sys)
	}
	if user["role"] != "user" || user["content"] != "## Task\nFix it." {
		t.Errorf("user message = %v", user)
	}
	rf, _ := b["response_format"].(map[string]any)
	js, _ := rf["json_schema"].(map[string]any)
	if rf["type"] != "json_schema" || js["strict"] != true || js["name"] != "logist_answer" {
		t.Fatalf("response_format = %v", rf)
	}
	schema, _ := js["schema"].(map[string]any)
	checkStrict(t, schema)
	if _, ok := b["tools"]; ok {
		t.Error("tools sent in json_schema mode")
	}
}

// checkStrict: every object requires all its properties and allows no
// others; cost_usd is gone.
func checkStrict(t *testing.T, schema map[string]any) {
	t.Helper()
	props, _ := schema["properties"].(map[string]any)
	if len(props) != 3 || props["cost_usd"] != nil {
		t.Errorf("properties = %v", props)
	}
	req, _ := schema["required"].([]any)
	if len(req) != len(props) {
		t.Errorf("required = %v", req)
	}
	if schema["additionalProperties"] != false {
		t.Errorf("additionalProperties = %v", schema["additionalProperties"])
	}
	for _, k := range []string{"$schema", "$id", "maxLength", "minItems", "x-schema-version"} {
		if _, ok := schema[k]; ok {
			t.Errorf("strict schema keeps %s", k)
		}
	}
}

func TestOpenAIToolCallFallback(t *testing.T) {
	s, srv := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, `{"id":"chatcmpl-7","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"answer","arguments":""}}]}}]}`,
			toolChunk(answer[:5]), toolChunk(answer[5:33]), toolChunk(answer[33:]),
			finishChunk("tool_calls"), "[DONE]")
	})
	res, err := provider(srv, func(c *manifest.HTTP) { c.StructuredOutput = "tool" }).Call(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Raw) != answer {
		t.Errorf("Raw = %s", res.Raw)
	}
	if res.Tokens != nil || res.CostUSD != 0 {
		t.Errorf("no usage reported, got %+v %v", res.Tokens, res.CostUSD)
	}
	b := s.bodies[0]
	if _, ok := b["response_format"]; ok {
		t.Error("response_format sent in tool mode")
	}
	tools, _ := b["tools"].([]any)
	if len(tools) != 1 {
		t.Fatalf("tools = %v", b["tools"])
	}
	fn := tools[0].(map[string]any)["function"].(map[string]any)
	if fn["name"] != "answer" {
		t.Errorf("tool = %v", fn)
	}
	checkStrict(t, fn["parameters"].(map[string]any))
	tc, _ := b["tool_choice"].(map[string]any)
	if tc["type"] != "function" || tc["function"].(map[string]any)["name"] != "answer" {
		t.Errorf("tool_choice = %v", tc)
	}
}

func TestOpenAINoStructuredOutputAndNoKey(t *testing.T) {
	s, srv := newStub(t, answerStream)
	p := provider(srv, func(c *manifest.HTTP) { c.StructuredOutput, c.APIKeyEnv, c.Model = "none", "", "llama3.2" })
	res, err := p.Call(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if res.CostUSD != 0 || !strings.Contains(res.Stderr, "no price") {
		t.Errorf("unknown model: cost %v note %q", res.CostUSD, res.Stderr)
	}
	if _, ok := s.bodies[0]["response_format"]; ok {
		t.Error("response_format sent with structured_output none")
	}
	if h := s.headers[0].Get("Authorization"); h != "" {
		t.Errorf("Authorization sent without api_key_env: %q", h)
	}
}

func TestOpenAIPriceOverrideAndTable(t *testing.T) {
	_, srv := newStub(t, answerStream)
	p := provider(srv, func(c *manifest.HTTP) {
		c.Model = "my-local"
		c.Price = &manifest.Price{InputPerMTok: 1, OutputPerMTok: 10} // cached defaults to input
	})
	res, err := p.Call(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if want := (1000*1.0 + 200*10.0) / 1e6; res.CostUSD != want {
		t.Errorf("CostUSD = %v, want %v", res.CostUSD, want)
	}
	if p, ok := LookupPrice("gpt-4o-mini-2024-07-18"); !ok || p.InputPerMTok != 0.15 {
		t.Errorf("dated snapshot price = %+v %v", p, ok)
	}
	if p, ok := LookupPrice("gpt-4.1-mini"); !ok || p.InputPerMTok != 0.4 {
		t.Errorf("gpt-4.1-mini price = %+v %v", p, ok)
	}
	if _, ok := LookupPrice("gpt-4ox"); ok {
		t.Error("gpt-4ox has a price")
	}
}

func TestOpenAIAuthFailedHidesKey(t *testing.T) {
	_, srv := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		// A server that echoes the credential it refused.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error"}}`,
			strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	})
	_, err := provider(srv).Call(context.Background(), testRequest())
	ae := wantErr(t, err, codes.AuthFailed, false)
	if !strings.Contains(ae.Msg, "HTTP 401") || !strings.Contains(ae.Msg, "[REDACTED]") {
		t.Errorf("Msg = %q", ae.Msg)
	}
}

// A key too short to redact (secrets.Redactable; a local server's dummy
// key) is not used to rewrite the error text, while a long header value
// the server echoes is still redacted.
func TestOpenAIShortKeyLeavesErrorText(t *testing.T) {
	const header = "org-0123456789abcdef"
	_, srv := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":{"message":"model none-such not found for %s"}}`, r.Header.Get("X-Org"))
	})
	p := provider(srv, func(c *manifest.HTTP) {
		c.APIKeyEnv, c.HeadersEnv = "SHORT_KEY", map[string]string{"X-Org": "ORG_ID"}
	})
	p.Getenv = func(k string) string { return map[string]string{"SHORT_KEY": "none", "ORG_ID": header}[k] }
	_, err := p.Call(context.Background(), testRequest())
	ae := wantErr(t, err, codes.APIError, false)
	if want := "HTTP 404: model none-such not found for [REDACTED]"; ae.Msg != want {
		t.Errorf("Msg = %q, want %q", ae.Msg, want)
	}
}

func TestOpenAIMissingKeyEnv(t *testing.T) {
	_, srv := newStub(t, answerStream)
	p := provider(srv, func(c *manifest.HTTP) { c.APIKeyEnv = "NOT_SET_ANYWHERE" })
	_, err := p.Call(context.Background(), testRequest())
	_ = wantErr(t, err, codes.AgentConfig, false)
}

func TestOpenAIRateLimitedThenSuccess(t *testing.T) {
	s, srv := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":{"message":"Rate limit reached"}}`, http.StatusTooManyRequests)
	}, answerStream)
	p := provider(srv)
	_, err := p.Call(context.Background(), testRequest())
	ae := wantErr(t, err, codes.RateLimited, true)
	if ae.RetryAfter != time.Second {
		t.Fatalf("RetryAfter = %v", ae.RetryAfter)
	}
	// The engine waits (ctx-bounded) for max(backoff, RetryAfter): see
	// TestHTTPProviderRetriesCutStream in internal/runner. Here: the wait
	// is honoured, then the same request succeeds.
	start := time.Now()
	if err := sleepAtLeast(context.Background(), ae.RetryAfter); err != nil {
		t.Fatal(err)
	}
	res, err := p.Call(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < time.Second || string(res.Raw) != answer || s.requests() != 2 {
		t.Errorf("after Retry-After: %v %s %d", time.Since(start), res.Raw, s.requests())
	}
	// A wait bounded by ctx: a deadline shorter than Retry-After ends it.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := sleepAtLeast(ctx, ae.RetryAfter); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 500*time.Millisecond {
		t.Errorf("ctx-bounded wait: %v after %v", err, time.Since(start))
	}
}

func sleepAtLeast(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{
		"":                              0,
		"2":                             2 * time.Second,
		"0.5":                           500 * time.Millisecond,
		"-3":                            0,
		"99999":                         MaxRetryAfter,
		"Wed, 01 Jan 2025 12:00:30 GMT": 30 * time.Second,
		"soon":                          0,
	} {
		if got := retryAfter(h, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", h, got, want)
		}
	}
}

func TestOpenAIServerErrors(t *testing.T) {
	for _, tc := range []struct {
		status    int
		code      string
		transient bool
	}{
		{500, codes.APIError, true},
		{503, codes.APIError, true},
		{403, codes.AuthFailed, false},
		{400, codes.APIError, false},
		{404, codes.APIError, false},
	} {
		_, srv := newStub(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "2")
			http.Error(w, `{"error":"boom"}`, tc.status)
		})
		_, err := provider(srv).Call(context.Background(), testRequest())
		ae := wantErr(t, err, tc.code, tc.transient)
		if !strings.Contains(ae.Msg, fmt.Sprintf("HTTP %d: boom", tc.status)) {
			t.Errorf("%d: Msg = %q", tc.status, ae.Msg)
		}
		if tc.transient != (ae.RetryAfter == 2*time.Second) {
			t.Errorf("%d: RetryAfter = %v", tc.status, ae.RetryAfter)
		}
	}
}

func TestOpenAIMalformedChunk(t *testing.T) {
	_, srv := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, contentChunk(`{"action":`), `{"id": not json`, finishChunk("stop"), "[DONE]")
	})
	_, err := provider(srv).Call(context.Background(), testRequest())
	ae := wantErr(t, err, codes.APIMalformed, true)
	if string(ae.Partial) != `{"action":` {
		t.Errorf("Partial = %q", ae.Partial)
	}
}

func TestOpenAIMidStreamErrorEvent(t *testing.T) {
	_, srv := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, contentChunk(`{"act`), `{"error":{"message":"upstream overloaded"}}`)
	})
	_, err := provider(srv).Call(context.Background(), testRequest())
	ae := wantErr(t, err, codes.APIError, true)
	if !strings.Contains(ae.Msg, "upstream overloaded") {
		t.Errorf("Msg = %q", ae.Msg)
	}
}

// cutStream sends half an answer and drops the connection: no
// finish_reason, no [DONE], no terminating chunk.
func cutStream(w http.ResponseWriter, r *http.Request) {
	sse(w, contentChunk(answer[:30]))
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

func TestOpenAIStreamCut(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"connection dropped": cutStream,
		"clean end without finish": func(w http.ResponseWriter, r *http.Request) {
			sse(w, contentChunk(answer[:30]))
		},
		"[DONE] without finish": func(w http.ResponseWriter, r *http.Request) {
			sse(w, contentChunk(answer[:30]), "[DONE]")
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, srv := newStub(t, h)
			res, err := provider(srv).Call(context.Background(), testRequest())
			if res != nil {
				t.Fatalf("a cut stream gave a result: %+v", res)
			}
			ae := wantErr(t, err, codes.StreamCut, true)
			if string(ae.Partial) != answer[:30] {
				t.Errorf("Partial = %q", ae.Partial)
			}
		})
	}
}

func TestOpenAISlowServerRespectsDeadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	_, srv := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, contentChunk(`{"action"`))
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := provider(srv).Call(ctx, testRequest())
	if res != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("res %v err %v", res, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %v", d)
	}
}

func TestOpenAIFinishLengthIsMaxTokens(t *testing.T) {
	s, srv := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, contentChunk(answer[:20]), finishChunk("length"), usageChunk, "[DONE]")
	})
	p := provider(srv, func(c *manifest.HTTP) { c.MaxTokens = 16; tmp := 0.2; c.Temperature = &tmp })
	_, err := p.Call(context.Background(), testRequest())
	ae := wantErr(t, err, codes.MaxTokens, false)
	if ae.CostUSD <= 0 || string(ae.Partial) != answer[:20] {
		t.Errorf("cost %v partial %q", ae.CostUSD, ae.Partial)
	}
	if b := s.bodies[0]; b["max_tokens"] != float64(16) || b["temperature"] != 0.2 {
		t.Errorf("max_tokens/temperature = %v %v", b["max_tokens"], b["temperature"])
	}
}

func TestOpenAINonStreamingServer(t *testing.T) {
	_, srv := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-9", "choices": []any{map[string]any{"index": 0,
			"message": map[string]any{"role": "assistant", "content": answer}, "finish_reason": "stop"}},
			"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5}})
		_, _ = w.Write(b) // the client's side is what the test checks
	})
	res, err := provider(srv).Call(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Raw) != answer || res.SessionID != "chatcmpl-9" || res.Tokens.Output != 5 {
		t.Errorf("res = %+v", res)
	}
}

func TestOpenAIHeadersEnv(t *testing.T) {
	s, srv := newStub(t, answerStream)
	p := provider(srv, func(c *manifest.HTTP) { c.HeadersEnv = map[string]string{"X-Org": "TEST_OPENAI_KEY"} })
	if _, err := p.Call(context.Background(), testRequest()); err != nil {
		t.Fatal(err)
	}
	if s.headers[0].Get("X-Org") != testKey {
		t.Errorf("X-Org = %q", s.headers[0].Get("X-Org"))
	}
}

func TestOpenAITLSWithCAFile(t *testing.T) {
	s := &stub{t: t, handlers: []http.HandlerFunc{answerStream}}
	srv := httptest.NewTLSServer(s)
	defer srv.Close()
	dir := t.TempDir()
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	req := testRequest()
	req.JobDir = dir

	// Without the CA the server is not trusted: a transport error, retried.
	_, err := provider(srv).Call(context.Background(), req)
	ae := wantErr(t, err, codes.APIError, true)
	if !strings.Contains(ae.Msg, "certificate") {
		t.Errorf("Msg = %q", ae.Msg)
	}
	// With ca_file (relative to the job folder) it is.
	res, err := provider(srv, func(c *manifest.HTTP) { c.CAFile = "ca.pem" }).Call(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Raw) != answer {
		t.Errorf("Raw = %s", res.Raw)
	}
	// A ca_file that is missing or holds no certificate is a config error.
	if err := os.WriteFile(filepath.Join(dir, "junk.pem"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"missing.pem", "junk.pem"} {
		_, err := provider(srv, func(c *manifest.HTTP) { c.CAFile = f }).Call(context.Background(), req)
		_ = wantErr(t, err, codes.AgentConfig, false)
	}
}

func TestNewHTTPProvider(t *testing.T) {
	p, err := New(manifest.AgentConfig{Provider: "http", HTTP: &manifest.HTTP{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.(*OpenAI); !ok {
		t.Fatalf("New gave %T", p)
	}
	if _, err := New(manifest.AgentConfig{Provider: "http"}); err == nil {
		t.Fatal("http provider without http config accepted")
	}
	// A refused connection is a transient transport error.
	_, err = p.Call(context.Background(), testRequest())
	_ = wantErr(t, err, codes.APIError, true)
}

// TestOpenAIUnreadableUsageKeepsTheAnswer: a whole answer whose usage
// chunk holds counts no integer holds (1e308), or of the wrong type, is
// taken, the usage said to be unread (before, the whole stream was
// refused as API_MALFORMED "a chunk that is not JSON", retried and paid
// for again each time).
func TestOpenAIUnreadableUsageKeepsTheAnswer(t *testing.T) {
	for _, u := range []string{`{"prompt_tokens":1e308,"completion_tokens":1e308}`, `{"prompt_tokens":"many"}`, `[]`} {
		_, srv := newStub(t, func(w http.ResponseWriter, r *http.Request) {
			sse(w, contentChunk(answer), finishChunk("stop"), `{"id":"x","choices":[],"usage":`+u+`}`, "[DONE]")
		})
		res, err := provider(srv).Call(context.Background(), testRequest())
		if err != nil {
			t.Fatalf("usage %s: %v", u, err)
		}
		if string(res.Raw) != answer || res.CostUSD != 0 || res.Tokens != nil || !strings.Contains(res.Stderr, "the server's usage could not be read: json: cannot unmarshal") {
			t.Errorf("usage %s: raw %q cost %v tokens %v stderr %q", u, res.Raw, res.CostUSD, res.Tokens, res.Stderr)
		}
	}
}

// TestOpenAIMediaTypeIsCaseInsensitive: a stream whose Content-Type is
// spelled in capitals (media types are case-insensitive, and the metering
// proxy reads them so) is read as a stream (before, it was read as one
// JSON document and refused as API_MALFORMED, retried and paid for again).
func TestOpenAIMediaTypeIsCaseInsensitive(t *testing.T) {
	_, srv := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "Text/Event-Stream; charset=UTF-8")
		w.WriteHeader(http.StatusOK)
		for _, e := range []string{contentChunk(answer), finishChunk("stop"), usageChunk, "[DONE]"} {
			fmt.Fprintf(w, "data: %s\n\n", e)
		}
	})
	res, err := provider(srv).Call(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Raw) != answer {
		t.Errorf("raw %q", res.Raw)
	}
}
