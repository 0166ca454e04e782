package jobtx

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/signing"
)

// TestHTTPAgentKeysAreRedacted: the values of the variables an http
// agent's api_key_env and headers_env name are redacted from the job's
// records, whatever the variables are called (before, only secret_env and
// secret-looking env_allow names were: a model API that quoted the key in
// its answer had it written into history.jsonl, job.json and the logs).
// A value too short to be a key (a local server's "none") is kept.
func TestHTTPAgentKeysAreRedacted(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	dir := filepath.Join(jobs, "j")
	m := `{"task_description": "t", "agents": {
  "worker": {"provider": "http", "http": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "PA_LLM",
    "headers_env": {"X-Gateway": "PA_GW"}, "price": {"input_per_mtok": 0, "output_per_mtok": 0}}},
  "supervisor": {"provider": "http", "http": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "PA_LOCAL",
    "price": {"input_per_mtok": 0, "output_per_mtok": 0}}}}}`
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, jobstore.ManifestFile), []byte(m), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := signing.LoadOrCreate(jobs)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PA_LLM": "sk-llm-0123456789", "PA_GW": "gw-secret-0123456789", "PA_LOCAL": "none"}
	tx, err := Begin(&Env{Store: jobstore.New(jobs), Logger: slog.New(slog.DiscardHandler), History: history.Options{Signer: key},
		Getenv: func(k string) string { return env[k] }}, "j", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	got := tx.Redact("your key is Bearer sk-llm-0123456789, the gateway's gw-secret-0123456789; none")
	if want := "your key is Bearer [REDACTED:PA_LLM], the gateway's [REDACTED:PA_GW]; none"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
