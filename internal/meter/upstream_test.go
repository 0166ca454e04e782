package meter

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/testbed/modelstub"
)

// fakeUpstream answers every request with the given header and body.
func fakeUpstream(t *testing.T, header map[string]string, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(200)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// through sends one request of an API to a fake upstream and returns the
// response's body and the call's totals.
func through(t *testing.T, ac apiCase, stream bool, header map[string]string, body string) (int, string, Totals) {
	t.Helper()
	up := fakeUpstream(t, header, body)
	h := newHarnessFor(t, nil, stubUpstreams(up.URL), nil)
	tok := h.issue("job", nil)
	resp, got, _ := do(t, ac.request(h.root, tok, ac.model, stream))
	tot, _ := h.proxy.Revoke(tok)
	return resp.StatusCode, got, tot
}

func sseBody(events ...string) string { return strings.Join(events, "\n\n") + "\n\n" }

var sseHeader = map[string]string{"Content-Type": "text/event-stream"}

// TestGeminiRunningUsage: Gemini's early chunks carry the prompt count
// only, the last one all of it; thoughts are output.
func TestGeminiRunningUsage(t *testing.T) {
	body := sseBody(
		`data: {"candidates":[{"content":{"parts":[{"text":"abcd"}]}}],"usageMetadata":{"promptTokenCount":500,"totalTokenCount":500}}`,
		`data: {"candidates":[{"content":{"parts":[{"text":"efgh"}]}}],"usageMetadata":{"promptTokenCount":500,"totalTokenCount":500}}`,
		`data: {"candidates":[{"content":{"parts":[{"text":"ij"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":500,"cachedContentTokenCount":100,"candidatesTokenCount":30,"thoughtsTokenCount":20,"toolUsePromptTokenCount":7}}`)
	status, got, tot := through(t, apiCases[3], true, sseHeader, body)
	if status != 200 || got != body {
		t.Errorf("the stream changed on its way:\n%q\n%q", got, body)
	}
	if want := (Usage{Input: 507, CacheRead: 100, Output: 50}); tot.Tokens != want || tot.Estimated {
		t.Errorf("totals %+v, want %+v", tot, want)
	}
}

// TestAnthropicUsageMerges: message_delta's counts are cumulative and may
// repeat or leave out the input counts of message_start.
func TestAnthropicUsageMerges(t *testing.T) {
	body := sseBody(
		"event: message_start\ndata: "+`{"type":"message_start","message":{"model":"claude-sonnet-4-5","usage":{"input_tokens":10,"cache_read_input_tokens":300,"cache_creation_input_tokens":40,"output_tokens":1}}}`,
		"event: content_block_delta\ndata: "+`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm, let me think"}}`,
		"event: content_block_delta\ndata: "+`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}`,
		"event: message_delta\ndata: "+`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"input_tokens":12,"output_tokens":55}}`,
		"event: message_stop\ndata: "+`{"type":"message_stop"}`)
	_, _, tot := through(t, apiCases[0], true, sseHeader, body)
	if want := (Usage{Input: 352, CacheRead: 300, CacheWrite: 40, Output: 55}); tot.Tokens != want || tot.Estimated {
		t.Errorf("totals %+v, want %+v", tot, want)
	}
}

// TestStreamWithoutUsageIsChargedAnEstimate: a server that ignores
// include_usage, or a stream that ends early, is charged an estimate and
// says so: never free.
func TestStreamWithoutUsageIsChargedAnEstimate(t *testing.T) {
	body := sseBody(
		`data: {"choices":[{"delta":{"content":"`+strings.Repeat("x", 400)+`"}}]}`,
		`data: {"choices":[{"delta":{"tool_calls":[{"function":{"name":"read","arguments":"{\"p\":\"`+strings.Repeat("y", 100)+`\"}"}}]}}]}`,
		`data: [DONE]`)
	_, _, tot := through(t, apiCases[1], true, sseHeader, body)
	if !tot.Estimated || tot.Tokens.Output < 125 || tot.Tokens.Input == 0 || tot.USD <= 0 {
		t.Errorf("totals %+v: want an estimate of about 100+ input and 128 output tokens", tot)
	}
}

// TestResponsesDeltasEstimateTheStream: every *.delta of a Responses stream
// counts until response.completed gives the figures.
func TestResponsesDeltasEstimateTheStream(t *testing.T) {
	ev := func(typ, rest string) string {
		return fmt.Sprintf("event: %s\ndata: {\"type\":%q,%s}", typ, typ, rest)
	}
	partial := sseBody(
		ev("response.created", `"sequence_number":0,"response":{"status":"in_progress","usage":null}`),
		ev("response.reasoning_summary_text.delta", `"sequence_number":1,"delta":"`+strings.Repeat("r", 80)+`"`),
		ev("response.output_text.delta", `"sequence_number":2,"delta":"`+strings.Repeat("t", 40)+`"`),
		ev("response.function_call_arguments.delta", `"sequence_number":3,"delta":"`+strings.Repeat("a", 40)+`"`))
	_, _, tot := through(t, apiCases[2], true, sseHeader, partial)
	if !tot.Estimated || tot.Tokens.Output != 40 {
		t.Errorf("partial stream totals %+v: want 40 estimated output tokens", tot)
	}
	full := partial + sseBody(ev("response.completed", `"sequence_number":4,"response":{"status":"completed","usage":{"input_tokens":900,"input_tokens_details":{"cached_tokens":100},"output_tokens":77,"output_tokens_details":{"reasoning_tokens":30}}}`))
	_, _, tot = through(t, apiCases[2], true, sseHeader, full)
	if want := (Usage{Input: 900, CacheRead: 100, Output: 77}); tot.Tokens != want || tot.Estimated {
		t.Errorf("totals %+v, want %+v", tot, want)
	}
}

// TestGzipResponseDecoded: a server that gzips although identity was
// asked for is decoded, metered and passed on decoded.
func TestGzipResponseDecoded(t *testing.T) {
	plain := `{"id":"x","model":"gpt-4o","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5}}`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(plain)) // into a bytes.Buffer: cannot fail
	zw.Close()
	status, got, tot := through(t, apiCases[1], false, map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}, gz.String())
	if status != 200 || got != plain || tot.Tokens != (Usage{Input: 10, Output: 5}) {
		t.Errorf("%d %q %+v", status, got, tot)
	}
}

