package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteFileCreatesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "job.json")
	if err := WriteFile(p, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "first" {
		t.Fatalf("content %q", b)
	}
	if err := WriteFile(p, []byte("second, longer content"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "second, longer content" {
		t.Fatalf("content %q", b)
	}
	// Shorter content leaves no trace of the old one.
	if err := WriteFile(p, []byte("3"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "3" {
		t.Fatalf("content %q", b)
	}
	if err := WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); len(b) != 0 {
		t.Fatalf("content %q after empty write", b)
	}
	if names := listDir(t, dir); len(names) != 1 || names[0] != "job.json" {
		t.Errorf("directory holds %v, want only job.json (no temp files)", names)
	}
}

func TestWriteFilePerm(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	// An existing file with wider permissions is replaced with perm.
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("perm %v, want 0600", fi.Mode().Perm())
	}
	// perm is applied exactly (not filtered by the umask).
	if err := WriteFile(p, []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
		t.Errorf("perm %v, want 0640", fi.Mode().Perm())
	}
}

func TestWriteFileReplacesSymlinkNotTarget(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("target"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Skip(err)
	}
	if err := WriteFile(link, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "target" {
		t.Errorf("symlink target changed to %q", b)
	}
	fi, err := os.Lstat(link)
	if err != nil || fi.Mode()&os.ModeSymlink != 0 {
		t.Errorf("link is still a symlink: %v %v", fi.Mode(), err)
	}
}

func TestWriteFileErrors(t *testing.T) {
	dir := t.TempDir()
	// Missing directory.
	err := WriteFile(filepath.Join(dir, "no", "such", "f"), []byte("x"), 0o600)
	if err == nil || !strings.Contains(err.Error(), "create temp") {
		t.Errorf("missing dir: %v", err)
	}
	// Target is a directory: the rename fails and the temp file is removed.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "keep"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err = WriteFile(sub, []byte("x"), 0o600)
	if err == nil || !strings.Contains(err.Error(), "rename") {
		t.Errorf("rename over a non-empty dir: %v", err)
	}
	for _, n := range listDir(t, dir) {
		if strings.Contains(n, ".tmp-") {
			t.Errorf("temp file %s left behind", n)
		}
	}
}

func TestWriteFileConcurrentReadersSeeWholeContent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	a := bytes.Repeat([]byte("a"), 64<<10)
	b := bytes.Repeat([]byte("b"), 64<<10)
	if err := WriteFile(p, a, 0o600); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			data := a
			if i%2 == 0 {
				data = b
			}
			if err := WriteFile(p, data, 0o600); err != nil {
				t.Error(err)
				return
			}
		}
		close(stop)
	}()
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		default:
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
			t.Fatalf("reader saw a mix of %d bytes", len(got))
		}
	}
	wg.Wait()
	if names := listDir(t, dir); len(names) != 1 {
		t.Errorf("directory holds %v", names)
	}
}

func TestMkdirAll(t *testing.T) {
	base := t.TempDir()
	deep := filepath.Join(base, "a", "b", "c")
	if err := MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a", "a/b", "a/b/c"} {
		fi, err := os.Stat(filepath.Join(base, d))
		if err != nil || !fi.IsDir() {
			t.Errorf("%s: %v", d, err)
		}
	}
	// Existing directory: no error, nothing changes.
	if err := MkdirAll(deep, 0o755); err != nil {
		t.Errorf("existing dir: %v", err)
	}
	if err := MkdirAll(base, 0o755); err != nil {
		t.Errorf("existing base: %v", err)
	}
	// A file in the way is an error, also for a path below it.
	f := filepath.Join(base, "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(f, 0o755); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file in the way: %v", err)
	}
	if err := MkdirAll(filepath.Join(f, "below"), 0o755); err == nil {
		t.Error("MkdirAll below a file succeeded")
	}
	// perm applies (through the umask) to the directories created.
	p := filepath.Join(base, "private")
	if err := MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o700 {
		t.Errorf("perm %v, want 0700", fi.Mode().Perm())
	}
}

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Errorf("SyncDir: %v", err)
	}
	if err := SyncDir(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("SyncDir of a missing dir succeeded")
	}
}

