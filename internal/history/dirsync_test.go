package history

import (
	"testing"

	"github.com/logist/logist/internal/atomicfile"
)

// A new history's entry in its folder is fsync'd before its first record
// is acknowledged (once, not at every append), and not at all if a folder
// fsync made for another write came in between.
func TestNewHistoryFolderSyncedBeforeFirstRecord(t *testing.T) {
	for _, shared := range []bool{false, true} {
		dir := t.TempDir()
		l, _, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if shared {
			if err := atomicfile.SyncDir(dir); err != nil {
				t.Fatal(err)
			}
		}
		n := atomicfile.DirSyncs.Load()
		for i := 0; i < 3; i++ {
			if err := l.Append(&Record{Type: TypeError, Error: &ErrorInfo{Code: "X"}}); err != nil {
				t.Fatal(err)
			}
		}
		want := int64(1)
		if shared {
			want = 0
		}
		if got := atomicfile.DirSyncs.Load() - n; got != want {
			t.Errorf("shared=%v: %d folder fsyncs for 3 appends to a new history, want %d", shared, got, want)
		}
		l.Close()
	}
}
