package manifest

import (
	"strings"
	"testing"
)

const httpSupervisor = `"supervisor": {"provider": "script", "script": [{}]}`

func httpAgents(worker string) string {
	return `{"task_description": "t", "agents": {"worker": ` + worker + `, ` + httpSupervisor + `}}`
}

func TestDecodeHTTPAgent(t *testing.T) {
	m := decodeOK(t, httpAgents(`{"provider": "http", "timeout_seconds": 120, "http": {
		"base_url": "http://127.0.0.1:11434/v1", "model": "llama3.2", "api_key_env": "OPENAI_API_KEY",
		"structured_output": "tool", "temperature": 0.2, "max_tokens": 2048,
		"headers_env": {"OpenAI-Organization": "OPENAI_ORG"}, "ca_file": "ca.pem",
		"price": {"input_per_mtok": 1, "output_per_mtok": 2, "cached_input_per_mtok": 0.5}}}`))
	h := m.Agents["worker"].HTTP
	if h == nil || h.BaseURL != "http://127.0.0.1:11434/v1" || h.Model != "llama3.2" || h.APIKeyEnv != "OPENAI_API_KEY" ||
		h.StructuredOutput != "tool" || *h.Temperature != 0.2 || h.MaxTokens != 2048 || h.HeadersEnv["OpenAI-Organization"] != "OPENAI_ORG" ||
		h.CAFile != "ca.pem" || h.Price.OutputPerMTok != 2 || *h.Price.CachedInputPerMTok != 0.5 {
		t.Fatalf("http = %+v", h)
	}
}

func TestDecodeHTTPAgentRefusals(t *testing.T) {
	cases := []struct{ name, worker, pointer, reason string }{
		{"http without http", `{"provider": "http"}`, "/agents/worker", "http"},
		{"literal api_key", `{"provider": "http", "http": {"base_url": "https://api.openai.com/v1", "model": "gpt-4o", "api_key": "sk-literal"}}`, "/agents/worker/http", "api_key"},
		{"literal key in headers", `{"provider": "http", "http": {"base_url": "https://x/v1", "model": "m", "headers": {"Authorization": "Bearer sk"}}}`, "/agents/worker/http", "headers"},
		{"header value not an env name", `{"provider": "http", "http": {"base_url": "https://x/v1", "model": "m", "headers_env": {"X-Key": "Bearer sk-1"}}}`, "/agents/worker/http/headers_env/X-Key", ""},
		{"api_key_env not a name", `{"provider": "http", "http": {"base_url": "https://x/v1", "model": "m", "api_key_env": "sk-abc"}}`, "/agents/worker/http/api_key_env", ""},
		{"missing model", `{"provider": "http", "http": {"base_url": "https://x/v1"}}`, "/agents/worker/http", "model"},
		{"not http url", `{"provider": "http", "http": {"base_url": "ftp://x", "model": "m"}}`, "/agents/worker/http/base_url", ""},
		{"unknown structured_output", `{"provider": "http", "http": {"base_url": "https://x/v1", "model": "m", "structured_output": "json"}}`, "/agents/worker/http/structured_output", ""},
		{"unknown price field", `{"provider": "http", "http": {"base_url": "https://x/v1", "model": "m", "price": {"input_per_mtok": 1, "output_per_mtok": 1, "currency": "EUR"}}}`, "/agents/worker/http/price", "currency"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := wantProblem(t, httpAgents(c.worker), c.pointer, c.reason)
			if strings.Contains(p.Error(), "sk-literal") {
				t.Errorf("the refusal repeats the key: %v", p)
			}
		})
	}
}
