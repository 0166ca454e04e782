package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/signing"
)

type noGauges struct{}

func (noGauges) JobStatus(string, lifecycle.Status, lifecycle.Status) {}

// What the watcher reports while a transaction of the daemon holds the
// job's lock is the daemon's own append: the relay neither stats the
// history nor waits for the lock then (catchUp would block behind the
// transaction), and checks the history once the transaction ends. A
// steward's append afterwards is still relayed, once.
func TestRelayHearsOwnAppendsAtTheTransactionsEnd(t *testing.T) {
	jobs := t.TempDir()
	key, err := signing.LoadOrCreate(jobs)
	if err != nil {
		t.Fatal(err)
	}
	store := jobstore.New(jobs)
	if err := os.MkdirAll(store.JobDir("j"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store.JobDir("j"), jobstore.ManifestFile), []byte(`{"task_description": "t", "agents": {
  "worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "done"}]},
  "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	r := newRelay(store, slog.New(slog.NewJSONHandler(logs, nil)), noGauges{}, time.Now().Add(-time.Hour))
	quiet := slog.New(slog.NewJSONHandler(&logBuffer{}, nil))
	env := &jobtx.Env{Store: store, Logger: quiet, History: history.Options{Signer: key}, Witness: r}
	tx, err := jobtx.Begin(env, "j", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Transition(lifecycle.EvStart, lifecycle.Running, "work", "SYSTEM", ""); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// The watcher's event for that append, while the lock is held: a
	// catchUp would wait for the lock for ever here.
	r.notify("j")
	done := make(chan struct{})
	go func() { r.drain(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay waited for the lock of the daemon's own transaction")
	}
	if j := r.job("j"); j == nil || !j.heard {
		t.Fatal("the change heard during the transaction was not kept for its end")
	}
	tx.Close()
	r.mu.Lock()
	pending := r.pending["j"]
	r.mu.Unlock()
	if !pending {
		t.Fatal("the transaction's end did not have the history checked")
	}
	r.drain() // the daemon's own: nothing to log
	// A steward's command (another process: no witness) halts the job.
	steward := &jobtx.Env{Store: store, Logger: quiet, History: history.Options{Signer: key}}
	stx, err := jobtx.Begin(steward, "j", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := stx.Transition(lifecycle.EvHalt, lifecycle.Canceled, "", "STEWARD", "halted"); err != nil {
		t.Fatal(err)
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	stx.Close()
	r.notify("j")
	r.drain()
	logs.mu.Lock()
	out := logs.b.String()
	logs.mu.Unlock()
	if n := strings.Count(out, string(lifecycle.EvHalt)); n != 1 || strings.Contains(out, string(lifecycle.EvStart)) {
		t.Errorf("relayed %d halts (want 1) and the daemon's own start %v:\n%s", n, strings.Contains(out, string(lifecycle.EvStart)), out)
	}
}

// An empty history (made ahead of its job's start) is not read: the relay
// takes no lock of the job for it and follows nothing until records come.
func TestRelayPassesOverAnEmptyHistory(t *testing.T) {
	jobs := t.TempDir()
	store := jobstore.New(jobs)
	dir := store.JobDir("j")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, jobstore.ManifestFile), []byte(`{"task_description": "t"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if made, err := history.Prepare(dir); !made || err != nil {
		t.Fatalf("Prepare: %v, %v", made, err)
	}
	r := newRelay(store, slog.New(slog.NewJSONHandler(&logBuffer{}, nil)), noGauges{}, time.Now().Add(-time.Hour))
	r.notify("j")
	r.drain()
	if j := r.job("j"); j != nil {
		t.Fatal("the relay followed an empty history")
	}
}
