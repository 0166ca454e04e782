package meter

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/testbed/modelstub"
)

// TestTokensMapToTheirJobs: each call's traffic is counted for its own
// token only.
func TestTokensMapToTheirJobs(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "ok", Usage: stubUsage}, nil)
	a, b := h.issue("job-a", nil), h.issue("job-b", nil)
	if a == b || !strings.HasPrefix(a, TokenPrefix) || len(a) < len(TokenPrefix)+64 {
		t.Fatalf("tokens %q %q", a, b)
	}
	ac := apiCases[0]
	for _, tok := range []string{a, a, b} {
		if resp, body, _ := do(t, ac.request(h.root, tok, ac.model, false)); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	ta, _ := h.proxy.Revoke(a)
	tb, _ := h.proxy.Revoke(b)
	if ta.Job != "job-a" || ta.Requests != 2 || ta.Tokens.Output != 160 || tb.Job != "job-b" || tb.Requests != 1 || tb.Tokens.Output != 80 {
		t.Errorf("job-a %+v\njob-b %+v", ta, tb)
	}
}

// TestUnknownAndRevokedTokensRefused: a token never issued, a revoked one,
// a real key, and no key at all get 401 and reach nothing.
func TestUnknownAndRevokedTokensRefused(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "ok", Usage: stubUsage}, nil)
	tok := h.issue("job", nil)
	if _, ok := h.proxy.Revoke(tok); !ok {
		t.Fatal("revoke")
	}
	if _, ok := h.proxy.Revoke(tok); ok {
		t.Error("a token revoked twice")
	}
	for _, ac := range apiCases {
		for _, key := range []string{tok, TokenPrefix + strings.Repeat("0", 64), ac.realKey, ""} {
			resp, body, _ := do(t, ac.request(h.root, key, ac.model, true))
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, codes.TokenUnknown) {
				t.Errorf("%s with key %.12q: %d %s", ac.name, key, resp.StatusCode, body)
			}
		}
	}
	if n := len(h.stub.Requests()); n != 0 {
		t.Errorf("%d requests reached the provider", n)
	}
}

// TestUnknownModelRefusedUnlessStewardPriced: a model with no price never
// runs unmetered; a steward's price for it lets it through, priced.
func TestUnknownModelRefusedUnlessStewardPriced(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "ok", Usage: stubUsage}, nil)
	tok := h.issue("job", nil)
	for _, ac := range apiCases {
		resp, body, _ := do(t, ac.request(h.root, tok, "my-local-model", true))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, codes.ModelUnpriced) || !strings.Contains(body, "my-local-model") {
			t.Errorf("%s: %d %s", ac.name, resp.StatusCode, body)
		}
	}
	if n := len(h.stub.Requests()); n != 0 {
		t.Errorf("%d unpriced requests reached the provider", n)
	}
	if tot, _ := h.proxy.Totals(tok); tot.Refused[codes.ModelUnpriced] != len(apiCases) {
		t.Errorf("refusals %v", tot.Refused)
	}

	cached := 0.5
	price := manifest.Price{InputPerMTok: 1, OutputPerMTok: 2, CachedInputPerMTok: &cached}
	priced, err := h.proxy.Issue(Grant{Job: "job", Upstreams: []string{"anthropic", "openai", "gemini"},
		Prices: map[string]manifest.Price{"my-local-model": price}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ac := range apiCases {
		if resp, body, _ := do(t, ac.request(h.root, priced, "my-local-model-2025", false)); resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", ac.name, resp.StatusCode, body)
		}
	}
	tot, _ := h.proxy.Revoke(priced)
	if want := 4 * Cost(wantUsage, price); !closeTo(tot.USD, want) {
		t.Errorf("cost %v, want %v", tot.USD, want)
	}
}

