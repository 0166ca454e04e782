package jobstore

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/atomicfile"
)

// holdLock takes the daemon lock file's flock through a descriptor of its
// own, as a process other than the one that wrote the pid would, and
// writes pid into it.
func holdLock(t *testing.T, dir string, pid int) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, daemonLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(pid)+"\n"), 0); err != nil {
		t.Fatal(err)
	}
	return f
}

func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// A killed daemon's lock can outlive it for a moment, held by a child that
// had not yet exec'd: a new daemon waits for it rather than refusing.
func TestDaemonLockOfADeadDaemonIsWaitedFor(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	f := holdLock(t, dir, deadPID(t))
	go func() {
		time.Sleep(100 * time.Millisecond)
		f.Close() // the child execs: its copy of the descriptor closes
	}()
	start := time.Now()
	lk, err := s.LockDaemon()
	if err != nil {
		t.Fatalf("LockDaemon after the holder died: %v", err)
	}
	defer lk.Unlock()
	if d := time.Since(start); d < 80*time.Millisecond {
		t.Errorf("took the lock after %s, while it was still held", d)
	}
	b, _ := os.ReadFile(filepath.Join(dir, daemonLock))
	if string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Errorf("lock file says %q", b)
	}
}

// A live daemon's lock is refused at once, naming it.
func TestDaemonLockOfALiveDaemonIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	live := exec.Command("sleep", "10")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	f := holdLock(t, dir, live.Process.Pid)
	defer f.Close()
	start := time.Now()
	_, err := s.LockDaemon()
	var locked *DaemonLockedError
	if !errors.As(err, &locked) || locked.PID != live.Process.Pid {
		t.Fatalf("LockDaemon = %v, want DaemonLockedError naming %d", err, live.Process.Pid)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusal took %s", d)
	}
}

