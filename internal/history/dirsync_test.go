package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/atomicfile"
)

// A new history's entry in its folder, and the folder's in its parent,
// are fsync'd before its first record is acknowledged (once, not at every
// append), and not again if a folder fsync made for another write came in
// between.
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
		want := int64(2)
		if shared {
			want = 1 // the parent's
		}
		if got := atomicfile.DirSyncs.Load() - n; got != want {
			t.Errorf("shared=%v: %d folder fsyncs for 3 appends to a new history, want %d", shared, got, want)
		}
		l.Close()
	}
}

// A folder just made (a job placed in the jobs folder) is settled in its
// parent by the first append, beside the record's own fsync; a folder
// fsync that fails takes the records back out.
func TestFirstAppendSettlesFolderInParent(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "job")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	atomicfile.MarkDirty(parent)
	l, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := atomicfile.DirSyncs.Load()
	if err := l.Append(&Record{Type: TypeError, Error: &ErrorInfo{Code: "X"}}); err != nil {
		t.Fatal(err)
	}
	if got := atomicfile.DirSyncs.Load() - n; got != 2 {
		t.Fatalf("first append: %d folder fsyncs, want 2 (the job folder and its parent)", got)
	}
	if atomicfile.Dirty(parent) || atomicfile.Dirty(dir) {
		t.Fatal("a folder is still dirty after the first append")
	}

	// The job folder removed under an open history: the new file's entry
	// cannot be made durable, so its record is not acknowledged.
	dir2 := filepath.Join(parent, "job2")
	if err := os.Mkdir(dir2, 0o700); err != nil {
		t.Fatal(err)
	}
	l2, _, err := Open(dir2)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if err := os.RemoveAll(dir2); err != nil {
		t.Fatal(err)
	}
	err = l2.Append(&Record{Type: TypeError, Error: &ErrorInfo{Code: "X"}})
	if err == nil || !strings.Contains(err.Error(), dir2) {
		t.Fatalf("append with its folder gone: %v, want an error naming %s", err, dir2)
	}
	if l2.State().NextSeq != 0 || l2.Size() != 0 {
		t.Fatalf("unacknowledged record kept: next seq %d, size %d", l2.State().NextSeq, l2.Size())
	}
}

type countingSigner struct{ n int }

func (c *countingSigner) ID() string             { return "k" }
func (c *countingSigner) Sign(msg []byte) []byte { c.n++; return msg }

// Warm signs throwaway records with the signer it is given (its first use
// happens there, not in a job's first commit).
func TestWarmUsesSigner(t *testing.T) {
	s := &countingSigner{}
	Warm(s)
	if s.n == 0 {
		t.Fatal("Warm did not use the signer")
	}
}

// A folder this process made and whose parent it has fsync'd since
// (atomicfile.MarkCreated, then a jobs folder fsync made for another job)
// does not cost its new history another fsync of the parent, even when
// another job's placement has changed the parent since; a folder it did
// not make, or made but not yet covered, does.
func TestNewHistoryInSettledFolder(t *testing.T) {
	for _, tc := range []struct {
		name             string
		made, settled    bool
		wantParentFsyncs int64
	}{
		{"made and settled", true, true, 0},
		{"made, not settled", true, false, 1},
		{"not made here", false, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "job")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if tc.made {
				atomicfile.MarkCreated(dir)
			}
			if tc.settled {
				if err := atomicfile.SyncDir(parent); err != nil {
					t.Fatal(err)
				}
			}
			l, _, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if got := atomicfile.Dirty(parent); got != (tc.wantParentFsyncs > 0) {
				t.Fatalf("parent dirty after the new history: %v, want %v", got, tc.wantParentFsyncs > 0)
			}
			// Another job placed meanwhile: its change to the parent is
			// its own first unit's to settle, not this one's.
			other := filepath.Join(parent, "other")
			if err := os.Mkdir(other, 0o700); err != nil {
				t.Fatal(err)
			}
			atomicfile.MarkCreated(other)
			n := atomicfile.DirSyncs.Load()
			if err := l.Append(&Record{Type: TypeError, Error: &ErrorInfo{Code: "X"}}); err != nil {
				t.Fatal(err)
			}
			if got := atomicfile.DirSyncs.Load() - n; got != 1+tc.wantParentFsyncs {
				t.Fatalf("%d folder fsyncs at the first append, want %d", got, 1+tc.wantParentFsyncs)
			}
		})
	}
}