// TestGrantPolicy: a grant limits the models and the providers a call may
// use.
func TestGrantPolicy(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "ok", Usage: stubUsage}, nil)
	tok, err := h.proxy.Issue(Grant{Job: "job", Upstreams: []string{"anthropic"}, Models: []string{"claude-haiku-4-5"}})
	if err != nil {
		t.Fatal(err)
	}
	an := apiCases[0]
	if resp, body, _ := do(t, an.request(h.root, tok, "claude-haiku-4-5-20251001", false)); resp.StatusCode != 200 {
		t.Errorf("allowed model: %d %s", resp.StatusCode, body)
	}
	if resp, body, _ := do(t, an.request(h.root, tok, "claude-opus-4-1", false)); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, codes.ModelNotAllowed) {
		t.Errorf("other model: %d %s", resp.StatusCode, body)
	}
	for _, ac := range apiCases[1:] {
		if resp, body, _ := do(t, ac.request(h.root, tok, ac.model, false)); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, codes.UpstreamNotAllowed) {
			t.Errorf("%s: %d %s", ac.name, resp.StatusCode, body)
		}
	}
	if _, err := h.proxy.Issue(Grant{Job: "job", Upstreams: []string{"nowhere"}}); err == nil {
		t.Error("a grant naming an unknown upstream was issued")
	}
	if _, err := h.proxy.Issue(Grant{Job: "job"}); err == nil {
		t.Error("a grant with no upstream was issued")
	}
}

// TestEndpointsNotMeteredAreRefused: anything but the metered APIs and
// their free helpers is refused, even with a live token.
func TestEndpointsNotMeteredAreRefused(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "ok", Usage: stubUsage}, nil)
	tok := h.issue("job", nil)
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/batches"}, {"POST", "/v1/files"}, {"POST", "/v1/messages/batches"}, {"POST", "/v1/embeddings"},
		{"GET", "/v1/responses/resp_1"}, {"POST", "/v1beta/models/gemini-2.5-flash:embedContent"},
		{"POST", "/v1beta/models/../../x:generateContent"}, {"DELETE", "/v1/models/gpt-4o"},
	} {
		r, _ := http.NewRequest(c.method, h.root+c.path, strings.NewReader("{}"))
		r.Header.Set("Authorization", "Bearer "+tok)
		if resp, body, _ := do(t, r); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, codes.EndpointNotMetered) {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, body)
		}
	}
	// A websocket upgrade cannot be metered.
	r := apiCases[2].request(h.root, tok, "gpt-5", true)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	if resp, body, _ := do(t, r); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("upgrade: %d %s", resp.StatusCode, body)
	}
	if n := len(h.stub.Requests()); n != 0 {
		t.Errorf("%d requests reached the provider", n)
	}
}

// TestFreeEndpointsForwardedWithTheRealKey: model lists and token counts
// go through (with the real key) and cost nothing.
func TestFreeEndpointsForwardedWithTheRealKey(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "ok", Usage: stubUsage}, nil)
	tok := h.issue("job", newBudget(1))
	get, _ := http.NewRequest("GET", h.root+"/v1/models", nil)
	get.Header.Set("Authorization", "Bearer "+tok)
	count, _ := http.NewRequest("POST", h.root+"/v1/messages/count_tokens", jsonBody(map[string]any{"model": "claude-sonnet-4-5"}))
	count.Header.Set("X-Api-Key", tok)
	gcount, _ := http.NewRequest("POST", h.root+"/v1beta/models/gemini-2.5-flash:countTokens?key="+tok, jsonBody(map[string]any{}))
	for _, r := range []*http.Request{get, count, gcount} {
		if resp, body, _ := do(t, r); resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", r.URL.Path, resp.StatusCode, body)
		}
	}
	reqs := h.stub.Requests()
	if len(reqs) != 3 {
		t.Fatalf("stub got %d requests", len(reqs))
	}
	if reqs[0].Header.Get("Authorization") != "Bearer "+openaiKey || reqs[1].Header.Get("X-Api-Key") != anthropicKey ||
		reqs[2].Header.Get("X-Goog-Api-Key") != geminiKey {
		t.Errorf("upstream keys: %v / %v / %v", reqs[0].Header, reqs[1].Header, reqs[2].Header)
	}
	tot, _ := h.proxy.Totals(tok)
	if tot.USD != 0 || tot.Requests != 0 {
		t.Errorf("free endpoints were charged: %+v", tot)
	}
}

