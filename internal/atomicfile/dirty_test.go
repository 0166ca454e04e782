package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Creates marked dirty in one folder share one folder fsync, and a folder
// fsync made for another reason settles the marks made before it.
func TestDeferredFolderSyncs(t *testing.T) {
	dir := t.TempDir()
	if err := MkdirDeferred(filepath.Join(dir, "a", "b"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := MkdirDeferred(filepath.Join(dir, "c"), 0o700); err != nil {
		t.Fatal(err)
	}
	n := DirSyncs.Load()
	if err := SyncDirIfDirty(dir); err != nil {
		t.Fatal(err)
	}
	if err := SyncDirIfDirty(dir); err != nil {
		t.Fatal(err)
	}
	if got := DirSyncs.Load() - n; got != 1 {
		t.Fatalf("two creates in %s then two SyncDirIfDirty: %d folder fsyncs, want 1", dir, got)
	}
	// a/b's entry in a is still unsettled.
	if err := SyncDirIfDirty(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if got := DirSyncs.Load() - n; got != 2 {
		t.Fatalf("folder fsyncs %d, want 2", got)
	}
	MarkDirty(dir)
	if err := WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	n = DirSyncs.Load()
	if err := SyncDirIfDirty(dir); err != nil {
		t.Fatal(err)
	}
	if got := DirSyncs.Load() - n; got != 0 {
		t.Fatalf("WriteFile's folder fsync did not settle the earlier mark: %d more", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "b")); err != nil {
		t.Fatal(err)
	}
}

// MkdirDeferred refuses a path that exists as a file.
func TestMkdirDeferredOverFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MkdirDeferred(p, 0o700); err == nil {
		t.Fatal("no error for a file in the way")
	}
}

// SyncDirtyStart fsyncs the dirty folders among those named, side by side,
// and leaves clean ones alone.
func TestSyncDirtyStart(t *testing.T) {
	root := t.TempDir()
	a, b, c := filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c")
	for _, d := range []string{a, b, c} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	MarkDirty(a)
	MarkDirty(b + "/") // the same folder however it is spelled
	n := DirSyncs.Load()
	if err := SyncDirtyStart(a, b, c)(); err != nil {
		t.Fatal(err)
	}
	if got := DirSyncs.Load() - n; got != 2 {
		t.Fatalf("two dirty folders and a clean one: %d folder fsyncs, want 2", got)
	}
	if Dirty(a) || Dirty(b) || Dirty(c) {
		t.Fatal("a folder is still dirty after its fsync")
	}
	if err := SyncDirtyStart(a, b, c)(); err != nil {
		t.Fatal(err)
	}
	if got := DirSyncs.Load() - n; got != 2 {
		t.Fatalf("nothing dirty: %d more folder fsyncs", got-2)
	}
	// A folder that is gone reports its error, and stays dirty.
	gone := filepath.Join(root, "gone")
	MarkDirty(gone)
	err := SyncDirtyStart(a, gone)()
	if err == nil || !strings.Contains(err.Error(), gone) {
		t.Fatalf("fsync of a missing folder: %v, want an error naming %s", err, gone)
	}
	if !Dirty(gone) {
		t.Fatal("a failed fsync settled the mark")
	}
}

// A SyncDirIfDirty joins an fsync of the same folder in flight when that
// fsync covers its change, and shares its result; a change made after the
// fsync began waits for a new one.
func TestDirtySyncJoinsFlight(t *testing.T) {
	dir := t.TempDir()
	entered := make(chan string, 4)
	// Each fsync waits for its own release: with two in flight, one shared
	// channel let the later fsync take the first one's result, and the
	// test then waited for ever (seen under load).
	release := [2]chan error{make(chan error), make(chan error)}
	var calls atomic.Int32
	fsyncDirHook = func(d string) error {
		n := calls.Add(1)
		entered <- d
		return <-release[n-1]
	}
	joins := make(chan struct{}, 4)
	joinHook = func() { joins <- struct{}{} }
	t.Cleanup(func() { fsyncDirHook, joinHook = fsyncDir, func() {} })

	MarkDirty(dir)
	first := make(chan error, 1)
	go func() { first <- SyncDirIfDirty(dir) }()
	<-entered
	joined := make(chan error, 1)
	go func() { joined <- SyncDirIfDirty(dir) }()
	// The joiner must join, not start an fsync of its own.
	select {
	case <-joins:
	case d := <-entered:
		t.Fatalf("a second fsync of %s started for a change the one in flight covers", d)
	}
	MarkDirty(dir) // after the fsync in flight began: it does not cover this
	later := make(chan error, 1)
	go func() { later <- SyncDirIfDirty(dir) }()
	select { // the later change gets its own fsync
	case <-entered:
	case <-joins:
		t.Fatal("a change made after the fsync in flight began joined it")
	}
	boom := errors.New("disk gone")
	release[0] <- boom // the first fsync fails
	if err := <-first; err != boom {
		t.Fatalf("first: %v", err)
	}
	if err := <-joined; err != boom {
		t.Fatalf("the joiner did not share the result of the fsync it joined: %v", err)
	}
	release[1] <- nil
	if err := <-later; err != nil {
		t.Fatal(err)
	}
	if got := calls.Load(); got != 2 {
		t.Fatalf("%d fsyncs, want 2", got)
	}
	if Dirty(dir) {
		t.Fatal("still dirty after the later fsync succeeded")
	}
}

// EntryDurable knows a folder's entry durable only when this process made
// it (MarkCreated) and an fsync of its parent that began after succeeded;
// it answers once.
func TestEntryDurable(t *testing.T) {
	parent := t.TempDir()
	a, b, c := filepath.Join(parent, "a"), filepath.Join(parent, "b"), filepath.Join(parent, "c")
	for _, d := range []string{a, b, c} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	MarkCreated(a)
	if !Dirty(parent) {
		t.Fatal("MarkCreated did not mark the parent dirty")
	}
	if EntryDurable(a) {
		t.Fatal("durable before any fsync of the parent")
	}
	MarkCreated(a)
	if err := SyncDirIfDirty(parent); err != nil {
		t.Fatal(err)
	}
	if !EntryDurable(a) {
		t.Fatal("not durable after an fsync of the parent")
	}
	if EntryDurable(a) {
		t.Fatal("answered twice")
	}
	if EntryDurable(c) {
		t.Fatal("a folder this process did not make is known durable")
	}

	// An fsync that began before the creation does not cover it; one that
	// fails covers nothing.
	entered, release := make(chan struct{}), make(chan error)
	fsyncDirHook = func(string) error { entered <- struct{}{}; return <-release }
	t.Cleanup(func() { fsyncDirHook = fsyncDir })
	done := make(chan error, 1)
	go func() { done <- SyncDir(parent) }()
	<-entered
	MarkCreated(b)
	release <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if EntryDurable(b) {
		t.Fatal("an fsync that began before the folder was made covered it")
	}
	MarkCreated(b)
	go func() { done <- SyncDirIfDirty(parent) }()
	<-entered
	release <- errors.New("disk gone")
	if err := <-done; err == nil {
		t.Fatal("no error")
	}
	if EntryDurable(b) {
		t.Fatal("a failed fsync covered the folder")
	}
}

// AfterSynced's callback is due once each of its folders has had a
// successful fsync that began after the call: not for one begun before,
// nor a failed one, nor for one folder of two.
func TestAfterSynced(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	ran := make(chan struct{}, 1)
	notYet := func(why string) {
		t.Helper()
		select {
		case <-ran:
			t.Fatal("callback ran " + why)
		case <-time.After(20 * time.Millisecond): // a due callback starts at once
		}
	}
	entered, release := make(chan struct{}), make(chan error)
	fsyncDirHook = func(string) error { entered <- struct{}{}; return <-release }
	t.Cleanup(func() { fsyncDirHook = fsyncDir })
	done := make(chan error, 1)
	go func() { done <- SyncDir(a) }()
	<-entered
	AfterSynced(func() { ran <- struct{}{} }, a, b)
	release <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	notYet("after an fsync that began before the call")
	go func() { done <- SyncDir(a) }()
	<-entered
	release <- errors.New("disk gone")
	if err := <-done; err == nil {
		t.Fatal("no error")
	}
	notYet("after a failed fsync")
	fsyncDirHook = fsyncDir
	if err := SyncDir(a); err != nil {
		t.Fatal(err)
	}
	notYet("after one folder of two")
	if err := SyncDir(b); err != nil {
		t.Fatal(err)
	}
	<-ran
	if err := SyncDir(b); err != nil {
		t.Fatal(err)
	}
	notYet("twice")
}

// A callback cancelled before it is due never runs, and nothing of it
// stays waiting (a placed job's folder removed before its fsync is never
// fsync'd again).
func TestAfterSyncedCancelled(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	var ran atomic.Bool
	cancel := AfterSynced(func() { ran.Store(true) }, a, b)
	cancel()
	dirty.Lock()
	left := len(dirty.waiting[filepath.Clean(a)]) + len(dirty.waiting[filepath.Clean(b)])
	dirty.Unlock()
	if left != 0 {
		t.Errorf("%d callbacks still wait after the cancel", left)
	}
	for _, d := range []string{a, b} {
		if err := SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	if ran.Load() {
		t.Error("a cancelled callback ran")
	}
}

// MkdirMissingDeferred makes a folder seen missing with its mkdir and
// marks the parent dirty; one another writer made meanwhile is taken
// (its parent marked too: its fsync is not trusted), a file in the way
// is refused, and missing parents are made as MkdirDeferred makes them.
func TestMkdirMissingDeferred(t *testing.T) {
	root := t.TempDir()
	for _, c := range []struct {
		name, dir string
		before    func(dir string) error
		ok        bool
	}{
		{"missing", "a", nil, true},
		{"made meanwhile", "b", func(d string) error { return os.Mkdir(d, 0o700) }, true},
		{"a file in the way", "c", func(d string) error { return os.WriteFile(d, nil, 0o600) }, false},
		{"parent missing", "d/e", nil, true},
	} {
		dir := filepath.Join(root, c.dir)
		if c.before != nil {
			if err := c.before(dir); err != nil {
				t.Fatal(err)
			}
		}
		if err := SyncDir(root); err != nil {
			t.Fatal(err)
		}
		err := MkdirMissingDeferred(dir, 0o700)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !c.ok {
			continue
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Errorf("%s: no folder: %v", c.name, err)
		}
		if !Dirty(filepath.Dir(dir)) {
			t.Errorf("%s: the parent is not marked dirty", c.name)
		}
	}
}

// A parent is forgotten once every entry noted in it has been asked about
// (a job folder, noted for its prepared history, is one per job), and an
// entry noted in it again is known durable only after a new fsync.
func TestEntryDurableForgetsParents(t *testing.T) {
	parent := t.TempDir()
	a, b := filepath.Join(parent, "a"), filepath.Join(parent, "b")
	makeDirs(t, a, b)
	MarkCreated(a)
	MarkCreated(b)
	if err := SyncDirIfDirty(parent); err != nil {
		t.Fatal(err)
	}
	known := func() bool {
		dirty.Lock()
		defer dirty.Unlock()
		_, p := dirty.parents[parent]
		_, c := dirty.children[parent]
		return p || c
	}
	if !EntryDurable(a) || !known() {
		t.Fatal("a not durable, or its parent forgotten while b is still noted there")
	}
	if !EntryDurable(b) {
		t.Fatal("b not durable")
	}
	if known() {
		t.Fatal("the parent is still kept with nothing noted in it")
	}
	MarkCreated(a)
	if EntryDurable(a) {
		t.Fatal("an entry noted again is durable by an fsync from before")
	}
}

func makeDirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

// An entry removed and made again after its note is not the one the
// parent's fsync covered: a job folder replaced while its job waited, its
// files made ahead (the new folder's entry, or its new history's, is
// settled by the start), even when the file system gives the new folder
// the old one's inode number.
func TestEntryDurableNotForAnEntryMadeAgain(t *testing.T) {
	parent := t.TempDir()
	dir, file := filepath.Join(parent, "job"), filepath.Join(parent, "history.jsonl")
	for _, again := range []bool{false, true} {
		makeDirs(t, dir)
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		MarkCreated(dir)
		MarkCreated(file)
		if err := SyncDirIfDirty(parent); err != nil {
			t.Fatal(err)
		}
		if again {
			for _, p := range []string{dir, file} {
				if err := os.RemoveAll(p); err != nil {
					t.Fatal(err)
				}
			}
			makeDirs(t, dir)
			if err := os.WriteFile(file, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if got := EntryDurable(dir); got != !again {
			t.Fatalf("made again: %v: folder's entry durable: %v", again, got)
		}
		if got := EntryDurable(file); got != !again {
			t.Fatalf("made again: %v: file's entry durable: %v", again, got)
		}
		for _, p := range []string{dir, file} {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Forget drops what was noted at and under a folder that left, with its
// parents' bookkeeping: a job folder removed before its start keeps
// nothing in memory.
func TestForgetDropsTheNotesUnderAFolder(t *testing.T) {
	parent := t.TempDir()
	job, other := filepath.Join(parent, "job"), filepath.Join(parent, "jobber")
	makeDirs(t, job, other)
	hist := filepath.Join(job, "history.jsonl")
	if err := os.WriteFile(hist, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{job, hist, other} {
		MarkCreated(p)
	}
	if err := SyncDirIfDirty(job); err != nil {
		t.Fatal(err)
	}
	if err := SyncDirIfDirty(parent); err != nil {
		t.Fatal(err)
	}
	Forget(job)
	dirty.Lock()
	_, j := dirty.created[job]
	_, h := dirty.created[hist]
	_, o := dirty.created[other]
	_, jp := dirty.parents[job]
	_, jc := dirty.children[job]
	dirty.Unlock()
	if j || h || jp || jc {
		t.Fatalf("kept after Forget: folder %v, its file %v, as a parent %v/%v", j, h, jp, jc)
	}
	if !o {
		t.Fatal("Forget dropped a sibling whose name begins with the folder's")
	}
	if EntryDurable(hist) || EntryDurable(job) {
		t.Fatal("a forgotten entry is known durable")
	}
	if !EntryDurable(other) {
		t.Fatal("the sibling's entry is no longer known durable")
	}
}
