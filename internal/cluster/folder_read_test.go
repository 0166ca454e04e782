package cluster

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/jobstore"
)

// movingStore is a store whose job moves on between the row and the
// history reads, the first `moves` times: another node committed in
// between (its History then has a line the row did not count).
type movingStore struct {
	clusterstore.Store
	moves, reads atomic.Int32
}

func (m *movingStore) History(ctx context.Context, id string) ([][]byte, error) {
	lines, err := m.Store.History(ctx, id)
	if m.reads.Add(1) <= m.moves.Load() && err == nil {
		lines = append(lines, []byte("{}\n"))
	}
	return lines, err
}

// A steering or a claim that meets a commit between its two reads reads
// the job again instead of failing: TestCronMetrics met it when two nodes
// replaced one run at once.
func TestWriteFolderReadsAJobThatMovedAgain(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t)
	ctx := context.Background()
	id, err := Submit(ctx, s, scripted("moving", 0))
	if err != nil {
		t.Fatal(err)
	}
	m := &movingStore{Store: s}
	m.moves.Store(2)
	dir := t.TempDir()
	if _, _, err := writeFolder(ctx, m, dir, id, nil, true); err != nil {
		t.Fatalf("a history that moved twice while read: %v", err)
	}
	if got := m.reads.Load(); got != 3 {
		t.Fatalf("history read %d times, want 3", got)
	}
	if _, err := jobstore.New(dir).Load(id); err != nil {
		t.Fatalf("the folder written: %v", err)
	}
	m = &movingStore{Store: s}
	m.moves.Store(readTries)
	if _, _, err := writeFolder(ctx, m, filepath.Join(dir, "again"), id, nil, true); err == nil {
		t.Fatalf("a history that moved at each of %d reads was written", readTries)
	}
}
