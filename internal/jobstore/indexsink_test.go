package jobstore

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// makeMixedFolder writes finished, invalid and running jobs, a bare
// manifest and a folder with no manifest.
func makeMixedFolder(t *testing.T, dir string) {
	t.Helper()
	s := New(dir)
	for i := 0; i < 40; i++ {
		id := fmt.Sprintf("j%02d", i)
		body := strings.Replace(validJob, `"a"`, `"`+id+`"`, 1)
		switch i % 5 {
		case 0, 1, 2:
			body = strings.Replace(body, `"job_id"`, `"status": "SUCCESS", "job_id"`, 1)
		case 3: // schema-invalid, but it decodes
			body = strings.Replace(body, `"provider": "script"`, `"provider": "scripx"`, 1)
		}
		writeJob(t, s, id, body)
	}
	if err := os.WriteFile(filepath.Join(dir, "bare.json"), []byte(`{"task_description": "t"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
}

// seen is what a caller can take of an entry.
type seen struct {
	ID, Unplaced, Err, Status string
	Live, Partial, Unchecked  bool
}

func seenOf(dir string, e *Entry) seen {
	v := seen{ID: e.ID, Unplaced: e.Unplaced, Live: e.Live(), Partial: e.Partial, Unchecked: e.Unchecked}
	if e.Err != nil {
		v.Err = strings.ReplaceAll(e.Err.Error(), dir, "DIR")
	}
	if m := e.View(); m != nil {
		v.Status = string(m.Status)
	}
	if v.Unplaced != "" {
		v.Unplaced = filepath.Base(v.Unplaced)
	}
	return v
}

// indexEntries is the index of dir, without the files' keys (another
// folder's files have other inodes and times).
func indexEntries(t *testing.T, dir string) []indexEntry {
	t.Helper()
	v := New(dir).readIndex()
	if v == nil {
		t.Fatalf("no index in %s", dir)
	}
	out := make([]indexEntry, v.n)
	for i := range out {
		out[i] = v.entry(i)
		out[i].Key = statKey{}
		out[i].Err = strings.ReplaceAll(out[i].Err, dir, "DIR")
	}
	return out
}

// A listing with Scan.Done hands every entry over in id order, with what
// a listing without it returns, lets each go after the call, and writes
// the same index as it goes; listed again, it writes nothing; after a
// change, it writes the index again with the change.
func TestDoneStreamsTheListing(t *testing.T) {
	t.Parallel()
	for _, lazy := range []bool{true, false} {
		a, b := t.TempDir(), t.TempDir()
		makeMixedFolder(t, a)
		makeMixedFolder(t, b)
		time.Sleep(indexStable + 100*time.Millisecond)
		list := func(dir string, done func(*Entry)) []Entry {
			s := New(dir)
			es, err := s.listSummaries(false, lazy, Scan{Workers: 3, Done: done})
			if err != nil {
				t.Fatal(err)
			}
			return es
		}
		for round := 0; round < 2; round++ { // the second from the index
			var want, got []seen
			for _, e := range list(a, nil) {
				want = append(want, seenOf(a, &e))
			}
			es := list(b, func(e *Entry) { got = append(got, seenOf(b, e)) })
			if !reflect.DeepEqual(got, want) {
				t.Errorf("lazy %v, round %d: Done saw\n%+v\nwant\n%+v", lazy, round, got, want)
			}
			if !slices.IsSortedFunc(got, func(x, y seen) int { return strings.Compare(x.ID, y.ID) }) {
				t.Errorf("lazy %v: Done out of order: %+v", lazy, got)
			}
			for _, e := range es {
				if e.Manifest != nil || e.Sum() != nil || e.Err != nil || e.Partial {
					t.Errorf("lazy %v: entry %s kept after Done: %+v", lazy, e.ID, e)
				}
			}
			if ia, ib := indexEntries(t, a), indexEntries(t, b); !reflect.DeepEqual(ia, ib) {
				t.Errorf("lazy %v, round %d: the index written as the listing went differs:\n%+v\n%+v", lazy, round, ib, ia)
			}
		}
		before, err := os.Stat(New(b).indexPath())
		if err != nil {
			t.Fatal(err)
		}
		list(b, func(*Entry) {})
		if after, err := os.Stat(New(b).indexPath()); err != nil || !os.SameFile(before, after) {
			t.Errorf("lazy %v: index rewritten though nothing changed: %v", lazy, err)
		}
		// A change in the middle of the folder: the records before it
		// come from the old index, the change and the rest as read.
		for _, dir := range []string{a, b} {
			writeJob(t, New(dir), "j21", strings.Replace(strings.Replace(validJob, `"a"`, `"j21"`, 1), `"job_id"`, `"status": "CANCELED", "job_id"`, 1))
		}
		time.Sleep(indexStable + 100*time.Millisecond)
		list(a, nil)
		list(b, func(*Entry) {})
		ib := indexEntries(t, b)
		if ia := indexEntries(t, a); !reflect.DeepEqual(ia, ib) {
			t.Errorf("lazy %v: after a change, the index differs:\n%+v\n%+v", lazy, ib, ia)
		}
		if i := slices.IndexFunc(ib, func(e indexEntry) bool { return e.Sum.JobID == "j21" }); i < 0 || ib[i].Sum.Status != "CANCELED" {
			t.Errorf("lazy %v: the change is not in the index: %+v", lazy, ib)
		}
	}
}

// A temporary index file a killed writer left behind is removed by the
// next index written; one as young as a writer's in progress is kept.
func TestIndexWriteSweepsStaleTemps(t *testing.T) {
	dir := t.TempDir()
	makeMixedFolder(t, dir)
	idx := filepath.Join(dir, IndexDir)
	if err := os.MkdirAll(idx, 0o700); err != nil {
		t.Fatal(err)
	}
	old, fresh := filepath.Join(idx, "jobs.tmp-111"), filepath.Join(idx, "jobs.tmp-222")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte("half an index"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	then := time.Now().Add(-2 * staleIndexTemp)
	if err := os.Chtimes(old, then, then); err != nil {
		t.Fatal(err)
	}
	time.Sleep(indexStable + 100*time.Millisecond) // files this new are not indexed
	if _, err := New(dir).ListSummaries(true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, IndexFile)); err != nil {
		t.Fatalf("no index written: %v", err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("stale temp %s still there (%v)", old, err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a writer's temp in progress was removed: %v", err)
	}
}