// Once a history holds records, a unit that depends on an entry new in
// the job folder (a job's first snapshots folder) is written only after
// the folder's fsync: otherwise a machine crash between the unit's fsync
// and the folder's leaves a durable record naming what is gone. The first
// unit's folder fsyncs may run beside its own (it is not findable before
// them).
func TestLaterUnitWaitsForNewEntries(t *testing.T) {
	dir := t.TempDir()
	var dirtyAtWrite []bool
	l, _, err := OpenWith(dir, Options{Write: func(f *os.File, line []byte) (int, error) {
		dirtyAtWrite = append(dirtyAtWrite, atomicfile.Dirty(dir))
		return f.Write(line)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Append(&Record{Type: TypeError, Error: &ErrorInfo{Code: "X"}}); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.MkdirDeferred(filepath.Join(dir, "snapshots"), 0o700); err != nil {
		t.Fatal(err)
	}
	if !atomicfile.Dirty(dir) {
		t.Fatal("a new folder did not leave its parent dirty")
	}
	if err := l.Append(&Record{Type: TypeError, Error: &ErrorInfo{Code: "Y"}}); err != nil {
		t.Fatal(err)
	}
	if len(dirtyAtWrite) != 2 || dirtyAtWrite[1] {
		t.Fatalf("job folder dirty at each write: %v; want the second unit written once its new entry is durable", dirtyAtWrite)
	}
	if atomicfile.Dirty(dir) {
		t.Fatal("the job folder is still dirty after the append")
	}
}

// A history prepared ahead (Prepare) whose folder and parent this process
// fsync'd since costs its first append no folder fsync; one prepared but
// not yet settled, or left empty by another process (one that died after
// preparing it), is settled by the first append as a new history is.
func TestPreparedHistorySettledOnce(t *testing.T) {
	for _, tc := range []struct {
		name       string
		here, sync bool
		want       int64
	}{
		{"prepared and settled here", true, true, 0},
		{"prepared here, not settled", true, false, 2},
		{"left empty by another process", false, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "job")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if tc.here {
				made, err := Prepare(dir)
				if err != nil || !made {
					t.Fatalf("Prepare: %v, %v", made, err)
				}
				atomicfile.MarkCreated(dir)
			} else {
				for _, name := range []string{FileName, HeadFile} {
					if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.sync {
				if err := atomicfile.SyncDirtyStart(dir, parent)(); err != nil {
					t.Fatal(err)
				}
				if err := atomicfile.SyncDir(parent); err != nil {
					t.Fatal(err)
				}
			}
			l, _, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.State().NextSeq != 0 {
				t.Fatalf("a prepared history opens at seq %d, want 0 (no records)", l.State().NextSeq)
			}
			n := atomicfile.DirSyncs.Load()
			if err := l.Append(&Record{Type: TypeError, Error: &ErrorInfo{Code: "X"}}); err != nil {
				t.Fatal(err)
			}
			if got := atomicfile.DirSyncs.Load() - n; got != tc.want {
				t.Fatalf("%d folder fsyncs at the first append, want %d", got, tc.want)
			}
			if h, err := ReadHead(dir); err != nil || h == nil || h.Seq != 0 {
				t.Fatalf("head after the first append: %+v, %v", h, err)
			}
		})
	}
}

// Prepare makes nothing where a history, even an empty one, or its head
// is already there.
func TestPrepareLeavesAnExistingHistory(t *testing.T) {
	for _, name := range []string{FileName, HeadFile, IndexFile} {
		dir := t.TempDir()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if made, err := Prepare(dir); made || err != nil {
			t.Errorf("with %s present: Prepare = %v, %v; want false, nil", name, made, err)
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 {
			t.Errorf("with %s present, Prepare made files: %v", name, ents)
		}
	}
	dir := t.TempDir()
	if made, err := Prepare(dir); !made || err != nil {
		t.Fatalf("Prepare = %v, %v", made, err)
	}
	if ok, err := Present(dir); ok || err != nil {
		t.Errorf("a prepared history is Present: %v, %v; want none", ok, err)
	}
	if recs, err := ReadAll(dir); err != nil || len(recs) != 0 {
		t.Errorf("a prepared history reads as %d records, %v", len(recs), err)
	}
	if h, err := ReadHead(dir); h != nil || err != nil {
		t.Errorf("a prepared head reads as %+v, %v; want none", h, err)
	}
}
