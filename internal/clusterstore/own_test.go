package clusterstore_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/testkit"
)

// TestOwnerCommits: the folder owner's units (OwnFolder, Own, a Write of
// the caller's) are written by the caller's write once the rule passed
// (a unit that does not continue the history is refused, unwritten);
// one job's unit does not wait for another's (the store takes no lock of
// its own: the job's lock is the caller's); and the owner's unit carries
// records and a manifest only. It writes nothing of the store's own
// (no row, no .cluster folder).
func TestOwnerCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	for _, id := range []string{"a", "b"} {
		testkit.WriteJob(t, dir, id, map[string]any{"status": "RUNNING", "current_phase": "work"})
	}
	s := clusterstore.OwnFolder(jobstore.New(dir))
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	key := testKey{priv}
	lines := func(next int64, prev string) ([][]byte, string) {
		ls, last, err := history.Seal([]*history.Record{{Type: history.TypeError, Error: &history.ErrorInfo{Code: "TEST"}}}, next, prev, time.Now(), key)
		if err != nil {
			t.Fatal(err)
		}
		return ls, last
	}
	// a's write (a test's: it writes nothing) blocks until b's unit was
	// committed.
	la, _ := lines(0, "")
	lb, _ := lines(0, "")
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Commit(ctx, s.Own("a"), clusterstore.Unit{Lines: la, Write: func() error {
			close(entered)
			<-release
			return nil
		}})
	}()
	<-entered
	wroteB := 0
	if err := s.Commit(ctx, s.Own("b"), clusterstore.Unit{Lines: lb, Write: func() error { wroteB++; return nil }}); err != nil || wroteB != 1 {
		t.Fatalf("b's unit while a's is written: %v, written %d times", err, wroteB)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// a's units through its history (the engine's Log, committing
	// through the store): the store meets the file as it left it, so a
	// unit that does not continue it is refused, unwritten.
	lg, _, err := history.OpenWith(filepath.Join(dir, "a"), history.Options{Signer: key, Commit: func(u history.Unit) error {
		return s.Commit(ctx, s.Own("a"), clusterstore.Unit{Lines: u.Lines, Write: u.Write})
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lg.Close() }()
	for range 2 {
		if err := lg.Append(&history.Record{Type: history.TypeError, Error: &history.ErrorInfo{Code: "TEST"}}); err != nil {
			t.Fatal(err)
		}
	}
	stale, _ := lines(0, "") // computed on the history before the Log's records
	wrote := 0
	write := func() error { wrote++; return nil }
	if err := s.Commit(ctx, s.Own("a"), clusterstore.Unit{Lines: stale, Write: write}); !errors.Is(err, clusterstore.ErrConflict) || wrote != 0 {
		t.Fatalf("a unit that does not continue the history: %v, written %d times; want ErrConflict, unwritten", err, wrote)
	}
	if recs := testkit.Records(t, filepath.Join(dir, "a")); len(recs) != 2 {
		t.Fatalf("a's history holds %d records, want the Log's 2", len(recs))
	}
	after, _ := lines(lg.State().NextSeq, lg.LastHash())
	err = s.Commit(ctx, s.Own("a"), clusterstore.Unit{Lines: after, Write: write, Files: map[string][]byte{"x": []byte("x")}})
	if err == nil || wrote != 0 {
		t.Fatalf("an owner's unit with files: %v, written %d times; want refused", err, wrote)
	}
	for _, p := range []string{".cluster", "a/.cluster-row.json", "b/.cluster-row.json"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Fatalf("%s exists", p)
		}
	}
}