// TestServesOnAUnixSocket: the sandbox reaches the proxy through a unix
// socket.
func TestServesOnAUnixSocket(t *testing.T) {
	stub := startStub(t, modelstub.Options{Answer: "ok", Usage: stubUsage})
	p, err := New(Config{Upstreams: stubUpstreams(stub.URL)})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "meter.sock")
	ln, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.Serve(ln) }() // ends at Close
	defer p.Close()
	tok, _ := p.Issue(Grant{Job: "job", Upstreams: []string{"openai"}})
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := client.Do(apiCases[1].request("http://meter", tok, "gpt-4o", true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if tot, _ := p.Revoke(tok); resp.StatusCode != 200 || tot.Tokens != wantUsage {
		t.Errorf("%d %+v", resp.StatusCode, tot)
	}
	// A second proxy takes the socket over once the first is gone.
	p.Close()
	ln2, err := ListenUnix(sock)
	if err != nil {
		t.Fatalf("listen again: %v", err)
	}
	ln2.Close()
}

// TestRequestBodies: a gzip body is decoded and sent as identity; an
// encoding the proxy cannot read, and a body over the bound, are refused.
func TestRequestBodies(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "ok", Usage: stubUsage}, func(c *Config) { c.MaxRequestBytes = 4 << 10 })
	tok := h.issue("job", nil)
	r := apiCases[1].request(h.root, tok, "gpt-4o", false)
	plain, _ := io.ReadAll(r.Body)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(plain) // into a bytes.Buffer: cannot fail
	zw.Close()
	r.Body, r.ContentLength = io.NopCloser(&gz), int64(gz.Len())
	r.Header.Set("Content-Encoding", "gzip")
	if resp, body, _ := do(t, r); resp.StatusCode != 200 {
		t.Fatalf("gzip body: %d %s", resp.StatusCode, body)
	}
	l := h.stub.Requests()[0]
	if l.Header.Get("Content-Encoding") != "" || !bytes.Contains(l.Body, []byte(`"model":"gpt-4o"`)) {
		t.Errorf("upstream got %v %s", l.Header, l.Body)
	}
	if l.Header.Get("Accept-Encoding") != "identity" {
		t.Errorf("upstream Accept-Encoding %q", l.Header.Get("Accept-Encoding"))
	}

	r = apiCases[1].request(h.root, tok, "gpt-4o", false)
	r.Header.Set("Content-Encoding", "zstd")
	if resp, body, _ := do(t, r); resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(body, codes.EncodingUnsupported) {
		t.Errorf("zstd: %d %s", resp.StatusCode, body)
	}
	r, _ = http.NewRequest("POST", h.root+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o","x":"`+strings.Repeat("a", 8<<10)+`"}`))
	r.Header.Set("Authorization", "Bearer "+tok)
	if resp, body, _ := do(t, r); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("large: %d %s", resp.StatusCode, body)
	}
	for _, bad := range []string{`not json`, `{"messages":[]}`, `{"model":""}`, `[1]`} {
		r, _ = http.NewRequest("POST", h.root+"/v1/messages", strings.NewReader(bad))
		r.Header.Set("X-Api-Key", tok)
		if resp, body, _ := do(t, r); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, codes.RequestInvalid) {
			t.Errorf("%s: %d %s", bad, resp.StatusCode, body)
		}
	}
	if n := len(h.stub.Requests()); n != 1 {
		t.Errorf("%d requests reached the provider, want 1", n)
	}
}

