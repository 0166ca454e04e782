package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
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
	os.WriteFile(p, nil, 0o600)
	if err := MkdirDeferred(p, 0o700); err == nil {
		t.Fatal("no error for a file in the way")
	}
}