// The file WriteFileNoting reports before the rename is the file that then
// stands at path, with the same size and mtime: a watcher that hears of
// the rename can already tell the writer's own file (jobstore.WrittenHere).
func TestWriteFileNotingReportsTheFileBeforeItIsVisible(t *testing.T) {
	p := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	var noted os.FileInfo
	err := WriteFileNoting(p, []byte("new content"), 0o600, func(fi os.FileInfo) {
		noted = fi
		if b, _ := os.ReadFile(p); string(b) != "old" {
			t.Errorf("new content visible before the note: %q", b)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if noted == nil || !os.SameFile(noted, got) || noted.Size() != got.Size() || !noted.ModTime().Equal(got.ModTime()) {
		t.Errorf("noted %+v, file at path %+v", noted, got)
	}
}

// WriteInPlace keeps the file (no new inode), replaces all of its content
// whether the new one is longer or shorter, tightens its mode, and creates
// the file when there is none.
func TestWriteInPlace(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.json")
	if err := os.WriteFile(p, []byte("a much longer old content\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(p)
	var noted os.FileInfo
	if err := WriteInPlace(p, []byte("short\n"), 0o600, func(fi os.FileInfo) { noted = fi }); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(p)
	if b, _ := os.ReadFile(p); string(b) != "short\n" {
		t.Errorf("content %q", b)
	}
	if !os.SameFile(before, after) {
		t.Error("a new file replaced the old one")
	}
	if after.Mode().Perm() != 0o600 || noted == nil || noted.Size() != 6 || noted.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, noted %v", after.Mode(), noted)
	}
	if err := WriteInPlace(p, []byte("longer than before\n"), 0o600, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "longer than before\n" {
		t.Errorf("content %q", b)
	}
	q := filepath.Join(dir, "new.json")
	if err := WriteInPlace(q, []byte("x"), 0o600, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(q); string(b) != "x" {
		t.Errorf("new file holds %q", b)
	}
}

// A manifest hard-linked to a file elsewhere, or replaced by a symlink,
// is replaced, never written through: the other file keeps its content.
func TestWriteInPlaceNeverWritesThroughALink(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside")
	if err := os.WriteFile(outside, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"hard", "sym"} {
		p := filepath.Join(dir, kind+".json")
		var err error
		if kind == "hard" {
			err = os.Link(outside, p)
		} else {
			err = os.Symlink(outside, p)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteInPlace(p, []byte("{}\n"), 0o600, nil); err != nil {
			t.Fatalf("%s link: %v", kind, err)
		}
		if b, _ := os.ReadFile(outside); string(b) != "precious\n" {
			t.Fatalf("%s link: the linked file became %q", kind, b)
		}
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s link: %s is not a regular file now: %v", kind, p, err)
		}
		if b, _ := os.ReadFile(p); string(b) != "{}\n" {
			t.Errorf("%s link: %s holds %q", kind, p, b)
		}
	}
}

// WriteFrom replaces a file with what a reader yields, as WriteFile does
// (fsync'd, renamed, the folder fsync'd): a link at the name is replaced,
// its target untouched.
func TestWriteFromReplacesWhatIsThere(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "f")
	if err := os.Symlink(victim, p); err != nil {
		t.Fatal(err)
	}
	files, dirs := FileSyncs.Load(), DirSyncs.Load()
	body := strings.Repeat("streamed ", 200_000)
	if err := WriteFrom(p, strings.NewReader(body), 0o640); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 {
		t.Fatalf("%s: %v %v, want a regular file of mode 0640", p, fi, err)
	}
	if b, _ := os.ReadFile(p); string(b) != body {
		t.Errorf("wrote %d bytes, want %d", len(b), len(body))
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Error("the link's target was written")
	}
	if FileSyncs.Load() == files || DirSyncs.Load() == dirs {
		t.Error("the file or its folder was not fsync'd")
	}
}
