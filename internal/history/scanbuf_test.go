package history

import (
	"runtime"
	"testing"
)

// Opening a history, as every job's pickup does (most often a new, empty
// file), must not make a 64 KiB read buffer each time: scan borrows one
// from a pool. Measured in bytes allocated per open, not in time.
func TestOpenBorrowsItsReadBuffer(t *testing.T) {
	dir := t.TempDir()
	open := func() {
		l, _, err := OpenWith(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	open() // creates the file and fills the pool
	const n = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		open()
	}
	runtime.ReadMemStats(&after)
	perOpen := (after.TotalAlloc - before.TotalAlloc) / n
	if perOpen >= 32<<10 {
		t.Fatalf("opening an empty history allocated %d bytes on average: its scan made a new read buffer", perOpen)
	}
	t.Logf("%d bytes allocated per open", perOpen)
}
