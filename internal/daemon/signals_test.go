package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"log/slog"
)

// The first stop signal ends the daemon's context naming the signal; a
// second one hurries the shutdown; none hurries nothing.
func TestStopSignals(t *testing.T) {
	for _, sig := range StopSignals {
		sigs := make(chan os.Signal, 2)
		ctx, stop := stopOn(context.Background(), sigs)
		sigs <- sig
		<-ctx.Done()
		if got, want := stopCause(ctx), map[os.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT", syscall.SIGHUP: "SIGHUP"}[sig]; got != want {
			t.Errorf("cause %q, want %q", got, want)
		}
		select {
		case <-hurried(ctx):
			t.Fatal("hurried by one signal")
		default:
		}
		sigs <- sig
		<-hurried(ctx) // the test's deadline if never
		stop()
	}
	ctx, stop := stopOn(context.Background(), make(chan os.Signal))
	stop()
	if stopCause(ctx) != "" {
		t.Errorf("a stop without a signal names %q", stopCause(ctx))
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// SIGHUP stops the daemon as SIGTERM does, logging its name, and a second
// signal stops waiting for a call in flight however long the grace.
func TestSecondSignalStopsTheGrace(t *testing.T) {
	dir := t.TempDir()
	job := `{"task_description": "t", "sandbox": "none",
	  "agents": {"worker": {"provider": "command", "command": {"argv": ["sh", "-c", "touch started; sleep 120"]}}, "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`
	if err := os.WriteFile(filepath.Join(dir, "long.json"), []byte(job), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	sigs := make(chan os.Signal, 2)
	ctx, stop := stopOn(context.Background(), sigs)
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{JobsDir: dir, MaxParallel: 1, Grace: time.Hour}, slog.New(slog.NewJSONHandler(&logs, nil)))
	}()
	waitFor(t, "the call to start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "long", "workspace", "started"))
		return err == nil
	})
	sigs <- syscall.SIGHUP
	waitFor(t, "the shutdown", func() bool { return strings.Contains(logs.String(), `"msg":"shutting down`) })
	if !strings.Contains(logs.String(), `"signal":"SIGHUP"`) {
		t.Errorf("the shutdown line names no SIGHUP:\n%s", logs.String())
	}
	sigs <- syscall.SIGINT
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the daemon still waits for its hour of grace:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "stop signal again") || !strings.Contains(logs.String(), `"msg":"logistd stopped"`) {
		t.Errorf("log:\n%s", logs.String())
	}
}
