package history

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// richHistory appends n calls (intent, response with a session, every
// tenth a recovery point with a commit), ending on an open intent, so the
// state has every part a mark must carry.
func richHistory(t *testing.T, l *Log, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		in := l.NewInteraction()
		if err := l.Append(&Record{Type: TypeIntent, Interaction: ip(in), Phase: "work", Role: "worker",
			Request: &Request{Prompt: strings.Repeat("p", 300), Metadata: map[string]any{"attempt": 1}}}); err != nil {
			t.Fatal(err)
		}
		if err := l.Append(&Record{Type: TypeResponse, Interaction: ip(in), Phase: "work", Role: "worker",
			Response: &Response{Status: StatusSuccess, Action: "RETRY", SessionID: "s" + string(rune('a'+i%26)), Summary: strings.Repeat("s", 200)}}); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			if err := l.AppendBatch([]*Record{
				{Type: TypeTransition, Transition: &Transition{From: "RUNNING", To: "RUNNING"}},
				{Type: TypeRecoveryPoint, RecoveryPoint: &RecoveryPoint{CheckpointID: "cp" + string(rune('a'+i%26)), Sequence: i},
					Commit: &Commit{Base: "b", Sum: "s", Manifest: json.RawMessage(`{"id":"j"}`)}},
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	in := l.NewInteraction()
	if err := l.Append(&Record{Type: TypeIntent, Interaction: ip(in), Phase: "review", Role: "supervisor",
		Request: &Request{Prompt: "open"}}); err != nil {
		t.Fatal(err)
	}
}

func stateJSON(t *testing.T, l *Log) string {
	t.Helper()
	b, err := json.Marshal(struct {
		S    State
		H    string
		Size int64
	}{l.State(), l.LastHash(), l.Size()})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fullScan opens dir's history with the mark out of the way.
func fullScan(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, MarkFile)
	if err := os.Rename(p, p+".aside"); err == nil {
		defer func() {
			if err := os.Rename(p+".aside", p); err != nil {
				t.Fatal(err)
			}
		}()
	}
	l, _, err := OpenWith(dir, Options{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.scanFrom != 0 {
		t.Fatalf("no mark, but the open read from byte %d", l.scanFrom)
	}
	return stateJSON(t, l)
}

// Opening a long history reads only what follows its scan mark, and
// comes to the state a scan of the whole file does.
func TestOpenReadsFromTheMark(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _, err := OpenWith(dir, Options{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	richHistory(t, l, 0, 700)
	want := stateJSON(t, l)
	l.Close()
	if l.Size() < 4*markEvery {
		t.Fatalf("history of %d bytes: too short for the test", l.Size())
	}
	if _, err := os.Stat(filepath.Join(dir, MarkFile)); err != nil {
		t.Fatalf("no mark after %d bytes: %v", l.Size(), err)
	}
	for round := range 3 {
		l, torn, err := OpenWith(dir, Options{MaxBytes: -1})
		if err != nil || torn != nil {
			t.Fatal(err, torn)
		}
		if l.scanFrom == 0 || l.Size()-l.scanFrom > markEvery {
			t.Fatalf("round %d: read from byte %d of %d: want at most %d", round, l.scanFrom, l.Size(), markEvery)
		}
		if got := stateJSON(t, l); got != want {
			t.Fatalf("round %d: state from the mark\n%s\nwant (full scan)\n%s", round, got, want)
		}
		if full := fullScan(t, dir); full != want {
			t.Fatalf("round %d: full scan\n%s\nwant\n%s", round, full, want)
		}
		richHistory(t, l, 700+round*50, 50)
		want = stateJSON(t, l)
		l.Close()
	}
	if _, ok := l.Records(); ok {
		t.Fatal("records kept after an open from a mark: they would miss those before it")
	}
}

// noHead removes the signed head, which would refuse a log replaced or
// cut (head_test.go): here the mark alone is under test.
func noHead(t *testing.T, dir string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, HeadFile)); err != nil {
		t.Fatal(err)
	}
}

// A mark that does not fit the file is ignored: the open reads the whole
// file and comes to the right state.
func TestOpenIgnoresABadMark(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"torn", func(t *testing.T, dir string) {
			p := filepath.Join(dir, MarkFile)
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, b[:len(b)/2], 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"edited", func(t *testing.T, dir string) {
			p := filepath.Join(dir, MarkFile)
			b, _ := os.ReadFile(p)
			b = []byte(strings.Replace(string(b), `"next_seq":`, `"next_seq":1`, 1))
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"file replaced", func(t *testing.T, dir string) {
			// Another history of the same length in its place.
			other := t.TempDir()
			l, _, err := OpenWith(other, Options{MaxBytes: -1})
			if err != nil {
				t.Fatal(err)
			}
			richHistory(t, l, 1000, 300)
			l.Close()
			b, _ := os.ReadFile(Path(other))
			if err := os.WriteFile(Path(dir), b, 0o600); err != nil {
				t.Fatal(err)
			}
			noHead(t, dir)
		}},
		{"file cut short", func(t *testing.T, dir string) {
			if err := os.Truncate(Path(dir), markEvery+100); err != nil {
				t.Fatal(err)
			}
			noHead(t, dir)
		}},
		{"symlink", func(t *testing.T, dir string) {
			p := filepath.Join(dir, MarkFile)
			if err := os.Rename(p, p+".real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(p+".real", p); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			l, _, err := OpenWith(dir, Options{MaxBytes: -1})
			if err != nil {
				t.Fatal(err)
			}
			richHistory(t, l, 0, 300)
			l.Close()
			c.damage(t, dir)
			want := fullScan(t, dir)
			l, _, err = OpenWith(dir, Options{MaxBytes: -1})
			if err != nil {
				if c.name == "file cut short" {
					return // refused as corrupt, as without a mark
				}
				t.Fatal(err)
			}
			defer l.Close()
			if l.scanFrom != 0 {
				t.Fatalf("read from byte %d: the bad mark was trusted", l.scanFrom)
			}
			if got := stateJSON(t, l); got != want {
				t.Fatalf("state\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// A rotation makes the mark stale; the next open does not trust it and
// the state carries on from the index.
func TestMarkAcrossRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _, err := OpenWith(dir, Options{MaxBytes: 3 * markEvery})
	if err != nil {
		t.Fatal(err)
	}
	richHistory(t, l, 0, 500)
	want := stateJSON(t, l)
	l.Close()
	idx, err := readIndex(dir)
	if err != nil || len(idx.Archives) == 0 {
		t.Fatalf("no rotation: %v %v", idx, err)
	}
	l, _, err = OpenWith(dir, Options{MaxBytes: 3 * markEvery})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := stateJSON(t, l); got != want {
		t.Fatalf("state\n%s\nwant\n%s", got, want)
	}
	es, err := ReadEntries(dir)
	if err != nil || int64(len(es)) != l.State().NextSeq {
		t.Fatalf("%d entries, next seq %d: %v", len(es), l.State().NextSeq, err)
	}
}

// The mark is never written through a link (symbolic or hard) planted
// in its place, and a fifo there blocks neither the open nor the write:
// what is planted is replaced by a mark, and nothing else is touched.
func TestMarkNotWrittenThroughALink(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		plant func(mark, outside string) error
	}{
		{"symlink", func(mark, outside string) error { return os.Symlink(outside, mark) }},
		{"hard link", func(mark, outside string) error { return os.Link(outside, mark) }},
		{"fifo", func(mark, _ string) error { return syscall.Mkfifo(mark, 0o600) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir, outside := t.TempDir(), filepath.Join(t.TempDir(), "target")
			if err := os.WriteFile(outside, []byte("keep"), 0o600); err != nil {
				t.Fatal(err)
			}
			l, _, err := OpenWith(dir, Options{MaxBytes: -1})
			if err != nil {
				t.Fatal(err)
			}
			richHistory(t, l, 0, 300)
			l.Close()
			if err := os.Remove(filepath.Join(dir, MarkFile)); err != nil {
				t.Fatal(err)
			}
			if err := c.plant(filepath.Join(dir, MarkFile), outside); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				l, _, err := OpenWith(dir, Options{MaxBytes: -1})
				if err != nil {
					t.Error(err)
					return
				}
				richHistory(t, l, 300, 150)
				l.Close()
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("open or append blocked on what was planted as the mark")
			}
			if b, _ := os.ReadFile(outside); string(b) != "keep" {
				t.Fatalf("what the mark's place linked to was written: %q", b)
			}
			fi, err := os.Lstat(filepath.Join(dir, MarkFile))
			if err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("no mark in place of the %s: %v %v", c.name, fi, err)
			}
			l, _, err = OpenWith(dir, Options{MaxBytes: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.scanFrom == 0 {
				t.Fatal("the new mark was not used")
			}
		})
	}
}