// TestUnreadableEncodingIsChargedNotPassed: a response the proxy cannot
// read is charged an estimate and not passed on unmetered.
func TestUnreadableEncodingIsChargedNotPassed(t *testing.T) {
	status, got, tot := through(t, apiCases[1], false, map[string]string{"Content-Type": "application/json", "Content-Encoding": "br"}, "\x0b\x02\x80garbage")
	if status != http.StatusBadGateway || !strings.Contains(got, codes.ResponseUnmeterable) || !tot.Estimated || tot.USD <= 0 {
		t.Errorf("%d %s %+v", status, got, tot)
	}
}

// TestHopByHopHeadersNotForwarded: neither direction passes hop-by-hop
// headers, the agent's credentials or cookies.
func TestHopByHopHeadersNotForwarded(t *testing.T) {
	var seen http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Connection", "X-Secret-Hop")
		w.Header().Set("X-Secret-Hop", "1")
		w.Header().Set("Set-Cookie", "session=abc")
		w.Header().Set("X-Request-Id", "req_1")
		_, _ = w.Write([]byte(`{"model":"gpt-4o","usage":{"prompt_tokens":1,"completion_tokens":1}}`))
	}))
	defer up.Close()
	h := newHarnessFor(t, nil, stubUpstreams(up.URL), nil)
	tok := h.issue("job", nil)
	r := apiCases[1].request(h.root, tok, "gpt-4o", false)
	r.Header.Set("Connection", "X-Client-Hop")
	r.Header.Set("X-Client-Hop", "1")
	r.Header.Set("Cookie", "c=1")
	r.Header.Set("X-Api-Key", "something-else")
	r.Header.Set("User-Agent", "agent/1.0")
	resp, _, _ := do(t, r)
	for _, k := range []string{"X-Client-Hop", "Cookie", "X-Api-Key", "Proxy-Authorization"} {
		if seen.Get(k) != "" {
			t.Errorf("upstream got %s: %q", k, seen.Get(k))
		}
	}
	if seen.Get("User-Agent") != "agent/1.0" || seen.Get("Authorization") != "Bearer "+openaiKey {
		t.Errorf("upstream header %v", seen)
	}
	if resp.Header.Get("X-Secret-Hop") != "" || resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("X-Request-Id") != "req_1" {
		t.Errorf("client header %v", resp.Header)
	}
}

