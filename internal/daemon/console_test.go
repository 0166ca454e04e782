package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/console"
	"github.com/logist/logist/internal/signing"
)

// TestConsoleMounted: --listen serves the console behind the token
// logistd generates (its path logged, never the token), beside the
// probes, which answer without one.
func TestConsoleMounted(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	var logs logBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{JobsDir: dir, MaxParallel: 1, Listen: addr, Grace: time.Second}, slog.New(slog.NewJSONHandler(&logs, nil)))
	}()
	waitFor(t, "readyz", func() bool { code, _ := get(t, "http://"+addr+"/readyz"); return code == 200 })
	tokFile := filepath.Join(dir, signing.Dir, console.TokenFile)
	b, err := os.ReadFile(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(b))
	logs.mu.Lock()
	logText := logs.b.String()
	logs.mu.Unlock()
	if !strings.Contains(logText, tokFile) || strings.Contains(logText, tok) {
		t.Errorf("the log should name %s and never hold the token", tokFile)
	}
	for _, p := range []string{"/healthz", "/metrics"} {
		if code, _ := get(t, "http://"+addr+p); code != 200 {
			t.Errorf("%s: %d", p, code)
		}
	}
	if code, _ := get(t, "http://"+addr+"/api/v1/jobs"); code != http.StatusUnauthorized {
		t.Errorf("anonymous /api/v1/jobs: %d", code)
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/v1/jobs", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("steward /api/v1/jobs: %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestConsoleListenRules: a non-loopback address without TLS, half a
// TLS pair and an unknown action to switch off are refused at start.
func TestConsoleListenRules(t *testing.T) {
	for name, o := range map[string]Options{
		"non-loopback":   {Listen: "0.0.0.0:0"},
		"half TLS":       {Listen: "127.0.0.1:0", Console: ConsoleOptions{TLSCert: "x.pem"}},
		"unknown action": {Listen: "127.0.0.1:0", Console: ConsoleOptions{Disable: []string{"format-disk"}}},
	} {
		o.JobsDir, o.MaxParallel, o.Grace = t.TempDir(), 1, time.Second
		if err := Run(context.Background(), o, discard()); err == nil {
			t.Errorf("%s: started", name)
		}
	}
}
