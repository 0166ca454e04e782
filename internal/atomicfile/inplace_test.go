package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// countTruncates counts writeAt's truncates during write.
func countTruncates(t *testing.T, write func()) int {
	t.Helper()
	n := 0
	truncate = func(f *os.File, size int64) error { n++; return f.Truncate(size) }
	defer func() { truncate = (*os.File).Truncate }()
	write()
	return n
}

// A manifest written in place that grows (every save of a running job's)
// is written, not truncated as well; one that shrinks is cut.
func TestWriteInPlaceTruncatesOnlyToShrink(t *testing.T) {
	p := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(p, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		data string
		cuts int
	}{{`{"a": "longer"}` + "\n", 0}, {`{"a": "same!!"}` + "\n", 0}, {"{}\n", 1}} {
		if n := countTruncates(t, func() {
			if err := WriteInPlace(p, []byte(c.data), 0o600, nil); err != nil {
				t.Fatal(err)
			}
		}); n != c.cuts {
			t.Errorf("writing %q in place: %d truncates, want %d", c.data, n, c.cuts)
		}
		if b, _ := os.ReadFile(p); string(b) != c.data {
			t.Errorf("content %q, want %q", b, c.data)
		}
	}
}

// A file that another writer lengthened after its size was taken is cut
// at the end of the data all the same.
func TestWriteAtCutsAFileLengthenedMeanwhile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(p, []byte("a tail someone appended after the size was read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()                                      //nolint:errcheck // checked by the read below
	fi, err := writeAt(f, p, []byte("data\n"), 0o600, 0) // the size as read before the append: 0
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "data\n" || fi.Size() != 5 {
		t.Errorf("content %q, size noted %d", b, fi.Size())
	}
}
