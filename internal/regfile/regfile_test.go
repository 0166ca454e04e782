package regfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestReadFileSizes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, n := range []int{0, 1, 511, 512, 513, 4096, 1 << 20} {
		p := filepath.Join(dir, "f")
		want := bytes.Repeat([]byte("x"), n)
		if err := os.WriteFile(p, want, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("size %d: got %d bytes, err %v", n, len(got), err)
		}
	}
}

// Files in /proc report size 0 but have content.
func TestReadFileOfUnknownSize(t *testing.T) {
	got, err := ReadFile("/proc/self/stat")
	if err != nil || !strings.Contains(string(got), ")") {
		t.Errorf("got %q, %v", got, err)
	}
}

func TestErrorsAreThoseOfPackageOS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := ReadFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile of a missing file: %v", err)
	}
	if _, err := OpenFile(filepath.Join(dir, "missing"), os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenFile of a missing file: %v", err)
	}
	if _, err := ReadFile(dir); err == nil {
		t.Error("ReadFile of a folder succeeded")
	}
	p := filepath.Join(dir, "f")
	if err := WriteFile(p, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); !errors.Is(err, fs.ErrExist) {
		t.Errorf("O_EXCL on an existing file: %v", err)
	}
}

func TestOpenFileWritesAndRename(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "a")
	f, err := OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("two\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	f.Close()
	if fi.Mode().Perm() != 0o640&^currentUmask(t) || fi.Size() != 8 {
		t.Errorf("mode %v size %d", fi.Mode(), fi.Size())
	}
	if err := Rename(p, filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b")); string(b) != "one\ntwo\n" {
		t.Errorf("renamed file holds %q", b)
	}
}

func currentUmask(t *testing.T) os.FileMode {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(p, nil, 0o777); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return 0o777 &^ fi.Mode().Perm()
}

// A FIFO (or a device) where a file is expected must be refused at once:
// open() of a FIFO with no writer blocks for ever (hostile input H96).
func TestNonRegularFilesRefusedWithoutBlocking(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "job.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := ReadFile(fifo); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "named pipe") {
			t.Errorf("ReadFile of a FIFO: %v", err)
		}
		if _, err := OpenRegular(fifo); !errors.Is(err, ErrNotRegular) {
			t.Errorf("OpenRegular of a FIFO: %v", err)
		}
		if _, err := ReadLimited(fifo, 10); !errors.Is(err, ErrNotRegular) {
			t.Errorf("ReadLimited of a FIFO: %v", err)
		}
		if _, err := ReadFile("/dev/null"); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "character device") {
			t.Errorf("ReadFile of /dev/null: %v", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadLimited(p, 3); err != nil || string(b) != "abcd" {
		t.Errorf("ReadLimited: %q, %v", b, err)
	}
}

// ReadLimited sizes its buffer from the file's size (one read, then one
// to see the end) and still stops at limit+1 bytes, whatever the size.
func TestReadLimitedSizes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := strings.Repeat("x", 100<<10)
	for _, c := range []struct {
		size  int
		limit int64
		want  int
	}{{0, 10, 0}, {5, 10, 5}, {10, 10, 10}, {11, 10, 11}, {len(big), 10, 11}, {len(big), int64(len(big)), len(big)}, {len(big), 1 << 20, len(big)}} {
		p := filepath.Join(dir, strconv.Itoa(c.size))
		if err := os.WriteFile(p, []byte(big[:c.size]), 0o600); err != nil {
			t.Fatal(err)
		}
		if b, err := ReadLimited(p, c.limit); err != nil || len(b) != c.want || string(b) != big[:c.want] {
			t.Errorf("ReadLimited of %d bytes, limit %d: %d bytes, %v; want %d", c.size, c.limit, len(b), err, c.want)
		}
		if b, err := ReadFile(p); err != nil || len(b) != c.size {
			t.Errorf("ReadFile of %d bytes: %d, %v", c.size, len(b), err)
		}
	}
}

// A file read and closed here keeps its O_NONBLOCK (it does nothing to a
// regular file's reads): two fcntl calls fewer per read. A file handed out
// as an *os.File is made blocking, as os.NewFile expects.
func TestOnlyHandedOutFilesAreMadeBlocking(t *testing.T) {
	calls := 0
	was := clearNonblock
	clearNonblock = func(fd int) error { calls++; return was(fd) }
	t.Cleanup(func() { clearNonblock = was })
	p := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(p, []byte("abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(p); err != nil || string(b) != "abcdef" {
		t.Fatalf("ReadFile: %q, %v", b, err)
	}
	if b, err := ReadLimited(p, 3); err != nil || string(b) != "abcd" {
		t.Fatalf("ReadLimited: %q, %v", b, err)
	}
	if b, _, err := ReadLimitedStat(p, 10); err != nil || string(b) != "abcdef" {
		t.Fatalf("ReadLimitedStat: %q, %v", b, err)
	}
	if calls != 0 {
		t.Errorf("reads cleared O_NONBLOCK %d times, want 0", calls)
	}
	f, err := OpenRegular(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fl, err := unix.FcntlInt(f.Fd(), syscall.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || fl&syscall.O_NONBLOCK != 0 {
		t.Errorf("OpenRegular: %d clears, flags %#x: want one clear and a blocking file", calls, fl)
	}
}

// CopyNew copies a regular file into a file it makes; it never writes into
// one already there (nor through a link), and refuses a named pipe unread.
func TestCopyNew(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	body := strings.Repeat("copy ", 100_000)
	if err := os.WriteFile(src, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CopyNew(src, dst, 0o640); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); string(b) != body {
		t.Errorf("copied %d bytes, want %d", len(b), len(body))
	}
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if err := CopyNew(src, link, 0o640); err == nil {
		t.Error("copied through a link")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Error("the link's target was written")
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CopyNew(fifo, filepath.Join(dir, "out"), 0o640); !errors.Is(err, ErrNotRegular) {
		t.Errorf("named pipe: %v, want ErrNotRegular", err)
	}
}

// OpenFileHere never follows a symlink (a dangling one is not created
// through), never blocks on a FIFO, and refuses a folder, naming each.
func TestOpenFileHere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "target")
	mk := map[string]func(p string) error{
		"a symlink":           func(p string) error { return os.Symlink(outside, p) },
		"a named pipe (FIFO)": func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"a folder":            func(p string) error { return os.Mkdir(p, 0o700) },
	}
	for kind, plant := range mk {
		p := filepath.Join(dir, strings.Fields(kind)[1])
		if err := plant(p); err != nil {
			t.Fatal(err)
		}
		for _, flag := range []int{os.O_RDONLY, os.O_RDWR | os.O_CREATE | os.O_APPEND} {
			f, err := OpenFileHere(p, flag, 0o600)
			if err == nil {
				_ = f.Close()
			}
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "it is "+kind) {
				t.Errorf("%s, flags %#x: %v", kind, flag, err)
			}
		}
	}
	if _, err := os.Lstat(outside); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link's target was made: %v", err)
	}
	p := filepath.Join(dir, "new")
	f, err := OpenFileHere(p, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("x"); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if b, err := os.ReadFile(p); err != nil || string(b) != "x" {
		t.Errorf("a regular file: %q, %v", b, err)
	}
	if _, err := OpenFileHere(filepath.Join(dir, "none"), os.O_RDONLY, 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}
