package history

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// appendN appends n response records to l.
func appendN(t *testing.T, l *Log, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		rec := &Record{Type: TypeResponse, Role: "worker", Phase: "work", Interaction: ip(i),
			Response: &Response{Status: StatusSuccess, Action: "RETRY", Summary: strings.Repeat("s", 40)}}
		if err := l.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
}

// collector records the sequence numbers passed on, and fails on a
// repeat or a gap.
type collector struct {
	mu   sync.Mutex
	seqs []int64
}

func (c *collector) emit(en Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if want := int64(len(c.seqs)); en.Seq != want {
		return fmt.Errorf("record %d passed on after %d records (want %d): repeated or skipped", en.Seq, len(c.seqs), want)
	}
	c.seqs = append(c.seqs, en.Seq)
	return nil
}

func (c *collector) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seqs)
}

func TestFollowerIncremental(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := NewFollower(dir)
	c := &collector{}
	if err := f.Poll(c.emit); err != nil || c.n() != 0 {
		t.Fatalf("no history: %v, %d records", err, c.n())
	}
	l, _, err := OpenWith(dir, Options{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for round, n := range []int{3, 0, 1, 5} {
		appendN(t, l, n)
		if err := f.Poll(c.emit); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if c.n() != 9 {
		t.Fatalf("%d records, want 9", c.n())
	}
	// A record being written (no newline yet) waits for its end.
	hf, err := os.OpenFile(Path(dir), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	if _, err := hf.WriteString(`{"hash":"x","rec":{"v":2,"seq":9,`); err != nil {
		t.Fatal(err)
	}
	if err := f.Poll(c.emit); err != nil || c.n() != 9 {
		t.Fatalf("partial line: %v, %d records", err, c.n())
	}
	if _, err := hf.WriteString(`"type":"error","ts":"2026-11-21T10:00:00Z","error":{"code":"X","message":"m"}}}` + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Poll(c.emit); err != nil || c.n() != 10 {
		t.Fatalf("completed line: %v, %d records", err, c.n())
	}
}

// A follower started after a record, or told to skip records (their
// writer has them), passes on only what comes after, across a rotation
// too.
func TestFollowerAfterAndSkip(t *testing.T) {
	dir := t.TempDir()
	l, _, err := OpenWith(dir, Options{MaxBytes: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendN(t, l, 4) // 0-3
	f := NewFollowerAfter(dir, 2)
	if f.Last() != 2 {
		t.Fatalf("Last = %d, want 2", f.Last())
	}
	var got []int64
	emit := func(en Entry) error { got = append(got, en.Seq); return nil }
	if err := f.Poll(emit); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 3) // 4-6, rotating
	f.Skip(5)
	f.Skip(1)        // never backwards
	appendN(t, l, 2) // 7-8
	if err := f.Poll(emit); err != nil {
		t.Fatal(err)
	}
	if want := []int64{3, 6, 7, 8}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("passed on %v, want %v", got, want)
	}
	if f.Last() != 8 {
		t.Fatalf("Last = %d, want 8", f.Last())
	}
	if g := NewFollowerAfter(dir, -1); g.Last() != -1 || g.Seen() {
		t.Fatalf("a follower after -1 has seen %d", g.Last())
	}
}

// A writer appending (and rotating the history into archives every few
// records) while the follower polls: every record comes out once, in
// order, and nothing is lost at a rotation.
func TestFollowerAcrossRotations(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _, err := OpenWith(dir, Options{MaxBytes: 1500})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const total = 150
	done := make(chan struct{})
	defer func() { <-done }() // the writer stops before the folder goes
	go func() {
		defer close(done)
		for i := 0; i < total; i++ {
			rec := &Record{Type: TypeResponse, Role: "worker", Phase: "work", Interaction: ip(i),
				Response: &Response{Status: StatusSuccess, Action: "RETRY", Summary: strings.Repeat("s", 100)}}
			if err := l.Append(rec); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	f := NewFollower(dir)
	c := &collector{}
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		if err := f.Poll(c.emit); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Poll(c.emit); err != nil {
		t.Fatal(err)
	}
	if c.n() != total {
		t.Fatalf("%d records passed on, want %d", c.n(), total)
	}
	idx, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil || !strings.Contains(string(idx), "history-000005.jsonl.gz") {
		t.Fatalf("the test did not rotate enough: %v\n%s", err, idx)
	}
}

// A rotation's window: the active file renamed into a plain archive that
// is not yet indexed. The follower waits rather than skip those records.
func TestFollowerWaitsForUnindexedArchive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _, err := OpenWith(dir, Options{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2)
	l.Close()
	f := NewFollower(dir)
	c := &collector{}
	if err := f.Poll(c.emit); err != nil || c.n() != 2 {
		t.Fatalf("%v, %d records", err, c.n())
	}
	// Two more records, then the rename half of a rotation by hand, and a
	// record in the new active file.
	l, _, _ = OpenWith(dir, Options{MaxBytes: -1})
	appendN(t, l, 2)
	l.Close()
	active := Path(dir)
	plain := filepath.Join(dir, "history-000001.jsonl")
	data, _ := os.ReadFile(active)
	if err := os.Rename(active, plain); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	rec4 := strings.Replace(lines[3], `"seq":3`, `"seq":4`, 1)
	if err := os.WriteFile(active, []byte(rec4), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.Poll(c.emit); err != nil {
		t.Fatal(err)
	}
	if c.n() != 2 {
		t.Fatalf("%d records passed on during the rotation window, want 2 (wait for the archive)", c.n())
	}
	// The archive is indexed (logistd's next open seals it).
	l, _, err = OpenWith(dir, Options{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := os.Stat(plain); !os.IsNotExist(err) {
		t.Fatalf("plain archive still there: %v", err)
	}
	if err := f.Poll(c.emit); err != nil {
		t.Fatal(err)
	}
	if c.n() != 5 {
		t.Fatalf("%d records, want 5 once the archive is indexed", c.n())
	}
}

// Follow, as logist logs -f uses it: records appended while it runs, some
// of them rotated into archives on the way, all come out once and in
// order; it returns once Done says the writer is done and it has read to
// the end, well before the context's deadline.
func TestFollowAcrossAppendsAndRotations(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _, err := OpenWith(dir, Options{MaxBytes: 1500})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendN(t, l, 3) // before Follow starts
	const total = 120
	var finished atomic.Bool
	c := &collector{}
	started := make(chan struct{})
	writer := make(chan error, 1)
	go func() {
		<-started
		for i := 3; i < total; i++ {
			rec := &Record{Type: TypeResponse, Role: "worker", Phase: "work", Interaction: ip(i),
				Response: &Response{Status: StatusSuccess, Action: "RETRY", Summary: strings.Repeat("s", 100)}}
			if err := l.Append(rec); err != nil {
				writer <- err
				return
			}
			if i%10 == 0 {
				time.Sleep(time.Millisecond) // let the follower catch up now and then
			}
		}
		finished.Store(true)
		// Something to wake the follower after Done turns true, as the
		// manifest's replacement does for logist logs.
		writer <- os.WriteFile(filepath.Join(dir, "done"), nil, 0o600)
	}()
	// A safety net only: a loaded CI machine under -race took 7 s a run.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := NewFollower(dir)
	emit := func(en Entry) error {
		if en.Seq == 2 {
			close(started) // the writer goes on once Follow is reading
		}
		return c.emit(en)
	}
	err = f.Follow(ctx, emit, FollowOptions{Done: finished.Load, Wake: []string{"done"}})
	if err != nil {
		t.Fatalf("Follow: %v (after %d records)", err, c.n())
	}
	if err := <-writer; err != nil {
		t.Fatal(err)
	}
	if c.n() != total {
		t.Fatalf("%d records passed on, want %d", c.n(), total)
	}
	idx, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil || !strings.Contains(string(idx), "history-000003.jsonl.gz") {
		t.Fatalf("the test did not rotate enough: %v\n%s", err, idx)
	}
}

// Follow ends with the context (its error), with the folder
// (ErrFolderGone), and with emit's error.
func TestFollowStops(t *testing.T) {
	t.Parallel()
	t.Run("deadline", func(t *testing.T) {
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := NewFollower(dir).Follow(ctx, (&collector{}).emit, FollowOptions{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the deadline", err)
		}
	})
	t.Run("folder removed", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "job")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		l, _, err := OpenWith(dir, Options{MaxBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		appendN(t, l, 2)
		l.Close()
		c := &collector{}
		done := make(chan error, 1)
		go func() { done <- NewFollower(dir).Follow(context.Background(), c.emit, FollowOptions{}) }()
		deadline := time.Now().Add(5 * time.Second)
		for c.n() < 2 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, ErrFolderGone) {
				t.Fatalf("err = %v, want ErrFolderGone", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("following a removed folder did not stop")
		}
	})
	t.Run("emit fails", func(t *testing.T) {
		dir := t.TempDir()
		l, _, err := OpenWith(dir, Options{MaxBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		appendN(t, l, 2)
		l.Close()
		boom := errors.New("boom")
		err = NewFollower(dir).Follow(context.Background(), func(Entry) error { return boom }, FollowOptions{})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want emit's", err)
		}
	})
}

// midRotation is a job folder caught in the middle of a rotation: a
// history of 3 records renamed to its archive's name, not yet sealed.
func midRotation(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	l, _, err := OpenWith(dir, Options{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 3)
	l.Close()
	if err := os.Rename(Path(dir), filepath.Join(dir, archiveName(1))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// PollSettled, caught between a rotation's rename and its sealing, waits
// for the archive (a second at most) and then ends where the history does.
// In a synctest bubble: the 50 ms before the sealing and PollSettled's
// waits are the bubble's clock, so a loaded machine cannot make the sealing
// late (the file work in between is real, and the clock waits for it).
func TestPollSettledWaitsOutARotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := midRotation(t)
		sealed := make(chan struct{})
		defer func() { <-sealed }() // the opener is done before the folder goes
		go func() {
			defer close(sealed)
			time.Sleep(50 * time.Millisecond)
			if l, _, err := OpenWith(dir, Options{MaxBytes: -1}); err == nil { // seals the archive
				l.Close()
			}
		}()
		start := time.Now()
		f, c := NewFollower(dir), &collector{}
		if err := f.PollSettled(c.emit); err != nil {
			t.Fatal(err)
		}
		if c.n() != 3 || f.Waiting() || !f.Seen() {
			t.Fatalf("%d records, waiting %v, seen %v; want 3, false, true", c.n(), f.Waiting(), f.Seen())
		}
		if waited := time.Since(start); waited < 50*time.Millisecond {
			t.Errorf("PollSettled returned after %v, before the sealing at 50ms", waited)
		}
	})
}

// PollSettled gives up after a second of a rotation that does not end,
// still waiting, with the records before the rotation passed on.
func TestPollSettledGivesUpAfterASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := midRotation(t)
		start := time.Now()
		f := NewFollower(dir)
		if err := f.PollSettled((&collector{}).emit); err != nil {
			t.Fatal(err)
		}
		if !f.Waiting() {
			t.Error("not waiting after a rotation that never ended")
		}
		if waited := time.Since(start); waited < time.Second || waited > 2*time.Second {
			t.Errorf("gave up after %v, want about a second", waited)
		}
	})
}
