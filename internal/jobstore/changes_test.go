package jobstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// journalLines is the journal's lines after its header.
func journalLines(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < journalHeader {
		t.Fatalf("journal of %d bytes", len(b))
	}
	return string(b[journalHeader:])
}

// openHere counts this process's descriptors open on the file at p.
func openHere(t *testing.T, p string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && l == p {
			n++
		}
	}
	return n
}

// A Store with KeepJournalOpen (the daemon's) notes its changes through
// one descriptor kept open, follows the journal when an indexer replaces
// it, and makes none when it is gone: the rules of a note by an open each.
func TestJournalKeptOpen(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	s.KeepJournalOpen = true
	p := s.changesPath()
	s.NoteChanged("none") // no journal yet: nothing made
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("a note made the journal: %v", err)
	}
	s.openJournal().close() // a listing makes it
	s.NoteChanged("a")
	New(dir).NoteChanged("x") // another writer's line, between ours
	s.NoteChanged("b")
	if got := journalLines(t, p); got != "a\nx\nb\n" {
		t.Fatalf("journal %q", got)
	}
	if n := openHere(t, p); n != 1 {
		t.Fatalf("%d descriptors open on the journal after the notes, want the one kept", n)
	}

	// An indexer renews it (a new generation renamed over it), while
	// descriptors of notes made side by side are free.
	for i := 0; i < 4; i++ {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		s.journal.put(keptJournal{f, fi})
	}
	old, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := newJournal(p, true); err != nil {
		t.Fatal(err)
	}
	s.NoteChanged("c")
	if got := journalLines(t, p); got != "c\n" {
		t.Fatalf("renewed journal %q, want the note after the renewal", got)
	}
	if b, _ := os.ReadFile("/proc/self/fd/" + strconv.Itoa(int(old.Fd()))); !strings.HasSuffix(string(b), "a\nx\nb\n") {
		t.Fatalf("the replaced journal was written to: %q", b)
	}
	_ = old.Close() // read-only

	// Removed (a note that failed, or an indexer's cleanup): no journal is made.
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	s.NoteChanged("d")
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("a note made a removed journal again: %v", err)
	}
	if n := openHere(t, p+" (deleted)"); n != 0 {
		t.Fatalf("the removed journal is still held open (%d)", n)
	}
}

// Notes made side by side through one kept Store each reach the journal
// once, whole.
func TestJournalKeptOpenSideBySide(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	s.KeepJournalOpen = true
	s.openJournal().close()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				s.NoteChanged(fmt.Sprintf("j%d-%d", g, i))
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(journalLines(t, s.changesPath()), "\n"), "\n")
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
	}
	if len(lines) != 400 || len(seen) != 400 {
		t.Fatalf("%d lines, %d distinct, want 400", len(lines), len(seen))
	}
}
