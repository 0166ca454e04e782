package history

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A symlink, a FIFO or a folder planted where one of the history's own
// files is: opening the history refuses it (NotFileError) without
// following the link or blocking, and writes nothing anywhere. A dangling
// link at history.jsonl had the job's records written into a file made
// outside the job folder; a link to another job's history had both jobs
// append to one file; a FIFO blocked `logist status` for ever.
func TestHistoryFilesThatAreNotFilesAreRefused(t *testing.T) {
	t.Parallel()
	for _, name := range []string{FileName, HeadFile, IndexFile} {
		for _, kind := range []string{"dangling symlink", "symlink to a history", "fifo", "folder"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				outside := t.TempDir()
				job := filepath.Join(dir, "j")
				if err := os.Mkdir(job, 0o700); err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(job, name)
				target := filepath.Join(outside, name)
				var err error
				switch kind {
				case "dangling symlink":
					err = os.Symlink(target, p)
				case "symlink to a history":
					other := filepath.Join(dir, "other")
					if err := os.Mkdir(other, 0o700); err != nil {
						t.Fatal(err)
					}
					l := open(t, other)
					appendAll(t, l, intent(0, "worker"))
					l.Close()
					err = os.Symlink(filepath.Join(other, name), p)
					target = filepath.Join(other, name)
				case "fifo":
					err = syscall.Mkfifo(p, 0o600)
				case "folder":
					err = os.Mkdir(p, 0o700)
				}
				if err != nil {
					t.Fatal(err)
				}
				before, _ := os.ReadFile(target)
				done := make(chan error, 1)
				go func() {
					_, _, err := Open(job)
					if err == nil {
						_, _, err = ReadLast(job, 1)
					}
					done <- err
				}()
				select {
				case err = <-done:
				case <-time.After(5 * time.Second):
					t.Fatal("opening the history blocked")
				}
				var nf *NotFileError
				if !errors.As(err, &nf) || !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), name) {
					t.Fatalf("Open: %v, want a NotFileError naming %s", err, name)
				}
				after, _ := os.ReadFile(target)
				if string(after) != string(before) {
					t.Errorf("%s was written through the link: %q", target, after)
				}
				if kind == "fifo" {
					// A reader never blocks on it either.
					go func() { _, err := ReadAll(job); done <- err }()
					select {
					case err := <-done:
						if name == FileName && !strings.Contains(fmt.Sprint(err), "not a regular file") {
							t.Errorf("ReadAll: %v", err)
						}
					case <-time.After(5 * time.Second):
						t.Fatal("reading the history blocked")
					}
				}
			})
		}
	}
}

// readOwn reads the whole file, or its first limit bytes and one more,
// whatever the file's size against its first buffer (the file's fstat).
func TestReadOwnReadsToItsLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	for _, n := range []int{0, 1, 511, 512, 513, 4096, 100000} {
		data := bytes.Repeat([]byte("x"), n)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int64{-1, 0, 1, 511, 4095, 4096, 200000} {
			got, err := readOwn(p, limit)
			want := data
			if limit >= 0 && int64(len(want)) > limit+1 {
				want = want[:limit+1]
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%d bytes, limit %d: read %d, %v; want %d", n, limit, len(got), err, len(want))
			}
		}
	}
}
