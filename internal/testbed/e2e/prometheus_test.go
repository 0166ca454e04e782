package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/daemon"
)

// A real Prometheus (Debian's package) scrapes a running logistd with the
// shipped alert rules; a job that stops for a steward makes
// LogistdJobNeedsSteward pending (then firing) in Prometheus's own API.
func TestPrometheusSeesStewardAlert(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prometheus is not installed (make test-alerts installs Debian's prometheus package)")
		}
		t.Skip("SKIP (loud): prometheus not installed; run make test-alerts first to install it")
	}
	jobs := t.TempDir()
	if err := os.WriteFile(filepath.Join(jobs, "stuck.json"), []byte(`{"task_description": "t", "agents": {
	  "worker": {"provider": "script", "script": [{"action": "STUCK", "summary": "need a human"}]},
	  "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	logistdAddr, promAddr := freePort(t), freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Options{JobsDir: jobs, MaxParallel: 1, Listen: logistdAddr, Grace: time.Second},
			slog.New(slog.NewJSONHandler(io.Discard, nil)))
	}()
	defer func() { cancel(); <-done }() //nolint:errcheck // a stop at the end: the test is over

	// The shipped rules, evaluated every second instead of every 30.
	rules, err := os.ReadFile("../../../deploy/prometheus/logistd-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), []byte(strings.Replace(string(rules), "interval: 30s", "interval: 1s", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yml]
scrape_configs:
  - job_name: logistd
    static_configs:
      - targets: [%q]
`, logistdAddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	deadline := time.Now().Add(90 * time.Second)
	state := ""
	for time.Now().Before(deadline) {
		state = alertState(promAddr, "LogistdJobNeedsSteward")
		if state == "pending" || state == "firing" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if state != "pending" && state != "firing" {
		t.Fatalf("alert state %q after 90s; prometheus log:\n%s", state, logs.String())
	}
	// The alert is about this daemon, and nothing else is alerting.
	if s := alertState(promAddr, "LogistdDown"); s != "" {
		t.Errorf("LogistdDown is %s", s)
	}
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// alertState asks Prometheus's API for an alert's state ("" if none).
func alertState(addr, name string) string {
	resp, err := http.Get("http://" + addr + "/api/v1/alerts")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&r) != nil {
		return ""
	}
	for _, a := range r.Data.Alerts {
		if a.Labels["alertname"] == name && a.Labels["job"] == "logistd" {
			return a.State
		}
	}
	return ""
}
