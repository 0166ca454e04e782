package history

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A history cut at a record boundary, or emptied, is a valid chain: only
// its head shows it lost committed records (issue 18, item 3). Open
// refuses it with ErrMissing and leaves every file as it was.
func TestCutHistoryRefusedByItsHead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cut  func(data []byte) []byte
		want string
	}{
		{"last record gone", func(d []byte) []byte { return d[:bytes.LastIndexByte(d[:len(d)-1], '\n')+1] }, "ends at record 2, but its head says it held records up to 3"},
		{"half the log gone", func(d []byte) []byte { return d[:bytes.IndexByte(d, '\n')+1] }, "ends at record 0"},
		{"emptied", func([]byte) []byte { return nil }, "is empty, but its head says it held records up to 3"},
		{"last record damaged", func(d []byte) []byte {
			// A complete last line that no longer parses: not a torn
			// write (the head covers it), so it is not cut off.
			i := bytes.LastIndexByte(d[:len(d)-1], '\n') + 1
			return append(append([]byte(nil), d[:i]...), []byte(strings.Repeat("X", len(d)-i-1)+"\n")...)
		}, "ends at record 2"},
		{"last record torn", func(d []byte) []byte { return d[:len(d)-7] }, "ends at record 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			l := open(t, dir)
			appendAll(t, l, intent(0, "worker"), response(0, "worker", "COMPLETED"), intent(1, "supervisor"), response(1, "supervisor", "COMPLETED"))
			l.Close()
			data, _ := os.ReadFile(historyPath(dir))
			cut := tc.cut(data)
			if err := os.WriteFile(historyPath(dir), cut, 0o600); err != nil {
				t.Fatal(err)
			}
			head, _ := os.ReadFile(filepath.Join(dir, HeadFile))
			_, _, err := Open(dir)
			var me *MissingError
			if !errors.Is(err, ErrMissing) || !errors.As(err, &me) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want ErrMissing saying %q", err, tc.want)
			}
			if after, _ := os.ReadFile(historyPath(dir)); !bytes.Equal(after, cut) {
				t.Error("the refused history was changed")
			}
			if after, _ := os.ReadFile(filepath.Join(dir, HeadFile)); !bytes.Equal(after, head) {
				t.Error("the head was changed")
			}
		})
	}
}

// A log may be ahead of its head (a crash between the records' fsync and
// the head's write), never behind; a head naming another record at the
// log's end is refused; a garbage head is corrupt, never taken for none.
func TestCheckHead(t *testing.T) {
	t.Parallel()
	h := &Head{Seq: 5, Hash: "aa"}
	for _, tc := range []struct {
		seq  int64
		hash string
		ok   bool
	}{{5, "aa", true}, {6, "bb", true}, {4, "aa", false}, {-1, "", false}, {5, "bb", false}} {
		if err := CheckHead("p", h, tc.seq, tc.hash); (err == nil) != tc.ok {
			t.Errorf("log ending at %d %s: %v", tc.seq, tc.hash, err)
		}
	}
	if err := CheckHead("p", nil, -1, ""); err != nil {
		t.Errorf("no head: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, HeadFile), []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("Open with a garbage head: %v", err)
	}
}

// A head file a crash left empty (killed between its creation and its
// first write: the crash suite found it) is no head: the history opens
// and its next append writes the head.
func TestEmptyHeadIsNoHead(t *testing.T) {
	t.Parallel()
	for name, content := range map[string]string{"empty": "", "zeros": "\x00\x00\x00\x00"} {
		dir := t.TempDir()
		l := open(t, dir)
		appendAll(t, l, intent(0, "worker"))
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, HeadFile), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if h, err := ReadHead(dir); err != nil || h != nil {
			t.Errorf("%s head: %v, %v; want none", name, h, err)
		}
		l = open(t, dir)
		appendAll(t, l, intent(1, "worker"))
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if h, err := ReadHead(dir); err != nil || h == nil {
			t.Errorf("%s head: after an append %v, %v; want a head", name, h, err)
		}
	}
}

// Every append leaves the head at its last record; a shorter head written
// over a longer one still parses; another process's appends move it on.
func TestHeadFollowsAppends(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := open(t, dir)
	for i := range 12 {
		appendAll(t, l, intent(i, "worker"))
		h, err := ReadHead(dir)
		if err != nil || h == nil || h.Seq != int64(i) || h.Hash != l.LastHash() {
			t.Fatalf("after append %d: head %+v, %v (log at %s)", i, h, err, l.LastHash())
		}
	}
	l.Close()
	l2 := open(t, dir)
	appendAll(t, l2, response(11, "worker", "COMPLETED"))
	l2.Close()
	if h, err := ReadHead(dir); err != nil || h.Seq != 12 {
		t.Fatalf("head %+v, %v", h, err)
	}
}