// TestBrokenAndMalformedStreams: a stream the provider breaks off, or one
// that is not JSON, is passed on as it came (the CLI sees the failure),
// breaks off for the client too, and is charged an estimate.
func TestBrokenAndMalformedStreams(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: longAnswer, Chunks: 8, Usage: stubUsage}, nil)
	for _, f := range []modelstub.Failure{{Cut: true}, {Malformed: true}} {
		for _, ac := range apiCases {
			h.stub.Fail(f)
			tok := h.issue("job", nil)
			_, body, readErr := do(t, ac.request(h.root, tok, ac.model, true))
			tot, _ := h.proxy.Revoke(tok)
			if !tot.Estimated || tot.USD <= 0 || tot.Cut {
				t.Errorf("%s %+v: totals %+v", ac.name, f, tot)
			}
			if f.Cut && readErr == nil {
				t.Errorf("%s: a broken stream reached the client as complete:\n%s", ac.name, tail(body))
			}
		}
	}
}

// TestOversizedResponsesChargedNotPassed: an event or a whole response
// over the bounds is charged as estimated; the event's stream breaks off,
// the whole response becomes a 502.
func TestOversizedResponsesChargedNotPassed(t *testing.T) {
	big := strings.Repeat("x", 8<<10)
	stream := sseBody(`data: {"choices":[{"delta":{"content":"ok"}}]}`, `data: {"choices":[{"delta":{"content":"`+big+`"}}]}`)
	whole := `{"model":"gpt-4o","choices":[{"message":{"content":"` + big + `"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`
	for _, c := range []struct {
		stream bool
		header map[string]string
		body   string
	}{{true, sseHeader, stream}, {false, map[string]string{"Content-Type": "application/json"}, whole}} {
		up := fakeUpstream(t, c.header, c.body)
		h := newHarnessFor(t, nil, stubUpstreams(up.URL), func(cfg *Config) { cfg.MaxEventBytes, cfg.MaxResponseBytes = 4<<10, 4<<10 })
		tok := h.issue("job", nil)
		resp, got, readErr := do(t, apiCases[1].request(h.root, tok, "gpt-4o", c.stream))
		tot, _ := h.proxy.Revoke(tok)
		if !tot.Estimated || tot.Tokens.Output < 1000 {
			t.Errorf("stream %v: totals %+v", c.stream, tot)
		}
		if c.stream && readErr == nil || !c.stream && (resp.StatusCode != http.StatusBadGateway || !strings.Contains(got, codes.ResponseUnmeterable)) {
			t.Errorf("stream %v: %d %v %.300s", c.stream, resp.StatusCode, readErr, got)
		}
	}
}

