package jobstore

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
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

// A running daemon is found from its OFD lock, without /proc/locks (whose
// read waits for an RCU grace period): here /proc/locks is made to show
// nothing, and the daemon is still found.
func TestDaemonPIDFromTheAdvertisement(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(t.TempDir(), "locks")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer func(p string) { procLocks = p }(procLocks)
	procLocks = empty
	s := New(dir)
	lk, err := s.LockDaemon()
	if err != nil {
		t.Fatal(err)
	}
	if pid := s.DaemonPID(); pid != os.Getpid() {
		t.Fatalf("held lock, /proc/locks silent: DaemonPID = %d, want %d", pid, os.Getpid())
	}
	// The daemon's own look (it opens and closes the file) keeps the lock.
	if pid := s.DaemonPID(); pid != os.Getpid() {
		t.Fatalf("second look: DaemonPID = %d, want %d", pid, os.Getpid())
	}
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
	if pid := s.DaemonPID(); pid != 0 {
		t.Fatalf("released lock: DaemonPID = %d, want 0", pid)
	}
}

// A daemon from before the advertisement holds only its flock: the pid in
// its file is alive, so /proc/locks is asked, and it says who holds it.
func TestDaemonPIDOfADaemonWithoutTheAdvertisement(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	p := filepath.Join(dir, daemonLock)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		t.Fatal(err)
	}
	if pid := s.DaemonPID(); pid != os.Getpid() {
		t.Fatalf("flock alone: DaemonPID = %d, want %d", pid, os.Getpid())
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if pid := s.DaemonPID(); pid != 0 {
		t.Fatalf("flock released, live pid in the file: DaemonPID = %d, want 0", pid)
	}
}
