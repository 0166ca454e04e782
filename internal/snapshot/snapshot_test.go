package snapshot

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// objects lists the snapshot objects (and leftover temporary files).
func objects(t *testing.T, jobDir string) []string {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(jobDir, Dir, "objects"))
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// Hostile input H105: a sparse 2 GiB file used to make the snapshot write
// 2 GiB of real data past its 1 GiB cap, and the over-cap object stayed.
// It is refused before any of it is copied, and what the failed snapshot
// had stored already goes.
func TestSparseFileOverTheCapIsRefusedBeforeCopying(t *testing.T) {
	t.Parallel()
	ws, job := t.TempDir(), t.TempDir()
	write(t, filepath.Join(ws, "a.txt"), "new content, stored first")
	f, err := os.Create(filepath.Join(ws, "b.img"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	start := time.Now()
	_, err = Take(ws, job, "cp-1")
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "b.img is 2147483648 bytes") {
		t.Fatalf("Take: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusing took %s: the file was read", d)
	}
	if objs := objects(t, job); len(objs) != 0 {
		t.Errorf("the failed snapshot left objects %v", objs)
	}
	if _, err := os.Stat(listingPath(job, "cp-1")); err == nil {
		t.Error("the failed snapshot left a listing")
	}
}

// A job's own cap (limits.max_snapshot_bytes) counts new content only:
// content stored by an earlier snapshot passes whatever its size.
func TestPerJobCapCountsNewContent(t *testing.T) {
	t.Parallel()
	ws, job := t.TempDir(), t.TempDir()
	write(t, filepath.Join(ws, "big"), strings.Repeat("x", 3000))
	if _, err := TakeWith(ws, job, "cp-1", Options{MaxBytes: 1000}); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "cap of 1000 bytes") {
		t.Fatalf("over a cap of 1000: %v", err)
	}
	if _, err := TakeWith(ws, job, "cp-1", Options{MaxBytes: 4000}); err != nil {
		t.Fatal(err)
	}
	info, err := TakeWith(ws, job, "cp-2", Options{MaxBytes: 1000})
	if err != nil || info.New != 0 || info.Bytes != 3000 {
		t.Fatalf("unchanged content under a small cap: %+v, %v", info, err)
	}
}

// A sparse file within the cap is stored sparse, and restores whole.
func TestSparseFileStaysSparse(t *testing.T) {
	t.Parallel()
	ws, job := t.TempDir(), t.TempDir()
	p := filepath.Join(ws, "s.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("head"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("tail"), 64<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	info, err := Take(ws, job, "cp-1")
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(job, Dir, "objects", info.Entries[0].SHA256), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 64<<20+4 || st.Blocks*512 > 4<<20 {
		t.Errorf("object of %d bytes uses %d bytes on disk: not sparse", st.Size, st.Blocks*512)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := Restore(ws, job, "cp-1"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || len(b) != 64<<20+4 || string(b[:4]) != "head" || string(b[64<<20:]) != "tail" {
		t.Errorf("restored %d bytes, %v", len(b), err)
	}
}

// Hostile input H107: objects no listing names (a crash between an
// object's copy and its listing, a copy cut short) are pruned; every
// listed object stays.
func TestPruneRemovesOnlyUnlistedObjects(t *testing.T) {
	t.Parallel()
	ws, job := t.TempDir(), t.TempDir()
	write(t, filepath.Join(ws, "a.txt"), "kept")
	info, err := Take(ws, job, "cp-1")
	if err != nil {
		t.Fatal(err)
	}
	objDir := filepath.Join(job, Dir, "objects")
	write(t, filepath.Join(objDir, strings.Repeat("0", 64)), "orphan object")
	write(t, filepath.Join(objDir, ".obj-123"), "half a copy")
	files, bytes, err := Prune(job)
	if err != nil || files != 2 || bytes != int64(len("orphan object")+len("half a copy")) {
		t.Fatalf("Prune: %d files, %d bytes, %v", files, bytes, err)
	}
	if objs := objects(t, job); len(objs) != 1 || objs[0] != info.Entries[0].SHA256 {
		t.Errorf("objects left %v", objs)
	}
	if err := Restore(ws, job, "cp-1"); err != nil {
		t.Errorf("restore after prune: %v", err)
	}
}

// H151: names that are not valid UTF-8 (a file, a folder, a symlink and
// its target) come back under their own bytes at a restore; the listing
// used to store U+FFFD for each bad byte, and a rollback brought the file
// back under another name. Valid names are stored as before (no
// path_bytes), which older readers take as they did.
func TestNamesThatAreNotUTF8SurviveARestore(t *testing.T) {
	t.Parallel()
	job := t.TempDir()
	ws := filepath.Join(job, "workspace")
	bad, dir, link, target := "bad\xff\xfe.txt", "d\xc3", "ln\xfe", "t\xff"
	write(t, filepath.Join(ws, bad), "bad")
	write(t, filepath.Join(ws, dir, "in.txt"), "in")
	write(t, filepath.Join(ws, "ok.txt"), "ok")
	if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
		t.Fatal(err)
	}
	if _, err := Take(ws, job, "cp-1"); err != nil {
		t.Fatal(err)
	}
	raw := read(t, listingPath(job, "cp-1"))
	if strings.Count(raw, "path_bytes") != 4 || strings.Count(raw, "link_bytes") != 1 {
		t.Errorf("listing does not keep the names whole:\n%s", raw)
	}
	l, err := Load(job, "cp-1")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range l.Entries {
		paths = append(paths, e.Path)
	}
	want := []string{bad, dir, dir + "/in.txt", link, "ok.txt"}
	if strings.Join(paths, "|") != strings.Join(want, "|") {
		t.Errorf("loaded paths %q, want %q", paths, want)
	}

	if err := os.RemoveAll(ws); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "later.txt"), "later")
	if err := Restore(ws, job, "cp-1"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(ws, bad)); got != "bad" {
		t.Errorf("%q holds %q", bad, got)
	}
	if got := read(t, filepath.Join(ws, dir, "in.txt")); got != "in" {
		t.Errorf("in.txt holds %q", got)
	}
	if got, err := os.Readlink(filepath.Join(ws, link)); err != nil || got != target {
		t.Errorf("link points to %q (%v), want %q", got, err, target)
	}
	ents, _ := os.ReadDir(ws)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, "|") != strings.Join([]string{bad, dir, link, "ok.txt"}, "|") {
		t.Errorf("workspace holds %q after the restore", names)
	}
}
