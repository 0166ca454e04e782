package meter

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/logist/logist/internal/testbed/modelstub"
)

// stubUsage is what the stub reports on every reply; every API puts it in
// its own fields (Anthropic counts the cached tokens apart from
// input_tokens), and every API must come out as the same Usage.
var stubUsage = modelstub.Usage{Input: 1200, Output: 80, Cached: 200}

var wantUsage = Usage{Input: 1200, CacheRead: 200, Output: 80}

// TestMeteredCallsMatchTheProvidersUsage runs each API streaming and not
// through the proxy: the tokens are the stub's, the cost is the table's
// price of them, the upstream saw the real key and never the token.
func TestMeteredCallsMatchTheProvidersUsage(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: `{"action":"COMPLETED"}`, Usage: stubUsage}, nil)
	for _, ac := range apiCases {
		for _, stream := range []bool{false, true} {
			name := ac.name + map[bool]string{false: "/whole", true: "/stream"}[stream]
			t.Run(name, func(t *testing.T) {
				b := newBudget(1)
				tok := h.issue("job-"+strings.ReplaceAll(name, "/", "-"), b)
				before := len(h.stub.Requests())
				resp, body, err := do(t, ac.request(h.root, tok, ac.model, stream))
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("status %d, read error %v, body %s", resp.StatusCode, err, body)
				}
				if !stream && ac.name != "gemini" && !strings.Contains(body, "COMPLETED") || stream && !strings.Contains(body, "data:") {
					t.Errorf("the answer did not come through:\n%s", body)
				}
				tot, ok := h.proxy.Revoke(tok)
				if !ok {
					t.Fatal("token unknown at revoke")
				}
				if tot.Tokens != wantUsage {
					t.Errorf("tokens %+v, want %+v", tot.Tokens, wantUsage)
				}
				want := Cost(wantUsage, priceOf(t, ac.model))
				if !closeTo(tot.USD, want) {
					t.Errorf("cost %v, want %v", tot.USD, want)
				}
				if spent, _ := b.state(); !closeTo(spent, want) {
					t.Errorf("budget debited %v, want %v", spent, want)
				}
				if tot.Requests != 1 || tot.Cut || tot.Estimated || tot.UpstreamErrors != 0 || len(tot.Refused) != 0 {
					t.Errorf("totals %+v", tot)
				}
				if len(tot.Models) != 1 || tot.Models[0] != ac.model || tot.Job != "job-"+strings.ReplaceAll(name, "/", "-") {
					t.Errorf("totals name %v %s", tot.Models, tot.Job)
				}
				reqs := h.stub.Requests()[before:]
				if len(reqs) != 1 {
					t.Fatalf("the stub got %d requests, want 1", len(reqs))
				}
				l := reqs[0]
				if got := ac.upstreamKey(l.Header); got != ac.realKey {
					t.Errorf("upstream key %q, want the real key", got)
				}
				for k, vs := range l.Header {
					for _, v := range vs {
						if strings.Contains(v, TokenPrefix) {
							t.Errorf("the upstream saw the token in %s", k)
						}
					}
				}
				if l.Turn == nil || l.Turn.Model != ac.model {
					t.Errorf("the upstream got model %+v", l.Turn)
				}
				if ac.name == "chat" && stream && strings.Contains(body, "prompt_tokens") {
					t.Errorf("the client did not ask for usage but got the usage chunk:\n%s", body)
				}
				if ac.name == "chat" && stream && !strings.Contains(body, "[DONE]") {
					t.Errorf("the stream lost its end:\n%s", body)
				}
			})
		}
	}
}

// TestChatUsageChunkKeptWhenAsked: a client that asked for the usage chunk
// gets it; the proxy meters it all the same.
func TestChatUsageChunkKeptWhenAsked(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "done", Usage: stubUsage}, nil)
	tok := h.issue("job", nil)
	r, _ := http.NewRequest("POST", h.root+"/v1/chat/completions", jsonBody(map[string]any{
		"model": "gpt-4o", "stream": true, "stream_options": map[string]any{"include_usage": true},
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}}))
	r.Header.Set("Authorization", "Bearer "+tok)
	_, body, err := do(t, r)
	if err != nil || !strings.Contains(body, `"prompt_tokens":1200`) {
		t.Fatalf("usage chunk missing (%v):\n%s", err, body)
	}
	if tot, _ := h.proxy.Totals(tok); tot.Tokens != wantUsage {
		t.Errorf("tokens %+v", tot.Tokens)
	}
	// The stub saw include_usage: it was asked by the client, and the
	// proxy would have asked anyway.
	if !strings.Contains(string(h.stub.Requests()[0].Body), `"include_usage":true`) {
		t.Errorf("upstream body %s", h.stub.Requests()[0].Body)
	}
}

// TestChatIncludeUsageAddedUpstream: a streaming client that did not ask
// for usage still gets metered, because the proxy asks upstream.
func TestChatIncludeUsageAddedUpstream(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "done", Usage: stubUsage}, nil)
	tok := h.issue("job", nil)
	r, _ := http.NewRequest("POST", h.root+"/chat/completions", jsonBody(map[string]any{
		"model": "gpt-4o", "stream": true, "stream_options": map[string]any{"include_usage": false},
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}}))
	r.Header.Set("Authorization", "Bearer "+tok)
	if _, body, err := do(t, r); err != nil || strings.Contains(body, "prompt_tokens") {
		t.Fatalf("(%v) the client got a usage chunk it did not ask for:\n%s", err, body)
	}
	var sent map[string]any
	if err := json.Unmarshal(h.stub.Requests()[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	if so, _ := sent["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("upstream stream_options %v", sent["stream_options"])
	}
	if tot, _ := h.proxy.Totals(tok); tot.Tokens != wantUsage || tot.Estimated {
		t.Errorf("totals %+v", tot)
	}
}

// TestGeminiArrayStream: a stream asked for without alt=sse is a JSON
// array; the proxy meters it over SSE and gives the array back.
func TestGeminiArrayStream(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "the answer text", Usage: stubUsage}, nil)
	tok := h.issue("job", nil)
	r := apiCases[3].request(h.root, tok, "gemini-2.5-flash", true)
	r.URL.RawQuery = ""
	resp, body, err := do(t, r)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v %s", resp.StatusCode, err, body)
	}
	var arr []map[string]any
	if err := json.Unmarshal([]byte(body), &arr); err != nil || len(arr) < 2 {
		t.Fatalf("not a JSON array of chunks (%v):\n%s", err, body)
	}
	if _, ok := arr[len(arr)-1]["usageMetadata"]; !ok {
		t.Errorf("last element has no usage: %v", arr[len(arr)-1])
	}
	if tot, _ := h.proxy.Totals(tok); tot.Tokens != wantUsage || tot.Estimated {
		t.Errorf("totals %+v", tot)
	}
}
