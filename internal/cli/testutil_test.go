package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/atomicfile"
)

// TestMain lets the test binary act as logist (LOGIST_CLI_TEST_MAIN=1):
// shell completion tests run the scripts against it.
func TestMain(m *testing.M) {
	if os.Getenv("LOGIST_CLI_TEST_MAIN") == "1" {
		os.Exit(Main(context.Background(), os.Args, os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// waitFor polls cond (no sleeping longer than a few milliseconds at a time)
// until it holds or the limit passes.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// writeJob writes (atomically, as logistd does) a job's manifest.
func writeJob(t *testing.T, jobs, id, manifestJSON string) {
	t.Helper()
	dir := filepath.Join(jobs, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "job.json"), []byte(manifestJSON), 0o600); err != nil {
		t.Fatal(err)
	}
}

// jobJSON is a valid manifest with the given status and extra fields.
func jobJSON(status, extra string) string {
	s := `{"task_description": "t", "status": "` + status + `", "agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "done"}]}, "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}`
	if extra != "" {
		s += ", " + extra
	}
	return s + "}"
}

// runMain runs logist in-process.
func runMain(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), append([]string{"logist"}, args...), func(k string) string { return env[k] }, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}
