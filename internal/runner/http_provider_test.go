package runner

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/testkit"
)

// TestHTTPProviderRetriesCutStream runs the real engine and the real http
// provider against an in-process Chat Completions stub: the first call is
// rate limited (Retry-After: 2), the second stream breaks mid-answer, the
// third completes. The job must reach SUCCESS having asked the same prompt
// three times, recorded no half answer as an answer, waited at least the
// Retry-After, and recorded tokens and cost of the complete answer.
func TestHTTPProviderRetriesCutStream(t *testing.T) {
	const key = "sk-engine-test-key-42"
	t.Setenv("LOGIST_TEST_HTTP_KEY", key)
	const answer = `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"Fixed over HTTP."}`
	chunk := func(s string) string {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-e2e", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": s}}}})
		return string(b)
	}
	send := func(w http.ResponseWriter, events ...string) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			fmt.Fprintf(w, "data: %s\n\n", e)
			w.(http.Flusher).Flush()
		}
	}
	var mu sync.Mutex
	var bodies []map[string]any
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			t.Errorf("request body: %v", err)
		}
		mu.Lock()
		n := len(bodies)
		bodies = append(bodies, b)
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		switch n {
		case 0:
			w.Header().Set("Retry-After", "2")
			http.Error(w, `{"error":{"message":"slow down"}}`, http.StatusTooManyRequests)
		case 1: // half an answer, then the connection drops
			send(w, chunk(answer[:25]))
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
		default:
			send(w, chunk(answer[:40]), chunk(answer[40:]),
				`{"id":"chatcmpl-e2e","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
				`{"id":"chatcmpl-e2e","choices":[],"usage":{"prompt_tokens":2000,"completion_tokens":100}}`,
				"[DONE]")
		}
	}))
	defer srv.Close()

	f := newFixture(t)
	f.WriteJob("j", map[string]any{
		"agents": map[string]any{
			"worker": map[string]any{"provider": "http", "http": map[string]any{
				"base_url": srv.URL + "/v1", "model": "gpt-4o-mini", "api_key_env": "LOGIST_TEST_HTTP_KEY"}},
			"supervisor": okSupervisor(),
		},
		"limits": map[string]any{"backoff_initial_ms": 10},
	})
	f.Run("j")

	m := f.Load("j")
	if m.Status != lifecycle.Success {
		t.Fatalf("status = %s (%s)", m.Status, m.Run.Reason)
	}
	recs := f.Records("j")

	// Three worker calls with the same prompt: the 429 closes its turn with
	// an error response and a new turn asks again; the cut stream leaves its
	// turn open and the same stored request is asked again on that turn.
	var intents []history.Record
	for _, r := range testkit.OfType(recs, history.TypeIntent) {
		if r.Role == "worker" {
			intents = append(intents, r)
		}
	}
	if len(intents) != 2 {
		t.Fatalf("%d worker intents, want 2", len(intents))
	}
	if intents[1].Request.Prompt != intents[0].Request.Prompt || intents[1].Request.SystemPrompt != intents[0].Request.SystemPrompt {
		t.Errorf("the second turn asked a different prompt")
	}
	var cut []history.Record
	for _, r := range testkit.OfType(recs, history.TypeError) {
		if r.Error != nil && r.Error.Code == "AGENT_STREAM_FAIL" {
			cut = append(cut, r)
		}
	}
	if len(cut) != 1 || strings.Contains(cut[0].Error.Message, answer[:25]) {
		t.Fatalf("stream failure records %+v (partial text must not be kept)", cut)
	}
	mu.Lock()
	if len(bodies) != 3 {
		t.Fatalf("stub got %d requests, want 3", len(bodies))
	}
	for i := range bodies {
		if !reflect.DeepEqual(bodies[i]["messages"], bodies[0]["messages"]) {
			t.Errorf("request %d sent different messages", i)
		}
		if auth[i] != "Bearer "+key {
			t.Errorf("request %d Authorization %q", i, auth[i])
		}
	}
	mu.Unlock()

	var worker []*history.Response
	for _, r := range testkit.OfType(recs, history.TypeResponse) {
		if r.Role == "worker" {
			worker = append(worker, r.Response)
		}
	}
	if len(worker) != 2 {
		t.Fatalf("%d worker responses, want 2 (none for the cut stream)", len(worker))
	}
	if r := worker[0]; r.Status != history.StatusError || r.ErrorCode != codes.RateLimited {
		t.Errorf("response 0 = %+v", r)
	}
	for _, r := range recs {
		if r.Response != nil && strings.Contains(r.Response.RawResponse, answer[:25]) && r.Response.Status != history.StatusSuccess {
			t.Errorf("partial answer written as a response: %+v", r.Response)
		}
	}
	ok := worker[1]
	if *testkit.OfType(recs, history.TypeResponse)[1].Interaction != *intents[1].Interaction {
		t.Errorf("the answer after the cut stream is not on the same turn")
	}
	if ok.Status != history.StatusSuccess || ok.Action != "COMPLETED" || ok.Summary != "Fixed over HTTP." || ok.SessionID != "chatcmpl-e2e" {
		t.Errorf("response 2 = %+v", ok)
	}
	if ok.Tokens == nil || ok.Tokens.Input != 2000 || ok.Tokens.Output != 100 {
		t.Errorf("tokens = %+v", ok.Tokens)
	}
	wantCost := (2000*0.15 + 100*0.6) / 1e6 // gpt-4o-mini from the price table
	if d := ok.CostUSD - wantCost; d > 1e-12 || d < -1e-12 {
		t.Errorf("cost_usd = %v, want %v", ok.CostUSD, wantCost)
	}
	if d := m.Metrics.CumulativeCost - wantCost*100; d > 1e-9 || d < -1e-9 {
		t.Errorf("cumulative_cost = %v cents, want %v", m.Metrics.CumulativeCost, wantCost*100)
	}

	// The Retry-After of 2s set the floor of the first backoff; the second
	// is the ordinary 10ms·2 ± 50%.
	sl := f.backoffs()
	if len(sl) != 2 || sl[0] < 2*time.Second || sl[1] > 30*time.Millisecond {
		t.Errorf("backoffs = %v, want [≥2s, ≤30ms]", sl)
	}

	// The key is in no file of the job.
	if err := filepath.WalkDir(filepath.Join(f.Dir, "j"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, _ := os.ReadFile(p); strings.Contains(string(b), key) {
			t.Errorf("%s contains the API key", p)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
