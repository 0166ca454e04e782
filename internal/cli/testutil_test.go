package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// runMainWithin runs logist in-process as runMain does, and fails the
// test if it has not returned within 10 s: the commands that read a named
// pipe no one writes to waited for ever.
func runMainWithin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	type ran struct {
		code     int
		out, err string
	}
	done := make(chan ran, 1)
	go func() {
		var r ran
		var out, errb bytes.Buffer
		r.code = Main(context.Background(), append([]string{"logist"}, args...), func(string) string { return "" }, strings.NewReader(""), &out, &errb)
		r.out, r.err = out.String(), errb.String()
		done <- r
	}()
	select {
	case r := <-done:
		return r.code, r.out, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("logist %q did not return", args)
		return 0, "", ""
	}
}

// mkfifo makes a named pipe at path (a test that needs one is skipped,
// loudly, where there are none).
func mkfifo(t *testing.T, path string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip("SKIP (loud): no named pipes here:", err)
	}
	return path
}