// TestFinalUsageIsNotCut: when the budget runs out only with the
// provider's final usage, the answer is complete and paid for: it is
// passed on whole (like a whole response), and the next request is
// refused.
func TestFinalUsageIsNotCut(t *testing.T) {
	body := sseBody(`data: {"choices":[{"delta":{"content":"short"}}]}`, `data: {"choices":[{"delta":{},"finish_reason":"stop"}]}`,
		`data: {"choices":[],"usage":{"prompt_tokens":100000,"completion_tokens":5000}}`, `data: [DONE]`)
	up := fakeUpstream(t, sseHeader, body)
	h := newHarnessFor(t, nil, stubUpstreams(up.URL), nil)
	b := newBudget(0.01) // the estimate fits; the final usage ($0.30) does not
	tok := h.issue("job", b)
	_, got, readErr := do(t, apiCases[1].request(h.root, tok, "gpt-4o", true))
	if readErr != nil || !strings.Contains(got, "[DONE]") || strings.Contains(got, codes.BudgetSpent) {
		t.Errorf("the paid answer was cut (%v):\n%s", readErr, got)
	}
	tot, _ := h.proxy.Totals(tok)
	if tot.Cut || tot.Estimated || tot.Tokens.Input != 100000 {
		t.Errorf("totals %+v", tot)
	}
	if resp, _, _ := do(t, apiCases[1].request(h.root, tok, "gpt-4o", true)); resp.StatusCode != http.StatusPaymentRequired {
		t.Errorf("next request: %d", resp.StatusCode)
	}
}

// TestSilentUpstreamTimesOut: a provider that falls silent in the middle
// of a response is given up after the idle timeout; what streamed is
// charged as estimated and the agent sees the response break off.
func TestSilentUpstreamTimesOut(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(`data: {"choices":[{"delta":{"content":"` + strings.Repeat("x", 400) + `"}}]}` + "\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer up.Close()
	h := newHarnessFor(t, nil, stubUpstreams(up.URL), func(c *Config) { c.IdleTimeout = 200 * time.Millisecond })
	tok := h.issue("job", nil)
	start := time.Now()
	_, body, readErr := do(t, apiCases[1].request(h.root, tok, "gpt-4o", true))
	if readErr == nil || !strings.Contains(body, "xxxx") || time.Since(start) > 10*time.Second {
		t.Errorf("(%v after %v) %s", readErr, time.Since(start), body)
	}
	if tot, _ := h.proxy.Revoke(tok); !tot.Estimated || tot.Tokens.Output != 100 {
		t.Errorf("totals %+v", tot)
	}
	if !strings.Contains(h.logs.String(), codes.UpstreamIdleTimeout) {
		t.Errorf("the log does not say why:\n%s", h.logs.String())
	}
}

// TestRedirectIsNotPassedOn: a provider that answers a model request (or a
// free one, a model list) with a redirect to another host gets a 502
// naming it; the agent's client, which follows redirects, never reaches
// that host (before, it sent its request there, past the proxy, and the
// answer from there was taken unmetered).
func TestRedirectIsNotPassedOn(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"index":0,"message":{"content":"free"},"finish_reason":"stop"}]}`))
	}))
	t.Cleanup(other.Close)
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, status)
		}))
		t.Cleanup(up.Close)
		h := newHarnessFor(t, nil, stubUpstreams(up.URL), nil)
		tok := h.issue("job", nil)
		models, _ := http.NewRequest("GET", h.root+"/v1/models", nil)
		models.Header.Set("Authorization", "Bearer "+tok)
		for _, r := range []*http.Request{apiCases[1].request(h.root, tok, apiCases[1].model, false), models} {
			resp, got, _ := do(t, r)
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(got, codes.UpstreamFailed) ||
				!strings.Contains(got, fmt.Sprintf(`answered HTTP %d, a redirect (Location \"%s`, status, other.URL)) {
				t.Errorf("%d, %s %s: got %d %s", status, r.Method, r.URL.Path, resp.StatusCode, got)
			}
		}
		_, _ = h.proxy.Revoke(tok)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect's target was sent %d requests", n)
	}
}

