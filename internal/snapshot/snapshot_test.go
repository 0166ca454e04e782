package snapshot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTakeAndRestore(t *testing.T) {
	t.Parallel()
	job := t.TempDir()
	ws := filepath.Join(job, "workspace")
	write(t, filepath.Join(ws, "a.txt"), "one")
	write(t, filepath.Join(ws, "dir", "b.txt"), "two")
	if err := os.Symlink("a.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, ".git", "HEAD"), "ref: main")
	info, err := Take(ws, job, "cp-1")
	if err != nil {
		t.Fatal(err)
	}
	if info.Files != 2 || info.Bytes != 6 || info.New != 6 {
		t.Fatalf("info %+v", info)
	}
	// Same content again: nothing new is stored.
	info2, err := Take(ws, job, "cp-2")
	if err != nil || info2.New != 0 {
		t.Fatalf("second snapshot %+v %v", info2, err)
	}

	// The agent edits in place, adds, deletes, replaces a dir by a file and
	// points the link elsewhere; the user commits to .git.
	write(t, filepath.Join(ws, "a.txt"), "changed")
	write(t, filepath.Join(ws, "new.txt"), "new")
	if err := os.RemoveAll(filepath.Join(ws, "dir")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "dir"), "now a file")
	if err := os.Remove(filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, ".git", "HEAD"), "ref: feature")

	if err := Restore(ws, job, "cp-1"); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(ws, "a.txt")) != "one" || read(t, filepath.Join(ws, "dir", "b.txt")) != "two" {
		t.Error("content not restored")
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); !os.IsNotExist(err) {
		t.Error("a file created after the checkpoint survived")
	}
	if target, _ := os.Readlink(filepath.Join(ws, "link")); target != "a.txt" {
		t.Errorf("link -> %q", target)
	}
	if read(t, filepath.Join(ws, ".git", "HEAD")) != "ref: feature" {
		t.Error(".git was touched")
	}
	// Snapshots are copies: editing the workspace did not change cp-1.
	if err := Restore(ws, job, "cp-2"); err != nil || read(t, filepath.Join(ws, "a.txt")) != "one" {
		t.Fatalf("cp-2: %v", err)
	}
}

func TestRestoreRefusesDamagedSnapshotWithoutChanges(t *testing.T) {
	t.Parallel()
	job := t.TempDir()
	ws := filepath.Join(job, "workspace")
	write(t, filepath.Join(ws, "a.txt"), "one")
	if _, err := Take(ws, job, "cp-1"); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "a.txt"), "later")
	write(t, filepath.Join(ws, "b.txt"), "later too")
	objs, _ := filepath.Glob(filepath.Join(job, Dir, "objects", "*"))
	for _, o := range objs {
		if err := os.WriteFile(o, []byte("bit rot"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	err := Restore(ws, job, "cp-1")
	if err == nil || !strings.Contains(err.Error(), "does not match its hash") {
		t.Fatalf("err = %v", err)
	}
	if read(t, filepath.Join(ws, "a.txt")) != "later" || read(t, filepath.Join(ws, "b.txt")) != "later too" {
		t.Error("a failed restore changed the workspace")
	}
	if err := Restore(ws, job, "cp-none"); err == nil {
		t.Error("restore of a missing snapshot succeeded")
	}
}

func TestRestoreRefusesListingThatEscapes(t *testing.T) {
	t.Parallel()
	job := t.TempDir()
	ws := filepath.Join(job, "workspace")
	if err := os.MkdirAll(filepath.Join(job, Dir), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(job, Dir, "cp-x.json"), `{"checkpoint_id":"cp-x","entries":[{"path":"../../evil","mode":420,"sha256":"00"}]}`)
	if err := Restore(ws, job, "cp-x"); err == nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Fatalf("err = %v", err)
	}
}

func TestEmptyWorkspaceHasNoListingAndRestoresToEmpty(t *testing.T) {
	t.Parallel()
	ws, job := filepath.Join(t.TempDir(), "ws"), t.TempDir()
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	info, err := Take(ws, job, "cp-start")
	if err != nil {
		t.Fatal(err)
	}
	if info.Listing != "" || info.Files != 0 {
		t.Fatalf("info = %+v, want no listing", info)
	}
	if _, err := os.Stat(filepath.Join(job, Dir)); !os.IsNotExist(err) {
		t.Fatalf("snapshots folder made for an empty workspace: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "sub", "f.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RestoreRef(ws, job, "cp-start", info.Listing); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(ws); err != nil || len(ents) != 0 {
		t.Fatalf("workspace after restore: %v, %v; want empty", ents, err)
	}
	// A record naming a listing still needs the file.
	if err := RestoreRef(ws, job, "cp-start", "snapshots/cp-start.json"); err == nil {
		t.Fatal("restore from a missing listing succeeded")
	}
}