// TestDuplicateModelMemberCannotDodgeThePrice: the upstream reads the very
// model the proxy priced, whatever duplicate members the client sent.
func TestDuplicateModelMemberCannotDodgeThePrice(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "ok", Usage: stubUsage}, nil)
	tok := h.issue("job", nil)
	r, _ := http.NewRequest("POST", h.root+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-5-nano","messages":[{"role":"user","content":"hi"}],"model":"gpt-4o"}`))
	r.Header.Set("Authorization", "Bearer "+tok)
	if _, _, err := do(t, r); err != nil {
		t.Fatal(err)
	}
	if got := h.stub.Requests()[0].Turn.Model; got != "gpt-4o" {
		t.Errorf("upstream model %q", got)
	}
	if tot, _ := h.proxy.Totals(tok); len(tot.Models) != 1 || tot.Models[0] != "gpt-4o" || !closeTo(tot.USD, Cost(wantUsage, priceOf(t, "gpt-4o"))) {
		t.Errorf("totals %+v", tot)
	}
}

// TestRevokeEndsRequestsInFlight: revoking a call while a response is
// still coming ends it at once and accounts it before Revoke returns.
func TestRevokeEndsRequestsInFlight(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "ok", Usage: stubUsage}, nil)
	h.stub.Fail(modelstub.Failure{Delay: time.Minute})
	tok := h.issue("job", nil)
	done := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(apiCases[0].request(h.root, tok, "claude-sonnet-4-5", true))
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	for deadline := time.Now().Add(10 * time.Second); h.stub.MainTurns() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the request never reached the stub")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	tot, _ := h.proxy.Revoke(tok)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("revoke took %v", d)
	}
	if tot.Requests != 1 || tot.UpstreamErrors != 1 {
		t.Errorf("totals %+v", tot)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("the agent's request still hangs after revoke")
	}
}

// TestUpstreamTimeoutsAndFailures: a provider that does not answer in time
// or cannot be reached gives the agent a gateway error in the API's shape,
// with no secret in it.
func TestUpstreamTimeoutsAndFailures(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "ok", Usage: stubUsage}, func(c *Config) { c.ResponseHeaderTimeout = 200 * time.Millisecond })
	h.stub.Fail(modelstub.Failure{Delay: 10 * time.Second})
	tok := h.issue("job", nil)
	resp, body, _ := do(t, apiCases[1].request(h.root, tok, "gpt-4o", false))
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, codes.UpstreamFailed) {
		t.Errorf("timeout: %d %s", resp.StatusCode, body)
	}

	dead := newHarnessFor(t, h.stub, map[string]Upstream{"openai": {Family: OpenAI, BaseURL: "http://127.0.0.1:1/v1", Key: openaiKey}}, nil)
	tok, _ = dead.proxy.Issue(Grant{Job: "job", Upstreams: []string{"openai"}})
	resp, body, _ = do(t, apiCases[1].request(dead.root, tok, "gpt-4o", true))
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, openaiKey) || strings.Contains(body, TokenPrefix) {
		t.Errorf("unreachable: %d %s", resp.StatusCode, body)
	}
	if tot, _ := dead.proxy.Totals(tok); tot.UpstreamErrors != 1 || tot.USD != 0 {
		t.Errorf("totals %+v", tot)
	}
}

// TestProviderErrorsPassThroughUncharged: a provider's error status goes
// to the agent as it came (the CLI classifies it) and costs nothing.
func TestProviderErrorsPassThroughUncharged(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "ok", Usage: stubUsage}, nil)
	tok := h.issue("job", newBudget(1))
	for _, ac := range apiCases {
		h.stub.Fail(modelstub.Failure{Status: 429, RetryAfter: "3"})
		// (The stub fails the main conversation, which Gemini streams.)
		resp, body, _ := do(t, ac.request(h.root, tok, ac.model, true))
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" {
			t.Errorf("%s: %d %v %s", ac.name, resp.StatusCode, resp.Header, body)
		}
	}
	if tot, _ := h.proxy.Totals(tok); tot.USD != 0 || tot.UpstreamErrors != len(apiCases) {
		t.Errorf("totals %+v", tot)
	}
}