// A crash between creating a job's folder and moving its manifest in
// leaves an empty folder; placing the manifest again takes it.
func TestPlaceTakesFolderLeftByCrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	if err := os.Mkdir(filepath.Join(dir, "left"), 0o700); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(dir, "left.json")
	if err := os.WriteFile(bare, []byte(`{"task_description": "t"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	id, placed, err := s.Place(bare)
	if err != nil || id != "left" || !placed {
		t.Fatalf("Place: %q %v %v", id, placed, err)
	}
	if err := s.SettlePlaced(id); err != nil {
		t.Fatal(err)
	}
	// A folder with a manifest is another job.
	if err := os.WriteFile(bare, []byte(`{"task_description": "t"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Place(bare); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second Place: %v", err)
	}
}

// The daemon ignores the watcher's echo of its own manifest saves, but never
// a change another process made.
func TestWrittenHere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	if err := os.MkdirAll(filepath.Join(dir, "j"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "j", ManifestFile), []byte(`{"task_description": "t", "agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "x"}]}, "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "x"}]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if s.WrittenHere("j") {
		t.Fatal("a manifest this store never saved counts as its own")
	}
	m, err := s.Load("j")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(m); err != nil {
		t.Fatal(err)
	}
	if !s.WrittenHere("j") {
		t.Fatal("own save not recognised")
	}
	// Another process (here: another Store) replaces it, even with the
	// same content and size.
	if err := New(dir).Save(m); err != nil {
		t.Fatal(err)
	}
	if s.WrittenHere("j") {
		t.Fatal("another writer's manifest taken for our own")
	}
}

// Place leaves both folders it changed to be fsync'd later (by the job's
// first history append, or SettlePlaced) instead of fsyncing them itself.
func TestPlaceDefersFolderSyncs(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	bare := filepath.Join(dir, "p.json")
	if err := os.WriteFile(bare, []byte(`{"task_description": "t"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	n := atomicfile.DirSyncs.Load()
	id, _, err := s.Place(bare)
	if err != nil {
		t.Fatal(err)
	}
	if got := atomicfile.DirSyncs.Load() - n; got != 0 {
		t.Fatalf("Place made %d folder fsyncs, want 0", got)
	}
	if !atomicfile.Dirty(dir) || !atomicfile.Dirty(s.JobDir(id)) {
		t.Fatal("Place did not mark the jobs folder and the job folder dirty")
	}
	if err := s.SettlePlaced(id); err != nil {
		t.Fatal(err)
	}
	if got := atomicfile.DirSyncs.Load() - n; got != 2 {
		t.Fatalf("SettlePlaced made %d folder fsyncs, want 2", got)
	}
	if atomicfile.Dirty(dir) || atomicfile.Dirty(s.JobDir(id)) {
		t.Fatal("still dirty after SettlePlaced")
	}
}

// Relock stats its kept descriptor once (its folder never changes) and
// compares the path against that: a folder replaced since is still caught,
// and the lock taken again on the new folder.
func TestRelockStatsItsDescriptorOnce(t *testing.T) {
	n := 0
	fstatLock = func(f *os.File) (os.FileInfo, error) { n++; return f.Stat() }
	t.Cleanup(func() { fstatLock = (*os.File).Stat })
	s := New(t.TempDir())
	mkjob := func() {
		if err := os.MkdirAll(s.JobDir("j"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.JobDir("j"), ManifestFile), []byte(`{}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mkjob()
	l, err := s.LockJob("j")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
		if l, err = s.Relock("j", l); err != nil {
			t.Fatal(err)
		}
	}
	if n != 1 {
		t.Errorf("three Relocks took %d fstats of the kept descriptor, want 1", n)
	}
	// The folder replaced by another: the lock is taken on the new one.
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(s.JobDir("j"), s.JobDir("old")); err != nil {
		t.Fatal(err)
	}
	mkjob()
	if l, err = s.Relock("j", l); err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	mine, err := l.f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	cur, err := os.Stat(s.JobDir("j"))
	if err != nil || !os.SameFile(cur, mine) {
		t.Fatalf("after the folder was replaced, Relock holds another folder than the job's (%v)", err)
	}
}

// The transaction that holds a Relock'd lock asks whether job.json is its
// own last save from the stat Relock took under the lock: yes after its
// own save, no after a hand edit or a replacement made while the lock was
// released, and no for a lock LockJob took (no stat under it).
func TestWrittenHereAsFromTheRelocksStat(t *testing.T) {
	t.Parallel()
	s := New(t.TempDir())
	s.InPlace = true
	if err := os.MkdirAll(s.JobDir("j"), 0o700); err != nil {
		t.Fatal(err)
	}
	mf := filepath.Join(s.JobDir("j"), ManifestFile)
	if err := os.WriteFile(mf, []byte(`{"job_id":"j"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := s.LockJob("j")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteManifestCopy("j", []byte(`{"job_id":"j","status":"WORKING"}`)); err != nil {
		t.Fatal(err)
	}
	if s.WrittenHereAs("j", l) {
		t.Error("WrittenHereAs of a lock LockJob took: true, want false (no stat under it)")
	}
	relock := func() {
		t.Helper()
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
		if l, err = s.Relock("j", l); err != nil {
			t.Fatal(err)
		}
	}
	relock()
	if !s.WrittenHereAs("j", l) || !s.WrittenHere("j") {
		t.Error("after its own save: not WrittenHereAs")
	}
	// A hand edit in place while the lock is released (same inode).
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mf, []byte(`{"job_id":"j","status":"WORKING","task_description":"edited"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err = s.Relock("j", l); err != nil {
		t.Fatal(err)
	}
	if s.WrittenHereAs("j", l) || s.WrittenHere("j") {
		t.Error("after a hand edit: WrittenHereAs, want not")
	}
	if err := s.WriteManifestCopy("j", []byte(`{"job_id":"j","status":"REVIEWING"}`)); err != nil {
		t.Fatal(err)
	}
	// Replaced by another file while the lock is released.
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(mf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mf+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(mf+".new", mf); err != nil {
		t.Fatal(err)
	}
	if l, err = s.Relock("j", l); err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if s.WrittenHereAs("j", l) {
		t.Error("after a replacement: WrittenHereAs, want not")
	}
	// Gone while released: Relock says so.
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(mf); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Relock("j", l); !errors.Is(err, ErrNotFound) {
		t.Errorf("Relock of a job without job.json: %v, want ErrNotFound", err)
	}
}
