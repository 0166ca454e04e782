package jobstore

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

func TestDaemonPID(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	if pid := s.DaemonPID(); pid != 0 {
		t.Fatalf("no lock file: DaemonPID = %d, want 0", pid)
	}
	// A lock file a daemon left behind, with a live pid in it, but not
	// held: no daemon.
	if err := os.WriteFile(filepath.Join(dir, daemonLock), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pid := s.DaemonPID(); pid != 0 {
		t.Fatalf("unheld lock: DaemonPID = %d, want 0", pid)
	}
	lk, err := s.LockDaemon()
	if err != nil {
		t.Fatal(err)
	}
	if pid := s.DaemonPID(); pid != os.Getpid() {
		t.Fatalf("held lock: DaemonPID = %d, want %d", pid, os.Getpid())
	}
	lk.Unlock()
	if pid := s.DaemonPID(); pid != 0 {
		t.Fatalf("released lock: DaemonPID = %d, want 0", pid)
	}
}

// Asking whether a daemon runs never takes its lock: a daemon starting
// while someone runs logist status (or watch, polling) is never refused.
func TestDaemonPIDNeverTakesTheLock(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	if err := os.WriteFile(filepath.Join(dir, daemonLock), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				New(dir).DaemonPID()
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	for i := range 200 {
		lk, err := s.LockDaemon()
		var locked *DaemonLockedError
		if errors.As(err, &locked) {
			t.Fatalf("start %d: a reader's look at the lock refused the daemon: %v", i, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		lk.Unlock()
		// Truncated, as a daemon that has just taken the lock leaves it
		// before writing its pid.
		if err := os.WriteFile(filepath.Join(dir, daemonLock), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
