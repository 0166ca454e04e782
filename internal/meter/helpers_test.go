package meter

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/testbed/modelstub"
	"github.com/logist/logist/internal/testkit"
)

// The real keys the proxy holds in tests; no agent request may carry them,
// and no upstream request may carry a token.
const (
	anthropicKey = "sk-ant-REAL-anthropic-key"
	openaiKey    = "sk-REAL-openai-key"
	geminiKey    = "AIza-REAL-gemini-key"
)

// harness is a proxy in front of the model stub, serving on loopback.
type harness struct {
	t     *testing.T
	stub  *modelstub.Server
	proxy *Proxy
	root  string // http://127.0.0.1:PORT
	logs  *testkit.SyncBuffer
}

func startStub(t *testing.T, opts modelstub.Options) *modelstub.Server {
	t.Helper()
	s, err := modelstub.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// stubUpstreams are the three families, all played by the stub.
func stubUpstreams(stubURL string) map[string]Upstream {
	return map[string]Upstream{
		"anthropic": {Family: Anthropic, BaseURL: stubURL, Key: anthropicKey},
		"openai":    {Family: OpenAI, BaseURL: stubURL + "/v1", Key: openaiKey},
		"gemini":    {Family: Gemini, BaseURL: stubURL, Key: geminiKey},
	}
}

func newHarness(t *testing.T, opts modelstub.Options, tweak func(*Config)) *harness {
	t.Helper()
	stub := startStub(t, opts)
	return newHarnessFor(t, stub, stubUpstreams(stub.URL), tweak)
}

func newHarnessFor(t *testing.T, stub *modelstub.Server, ups map[string]Upstream, tweak func(*Config)) *harness {
	t.Helper()
	logs := &testkit.SyncBuffer{}
	cfg := Config{Upstreams: ups, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if tweak != nil {
		tweak(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.Serve(ln) }() // ends at Close
	t.Cleanup(func() { p.Close() })
	h := &harness{t: t, stub: stub, proxy: p, root: "http://" + ln.Addr().String(), logs: logs}
	t.Cleanup(func() {
		// Whatever happened, no log line holds a key or a token.
		out := logs.String()
		for _, secret := range []string{anthropicKey, openaiKey, geminiKey, TokenPrefix} {
			if strings.Contains(out, secret) {
				t.Errorf("the proxy's log holds a secret (%s…):\n%s", secret[:8], out)
			}
		}
		// Its refusals and early ends are seed 004's lines, at the level
		// their code's kind says (the proxy's codes are warnings).
		for _, l := range joblog.Lines([]byte(out)) {
			if l["error_code"] == nil && l["type"] == nil {
				continue
			}
			if err := joblog.Check(l); err != nil {
				t.Errorf("%v: %v", err, l)
			}
		}
	})
	return h
}

// issue makes a grant for all three upstreams with the given budget.
func (h *harness) issue(job string, b Budget) string {
	h.t.Helper()
	tok, err := h.proxy.Issue(Grant{Job: job, Call: job + "-call-1", Role: "worker",
		Upstreams: []string{"anthropic", "openai", "gemini"}, Budget: b})
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

// fakeBudget is a job's budget as the engine would keep it; it records
// every debit.
type fakeBudget struct {
	mu     sync.Mutex
	limit  float64
	spent  float64
	debits []float64
}

func newBudget(limit float64) *fakeBudget { return &fakeBudget{limit: limit} }

func (b *fakeBudget) Debit(usd float64) (float64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if usd != 0 {
		b.debits = append(b.debits, usd)
	}
	b.spent += usd
	return b.limit - b.spent, b.spent < b.limit
}

func (b *fakeBudget) state() (spent float64, debits []float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent, append([]float64(nil), b.debits...)
}

// apiCase is one API as a client speaks it.
type apiCase struct {
	name   string
	model  string
	family Family
	// request builds a request carrying the token as the API's SDK does.
	request func(root, token, model string, stream bool) *http.Request
	// upstreamKey is the key the upstream saw in a logged request.
	upstreamKey func(h http.Header) string
	realKey     string
}

func jsonBody(v any) io.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}

// aTool keeps the stub from taking a request for a side request (a title,
// a summary): it answers the main conversation's text.
var aTool = map[string]any{"name": "Read", "description": "read a file", "input_schema": map[string]any{"type": "object"}}

var apiCases = []apiCase{
	{
		name: "anthropic", model: "claude-sonnet-4-5", family: Anthropic, realKey: anthropicKey,
		request: func(root, token, model string, stream bool) *http.Request {
			r, _ := http.NewRequest("POST", root+"/v1/messages?beta=true", jsonBody(map[string]any{
				"model": model, "max_tokens": 1000, "stream": stream, "tools": []any{aTool},
				"messages": []any{map[string]any{"role": "user", "content": "write the answer"}}}))
			r.Header.Set("X-Api-Key", token)
			r.Header.Set("Anthropic-Version", "2023-06-01")
			r.Header.Set("Content-Type", "application/json")
			return r
		},
		upstreamKey: func(h http.Header) string { return h.Get("X-Api-Key") },
	},
	{
		name: "chat", model: "gpt-4o", family: OpenAI, realKey: openaiKey,
		request: func(root, token, model string, stream bool) *http.Request {
			r, _ := http.NewRequest("POST", root+"/v1/chat/completions", jsonBody(map[string]any{
				"model": model, "stream": stream,
				"tools":    []any{map[string]any{"type": "function", "function": map[string]any{"name": "read", "parameters": map[string]any{"type": "object"}}}},
				"messages": []any{map[string]any{"role": "user", "content": "write the answer"}}}))
			r.Header.Set("Authorization", "Bearer "+token)
			r.Header.Set("Content-Type", "application/json")
			return r
		},
		upstreamKey: func(h http.Header) string { return strings.TrimPrefix(h.Get("Authorization"), "Bearer ") },
	},
	{
		name: "responses", model: "gpt-5", family: OpenAI, realKey: openaiKey,
		request: func(root, token, model string, stream bool) *http.Request {
			r, _ := http.NewRequest("POST", root+"/v1/responses", jsonBody(map[string]any{
				"model": model, "stream": stream, "instructions": "be brief",
				"tools": []any{map[string]any{"type": "function", "name": "read", "parameters": map[string]any{"type": "object"}}},
				"input": []any{map[string]any{"type": "message", "role": "user", "content": "write the answer"}}}))
			r.Header.Set("Authorization", "Bearer "+token)
			r.Header.Set("Content-Type", "application/json")
			return r
		},
		upstreamKey: func(h http.Header) string { return strings.TrimPrefix(h.Get("Authorization"), "Bearer ") },
	},
	{
		name: "gemini", model: "gemini-2.5-flash", family: Gemini, realKey: geminiKey,
		request: func(root, token, model string, stream bool) *http.Request {
			method := ":generateContent"
			if stream {
				method = ":streamGenerateContent?alt=sse"
			}
			r, _ := http.NewRequest("POST", root+"/v1beta/models/"+model+method, jsonBody(map[string]any{
				"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "write the answer"}}}},
				"tools":    []any{map[string]any{"functionDeclarations": []any{map[string]any{"name": "read_file"}}}}}))
			r.Header.Set("X-Goog-Api-Key", token)
			r.Header.Set("Content-Type", "application/json")
			return r
		},
		upstreamKey: func(h http.Header) string { return h.Get("X-Goog-Api-Key") },
	},
}

// do sends a request and reads the whole response; readErr is what reading
// the body ended with (a cut stream ends in an error).
func do(t *testing.T, r *http.Request) (resp *http.Response, body string, readErr error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(r.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", r.Method, r.URL.Path, err)
	}
	defer resp.Body.Close()
	b, readErr := io.ReadAll(resp.Body)
	return resp, string(b), readErr
}

func priceOf(t *testing.T, model string) manifest.Price {
	t.Helper()
	p, ok := agent.LookupPrice(model)
	if !ok {
		t.Fatalf("no price for %s in the table", model)
	}
	return p
}

// closeTo compares dollar figures computed along different paths.
func closeTo(a, b float64) bool {
	d := a - b
	return d < 1e-12 && d > -1e-12
}
