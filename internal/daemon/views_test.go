package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/logist/logist/internal/history"
)

// TestStartRebuildsLostJobHistoryViews: jobHistory.json is written without
// an fsync when a job stops, so a crash can leave a finished job's view
// missing, torn or stale, and nothing runs the job again to rewrite it.
// The daemon's start brings every such view back to what the history
// says, in --once mode before it exits and otherwise once it is ready.
func TestStartRebuildsLostJobHistoryViews(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "jobs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte(quick), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	once := func() {
		t.Helper()
		if err := Run(context.Background(), Options{JobsDir: dir, Once: true, MaxParallel: 2}, discard()); err != nil {
			t.Fatal(err)
		}
	}
	once()
	view := func(id string) string { return filepath.Join(dir, id, history.JobHistoryFile) }
	want := map[string][]byte{}
	for _, id := range []string{"a", "b", "c"} {
		if status(dir, id) != "SUCCESS" {
			t.Fatalf("job %s: %s", id, status(dir, id))
		}
		b, err := os.ReadFile(view(id))
		if err != nil {
			t.Fatal(err)
		}
		want[id] = b
	}
	// a: missing; b: torn; c: stale (an older view, without the last
	// records).
	if err := os.Remove(view("a")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(view("b"), want["b"][:len(want["b"])/2], 0o600); err != nil {
		t.Fatal(err)
	}
	recs, err := history.ReadAll(filepath.Join(dir, "c"))
	if err != nil || len(recs) < 2 {
		t.Fatalf("history of c: %d records, %v", len(recs), err)
	}
	es, _ := history.ReadEntries(filepath.Join(dir, "c"))
	if err := history.WriteJobHistoryOf(filepath.Join(dir, "c"), "c", "", "", recs[:len(recs)-1], es[len(es)-2].Hash); err != nil {
		t.Fatal(err)
	}
	once()
	for _, id := range []string{"a", "b", "c"} {
		got, err := os.ReadFile(view(id))
		if err != nil || !bytes.Equal(got, want[id]) {
			t.Errorf("job %s's view after a start: %v\n%s\nwant\n%s", id, err, got, want[id])
		}
	}
}
