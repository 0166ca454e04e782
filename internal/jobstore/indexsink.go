package jobstore

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"
)

// indexTemp is an index being written to a temporary file in IndexDir,
// which replaces the index when done (commit) or is removed (abort).
type indexTemp struct {
	s *Store
	f *os.File
	x *indexWriter
}

// createIndex starts a new index; sizeHint is about its string table's
// size (the old table's: no doubling of 10 MB).
func (s *Store) createIndex(sizeHint int) (*indexTemp, error) {
	if err := mkIndexDir(filepath.Join(s.Dir, IndexDir)); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(filepath.Join(s.Dir, IndexDir), "jobs.tmp-*")
	if err != nil {
		return nil, err
	}
	x := newIndexWriter(f)
	x.strs.Grow(sizeHint)
	return &indexTemp{s: s, f: f, x: x}, nil
}

// commit ends the index with mark and puts it in place. No fsync: after
// a crash the checksum rejects a torn file and the next listing rebuilds
// it.
func (t *indexTemp) commit(mark indexMark) error {
	mark.Checker = checker()
	err := t.x.close(mark)
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(t.f.Name(), t.s.indexPath())
	}
	if err != nil {
		_ = os.Remove(t.f.Name()) // the failed write's temp file
		return err
	}
	if _, err := os.Lstat(filepath.Join(t.s.Dir, legacyIndexFile)); err == nil {
		_ = os.Remove(filepath.Join(t.s.Dir, legacyIndexFile)) // an earlier version's cache
	}
	sweepIndexTemps(filepath.Join(t.s.Dir, IndexDir), time.Now())
	return nil
}

// staleIndexTemp is how old a temporary index file must be before a
// writer takes it for one a killed process left: writing the index of
// 50,000 jobs takes well under a second.
const staleIndexTemp = time.Hour

// sweepIndexTemps removes the temporary index files in dir that a process
// killed while writing left behind (a daemon stopped mid-listing left one
// per stop, and nothing else removes them). Other writers' files in
// progress are younger than staleIndexTemp and stay.
func sweepIndexTemps(dir string, now time.Time) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "jobs.tmp-") || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > staleIndexTemp {
			_ = os.Remove(filepath.Join(dir, e.Name())) // best effort: the next commit tries again
		}
	}
}

// abort drops the index being written.
func (t *indexTemp) abort() {
	_ = t.f.Close()           // a temp file nobody reads
	_ = os.Remove(t.f.Name()) // not to be used
}

// indexSink is the index a listing writes, fed its entries in id order as
// the listing goes (listSummaries' commit), so that a listing of 50,000
// jobs need not hold their summaries to its end. Until an entry differs
// from the old index nothing is written, only the old records it keeps
// noted: a listing that changes nothing writes nothing (unless the count
// or the mark changed, found at the end), and one that does begins with
// those records, taken from the old index.
type indexSink struct {
	s   *Store
	old *indexView
	// kept are the old index's records added before the first change.
	kept []int32
	t    *indexTemp // nil until the first change
	n    int
	err  error
}

// keep adds the old index's record r as it is.
func (k *indexSink) keep(r int) {
	k.n++
	switch {
	case k.err != nil:
	case k.t == nil:
		k.kept = append(k.kept, int32(r))
	default:
		ie := k.old.entry(r)
		k.t.x.add(&ie)
	}
}

// add adds entry e, read now.
func (k *indexSink) add(e *indexEntry) {
	if k.t == nil && k.err == nil {
		if r := k.old.find(e.Sum.JobID); r >= 0 && reflect.DeepEqual(k.old.entry(r), *e) {
			k.keep(r)
			return
		}
		k.start()
	}
	k.n++
	if k.err == nil {
		k.t.x.add(e)
	}
}

// start opens the new index and writes the old records kept so far.
func (k *indexSink) start() {
	if k.t, k.err = k.s.createIndex(len(idxStrings(k.old))); k.err != nil {
		return
	}
	for _, r := range k.kept {
		ie := k.old.entry(int(r))
		k.t.x.add(&ie)
	}
	k.kept = nil
}

// needed reports whether the listing has an index to write: something
// changed, or the count or the mark differ from the old index's.
func (k *indexSink) needed(mark indexMark) bool {
	if k.t != nil || k.err != nil {
		return true
	}
	if k.old == nil {
		return k.n > 0
	}
	return k.n != k.old.n || mark != k.old.mark
}

// finish writes the index out with mark (best effort: a cache).
func (k *indexSink) finish(mark indexMark) {
	if k.t == nil && k.err == nil {
		k.start()
	}
	if k.err != nil {
		if k.t != nil {
			k.t.abort()
		}
		return
	}
	_ = k.t.commit(mark) // a read-only folder just lists slower
}

// abort drops what was written.
func (k *indexSink) abort() {
	if k.t != nil {
		k.t.abort()
	}
}
