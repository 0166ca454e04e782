package snapshot

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func show(c Changes) string { return fmt.Sprintf("+%v ~%v -%v", c.Added, c.Modified, c.Deleted) }

// change edits a workspace the same way for both comparisons: a file
// added, one rewritten with the same size, one with another mode, one
// removed, a symlink retargeted, a file turned into a folder, a new empty
// folder, and .git touched.
func change(t *testing.T, ws string) {
	t.Helper()
	write(t, filepath.Join(ws, "new.txt"), "new")
	write(t, filepath.Join(ws, "same-size.txt"), "BBB")
	if err := os.Chmod(filepath.Join(ws, "mode.txt"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ws, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("same-size.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ws, "was-file")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "was-file", "inside.txt"), "x")
	if err := os.MkdirAll(filepath.Join(ws, "empty-dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, ".git", "HEAD"), "ref: other")
}

func seed(t *testing.T, ws string) {
	t.Helper()
	for _, f := range []string{"same-size.txt", "mode.txt", "gone.txt", "was-file", "kept/k.txt"} {
		write(t, filepath.Join(ws, f), "AAA")
	}
	if err := os.Symlink("mode.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, ".git", "HEAD"), "ref: main")
}

const wantChanges = "+[new.txt was-file/inside.txt] ~[link mode.txt same-size.txt] -[gone.txt was-file]"

// Issue 17 item 7: two snapshots' listings compare by content; folders
// and .git are not listed.
func TestDiffListings(t *testing.T) {
	job := t.TempDir()
	ws := filepath.Join(job, "workspace")
	seed(t, ws)
	a, err := Take(ws, job, "cp-a")
	if err != nil {
		t.Fatal(err)
	}
	change(t, ws)
	b, err := Take(ws, job, "cp-b")
	if err != nil {
		t.Fatal(err)
	}
	if got := show(Diff(a.Entries, b.Entries)); got != wantChanges {
		t.Errorf("Diff = %s\nwant   %s", got, wantChanges)
	}
	// As read back from the listing, and from an empty workspace.
	was, err := Entries(job, "cp-a", a.Listing)
	if err != nil {
		t.Fatal(err)
	}
	if got := show(Diff(was, b.Entries)); got != wantChanges {
		t.Errorf("Diff from the stored listing = %s", got)
	}
	none, err := Entries(job, "cp-empty", "")
	if err != nil || len(none) != 0 {
		t.Fatalf("empty listing: %v %v", none, err)
	}
	if got := show(Diff(none, a.Entries)); got != "+[gone.txt kept/k.txt link mode.txt same-size.txt was-file] ~[] -[]" {
		t.Errorf("from empty: %s", got)
	}
}

// A scan before and after sees the same changes without reading a file
// (the same-size rewrite is seen by its timestamps and inode data).
func TestScanChanged(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "workspace")
	seed(t, ws)
	before, err := Scan(ws)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // past the file system's timestamp granularity
	change(t, ws)
	after, err := Scan(ws)
	if err != nil {
		t.Fatal(err)
	}
	if got := show(Changed(before, after)); got != wantChanges {
		t.Errorf("Changed = %s\nwant      %s", got, wantChanges)
	}
	if again, _ := Scan(ws); !Changed(after, again).Empty() {
		t.Errorf("an untouched workspace changed: %s", show(Changed(after, again)))
	}
	// A missing workspace has no paths.
	if s, err := Scan(filepath.Join(ws, "nope")); err != nil || len(s) != 0 {
		t.Errorf("missing workspace: %v %v", s, err)
	}
}

// A snapshot's walk says what Scan says of the workspace, path for path
// and stat for stat (a FIFO included, which the listing leaves out): the
// engine takes it as the next call's scan (runner, changes.go).
func TestTakeSeesWhatScanSees(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "workspace")
	seed(t, ws)
	if err := syscall.Mkfifo(filepath.Join(ws, "kept", "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	info, err := Take(ws, t.TempDir(), "cp-start")
	if err != nil {
		t.Fatal(err)
	}
	scan, err := Scan(ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(scan) != 8 || !maps.Equal(info.Stats, scan) {
		t.Errorf("the snapshot's stats\n%v\nScan's (8 paths)\n%v", info.Stats, scan)
	}
	time.Sleep(20 * time.Millisecond) // past the file system's timestamp granularity
	change(t, ws)
	after, err := Scan(ws)
	if err != nil {
		t.Fatal(err)
	}
	if got := show(Changed(info.Stats, after)); got != wantChanges {
		t.Errorf("Changed from the snapshot's stats = %s\nwant %s", got, wantChanges)
	}
}

func TestNotUnder(t *testing.T) {
	c := Changes{Added: []string{"a.txt", "dir/b.txt", "dirx/c.txt"}, Modified: []string{"src/x/y.go"}, Deleted: []string{"old.txt"}}
	for _, tc := range []struct {
		evidence []string
		want     string
	}{
		{nil, show(c)},
		{[]string{"./a.txt", "dir/", "src"}, "+[dirx/c.txt] ~[] -[old.txt]"},
		{[]string{"old.txt", "dirx/c.txt", "a.txt", "dir", "src/x/y.go"}, "+[] ~[] -[]"},
		{[]string{"."}, "+[] ~[] -[]"},
		{[]string{""}, show(c)},
	} {
		if got := show(c.NotUnder(tc.evidence)); got != tc.want {
			t.Errorf("NotUnder(%q) = %s, want %s", tc.evidence, got, tc.want)
		}
	}
	if p := fmt.Sprint(c.Paths()); p != "[a.txt dir/b.txt dirx/c.txt old.txt src/x/y.go]" {
		t.Errorf("Paths = %s", p)
	}
}

// BenchmarkScanChanged1000 is what each agent call pays for its change
// list: a scan of a 1,000-file workspace before the call and one after,
// and their comparison.
func BenchmarkScanChanged1000(b *testing.B) {
	ws := filepath.Join(b.TempDir(), "workspace")
	for i := range 1000 {
		p := filepath.Join(ws, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%04d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("some content of a file\n"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		before, err := Scan(ws)
		if err != nil {
			b.Fatal(err)
		}
		after, err := Scan(ws)
		if err != nil {
			b.Fatal(err)
		}
		if !Changed(before, after).Empty() {
			b.Fatal("changed")
		}
	}
}