// TestNegativeUsageIsNotBelieved: a provider that reports a negative count
// in any API is charged the estimate, and the totals say so (before, the
// count was taken as 0: the call was free and no budget stopped it).
func TestNegativeUsageIsNotBelieved(t *testing.T) {
	text := strings.Repeat("x", 400)
	ev := func(typ, rest string) string {
		return fmt.Sprintf("event: %s\ndata: {\"type\":%q,%s}", typ, typ, rest)
	}
	bodies := []string{
		sseBody(
			ev("message_start", `"message":{"model":"claude-sonnet-4-5","usage":{"input_tokens":-5,"output_tokens":-1}}`),
			ev("content_block_delta", `"index":0,"delta":{"type":"text_delta","text":"`+text+`"}`),
			ev("message_delta", `"delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":-7}`),
			ev("message_stop", `"x":0`)),
		sseBody(
			`data: {"choices":[{"index":0,"delta":{"content":"`+text+`"},"finish_reason":"stop"}]}`,
			`data: {"choices":[],"usage":{"prompt_tokens":-5,"completion_tokens":-7}}`,
			`data: [DONE]`),
		sseBody(
			ev("response.output_text.delta", `"sequence_number":1,"delta":"`+text+`"`),
			ev("response.completed", `"sequence_number":2,"response":{"status":"completed","usage":{"input_tokens":-5,"output_tokens":-7}}`)),
		sseBody(
			`data: {"candidates":[{"content":{"parts":[{"text":"` + text + `"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":-5,"candidatesTokenCount":-7}}`),
	}
	for i, ac := range apiCases {
		_, _, tot := through(t, ac, true, sseHeader, bodies[i])
		if !tot.Estimated || tot.Tokens.Output < 100 || tot.Tokens.Input <= 0 || tot.USD <= 0 {
			t.Errorf("%s: totals %+v: want an estimate of 100 output tokens and the request's input", ac.name, tot)
		}
	}
	// A negative cache count is no count either; a count past the bound is
	// the bound.
	_, _, tot := through(t, apiCases[1], true, sseHeader, sseBody(
		`data: {"choices":[{"index":0,"delta":{"content":"`+text+`"},"finish_reason":"stop"}]}`,
		`data: {"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":9223372036854775807,"prompt_tokens_details":{"cached_tokens":-40}}}`,
		`data: [DONE]`))
	if tot.Tokens.Input == 50 || tot.Tokens.Output != maxTokens || !tot.Estimated {
		t.Errorf("totals %+v: want the input estimated and the output at the bound", tot)
	}
}

// TestRefusalQuotingTheKeyIsRedacted: a provider's refusal (or a free
// endpoint's answer) that quotes the real key the proxy sent it, in its
// body or a header, reaches the agent with the key redacted (before, the
// agent read the key it must never hold in a 401's "Incorrect API key
// provided: …").
func TestRefusalQuotingTheKeyIsRedacted(t *testing.T) {
	for _, ac := range apiCases {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got := ac.upstreamKey(r.Header)
			w.Header().Set("X-Echo", "key="+got)
			w.Header().Set("Content-Type", "application/json")
			status := http.StatusUnauthorized
			if r.Method == http.MethodGet {
				status = http.StatusOK
			}
			w.WriteHeader(status)
			_, _ = fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s"}}`, got)
		}))
		t.Cleanup(up.Close)
		h := newHarnessFor(t, nil, stubUpstreams(up.URL), nil)
		tok := h.issue("job", nil)
		models := ac.request(h.root, tok, ac.model, false)
		models.Method, models.Body, models.ContentLength = http.MethodGet, http.NoBody, 0
		models.URL.Path, models.URL.RawQuery = "/v1/models", ""
		if ac.family == Gemini {
			models.URL.Path = "/v1beta/models"
		}
		for _, r := range []*http.Request{ac.request(h.root, tok, ac.model, true), models} {
			resp, got, _ := do(t, r)
			if strings.Contains(got, ac.realKey) || strings.Contains(resp.Header.Get("X-Echo"), ac.realKey) ||
				!strings.Contains(got, "Incorrect API key provided: [REDACTED]") || resp.Header.Get("X-Echo") != "key=[REDACTED]" {
				t.Errorf("%s %s %s: %d %q, X-Echo %q: want the key redacted", ac.name, r.Method, r.URL.Path, resp.StatusCode, got, resp.Header.Get("X-Echo"))
			}
		}
		_, _ = h.proxy.Revoke(tok)
	}
}
