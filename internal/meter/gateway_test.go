package meter

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/testbed/modelstub"
)

// gateway is an OpenAI-compatible upstream behind TLS with a private
// certificate that also wants a header of its own (a company gateway: the
// http agent's ca_file and headers_env). It answers one streamed chat
// completion and records what it was sent.
type gateway struct {
	srv     *httptest.Server
	caFile  string
	mu      sync.Mutex
	headers []http.Header
}

const (
	gatewayKey    = "sk-gateway-real-key"
	gatewaySecret = "gw-org-secret"
)

func startGateway(t *testing.T) *gateway {
	t.Helper()
	g := &gateway{}
	g.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.headers = append(g.headers, r.Header.Clone())
		g.mu.Unlock()
		if r.Header.Get("X-Gateway-Org") != gatewaySecret || r.Header.Get("Authorization") != "Bearer "+gatewayKey {
			http.Error(w, `{"error":{"message":"who are you"}}`, http.StatusForbidden)
			return
		}
		answer, _ := json.Marshal(`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"done"}`)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"id":"c1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":` + string(answer) + `}}]}`,
			`{"id":"c1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"c1","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":100}}`,
			`[DONE]`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", ev)
		}
	}))
	t.Cleanup(g.srv.Close)
	g.caFile = filepath.Join(t.TempDir(), "ca.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: g.srv.Certificate().Raw})
	if err := os.WriteFile(g.caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestHTTPAgentWithCAFileAndHeadersIsMetered: an http agent whose server
// needs a private CA (ca_file) and a header of its own (headers_env) goes
// through the proxy like every other: the proxy checks the server's
// certificate against the agent's CA, sends the header and the key, and
// its figures are the call's cost of record. The agent itself sends the
// proxy neither the key nor the header.
func TestHTTPAgentWithCAFileAndHeadersIsMetered(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "x"}, nil)
	gw := startGateway(t)
	env := map[string]string{"GW_KEY": gatewayKey, "GW_ORG": gatewaySecret}
	provider := func(ca string) *agent.OpenAI {
		return &agent.OpenAI{Cfg: manifest.HTTP{BaseURL: gw.srv.URL + "/v1", Model: "gpt-4o-mini", APIKeyEnv: "GW_KEY",
			HeadersEnv: map[string]string{"X-Gateway-Org": "GW_ORG"}, CAFile: ca}, Getenv: func(k string) string { return env[k] }}
	}
	req := &agent.Request{JobID: "gw", Phase: "work", Role: "worker", SystemPrompt: "You are the Worker.",
		Prompt: "You are the Worker.\n\n## Task\nFix it.", Interaction: 1}
	ctx := agent.WithMeter(context.Background(), h.proxy.ForAgents(h.root), newBudget(1))

	res, err := provider(gw.caFile).Call(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	price := priceOf(t, "gpt-4o-mini")
	want := (1000*price.InputPerMTok + 100*price.OutputPerMTok) / 1e6
	if res.Metered == nil || !closeTo(res.CostUSD, want) || res.Tokens == nil || res.Tokens.Input != 1000 || res.Tokens.Output != 100 {
		t.Errorf("result cost $%v tokens %+v metered %+v, want the proxy's $%v", res.CostUSD, res.Tokens, res.Metered, want)
	}
	gw.mu.Lock()
	seen := gw.headers
	gw.mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("the gateway got %d requests, want 1", len(seen))
	}
	for name, vs := range seen[0] {
		for _, v := range vs {
			if strings.Contains(v, TokenPrefix) {
				t.Errorf("the gateway got a call token in %s", name)
			}
		}
	}

	// Without the agent's CA the proxy does not trust the gateway: the
	// call fails and nothing reached the gateway's handler.
	req.Interaction = 2
	_, err = provider("").Call(ctx, req)
	if ae, ok := agent.AsError(err); !ok || !strings.Contains(ae.Msg, "certificate") {
		t.Errorf("without ca_file: %v, want a certificate error", err)
	}
	gw.mu.Lock()
	n := len(gw.headers)
	gw.mu.Unlock()
	if n != 1 {
		t.Errorf("the gateway got %d requests, want still 1", n)
	}
	if strings.Contains(h.logs.String(), gatewaySecret) || strings.Contains(h.logs.String(), gatewayKey) {
		t.Errorf("the proxy's log holds the gateway's secrets:\n%s", h.logs.String())
	}
}

// TestAgentCannotOverrideUpstreamHeaders: a header the steward set for the
// upstream replaces one of the same name the agent sends.
func TestAgentCannotOverrideUpstreamHeaders(t *testing.T) {
	in := http.Header{"X-Gateway-Org": {"the agent's"}, "X-Other": {"kept"}}
	out := upstreamHeader(in, Upstream{Family: OpenAI, Key: "k", Header: http.Header{"x-gateway-org": {gatewaySecret}}})
	if got := out.Values("X-Gateway-Org"); len(got) != 1 || got[0] != gatewaySecret || out.Get("X-Other") != "kept" {
		t.Errorf("upstream header %v", out)
	}
}

// TestErrorRedactionSkipsShortValues: the proxy's error text loses the
// secrets long enough to redact (secrets.Redactable); a short one (a local
// server's dummy key) is not used to rewrite it.
func TestErrorRedactionSkipsShortValues(t *testing.T) {
	got := redact("dial tcp: lookup none.internal for "+gatewaySecret, []string{"none", gatewaySecret})
	if want := "dial tcp: lookup none.internal for [REDACTED]"; got != want {
		t.Errorf("redact = %q, want %q", got, want)
	}
}
