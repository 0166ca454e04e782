package history

import (
	"os"
	"reflect"
	"testing"
)

// pageOfAll is the page ReadAfter is to give: ReadAll, then a filter.
func pageOfAll(all []Record, after int64, limit int) ([]Record, bool) {
	items := []Record{}
	next := after
	for _, r := range all {
		if r.Seq > after && len(items) < limit {
			items = append(items, r)
			next = r.Seq
		}
	}
	return items, len(all) > 0 && all[len(all)-1].Seq > next
}

// pageHistory appends n records to dir, in units of one to three, the
// log rotating past maxBytes (negative: never).
func pageHistory(t *testing.T, dir string, n int, maxBytes int64) {
	t.Helper()
	l, _, err := OpenWith(dir, Options{MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < n; {
		k := min(1+i%3, n-i)
		unit := make([]*Record, k)
		for j := range unit {
			unit[j] = benchRecord(i + j)
		}
		if err := l.AppendBatch(unit); err != nil {
			t.Fatal(err)
		}
		i += k
	}
}

// TestReadAfterIsReadAllFiltered: for many (after, limit) pairs, on
// histories with and without archives, empty or missing, ending in an
// unfinished unit or a torn line, ReadAfter gives what ReadAll and a
// filter give; and so with the binary search's window at its smallest.
func TestReadAfterIsReadAllFiltered(t *testing.T) {
	type hist struct {
		name string
		make func(t *testing.T, dir string)
	}
	hists := []hist{
		{"missing", func(t *testing.T, dir string) {}},
		{"empty", func(t *testing.T, dir string) {
			if err := os.WriteFile(Path(dir), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"one", func(t *testing.T, dir string) { pageHistory(t, dir, 1, -1) }},
		{"active", func(t *testing.T, dir string) { pageHistory(t, dir, 60, -1) }},
		{"archives", func(t *testing.T, dir string) { pageHistory(t, dir, 60, 6000) }},
		{"only-archives", func(t *testing.T, dir string) {
			pageHistory(t, dir, 60, 6000)
			if err := os.Remove(Path(dir)); err != nil {
				t.Fatal(err)
			}
			idx, err := readIndex(dir)
			if err != nil || len(idx.Archives) < 3 {
				t.Fatalf("want archives, have %v (%v)", idx, err)
			}
		}},
		{"unfinished-unit", func(t *testing.T, dir string) {
			pageHistory(t, dir, 59, -1)
			l, _, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			before := l.Size()
			if err := l.AppendBatch([]*Record{benchRecord(0), benchRecord(1), benchRecord(2)}); err != nil {
				t.Fatal(err)
			}
			l.Close()
			// Cut the unit's last record: its first two are More.
			data, _ := os.ReadFile(Path(dir))
			lines := 0
			for i := before; i < int64(len(data)); i++ {
				if data[i] == '\n' {
					if lines++; lines == 2 {
						if err := os.Truncate(Path(dir), i+1); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		}},
		{"torn-line", func(t *testing.T, dir string) {
			pageHistory(t, dir, 60, 6000)
			f, err := os.OpenFile(Path(dir), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(`{"hash":"ab`); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}},
	}
	limits := []int{0, 1, 2, 3, 7, 500}
	for _, h := range hists {
		t.Run(h.name, func(t *testing.T) {
			dir := t.TempDir()
			h.make(t, dir)
			all, err := ReadAll(dir)
			if err != nil {
				t.Fatal(err)
			}
			n := int64(len(all))
			for _, window := range []int64{pageScan, 64} {
				defer func(w int64) { pageScan = w }(pageScan)
				pageScan = window
				for after := int64(-3); after <= n+2; after++ {
					for _, limit := range limits {
						got, more, err := ReadAfter(dir, after, limit)
						if err != nil {
							t.Fatalf("ReadAfter(%d, %d): %v", after, limit, err)
						}
						want, wantMore := pageOfAll(all, after, limit)
						if !reflect.DeepEqual(got, want) || more != wantMore {
							t.Fatalf("window %d: ReadAfter(%d, %d) = %d records (%v), more %v; want %d records (%v), more %v",
								window, after, limit, len(got), seqs(got), more, len(want), seqs(want), wantMore)
						}
					}
				}
			}
		})
	}
}

func seqs(rs []Record) []int64 {
	out := make([]int64, len(rs))
	for i := range rs {
		out[i] = rs[i].Seq
	}
	return out
}

// TestReadAfterReadsThePage: a page of a long history reads about its own
// lines, wherever it starts: not the file.
func TestReadAfterReadsThePage(t *testing.T) {
	dir := t.TempDir()
	const n = 20000
	seedHistory(t, dir, nil, n)
	lines := 0
	pageLine = func() { lines++ }
	defer func() { pageLine = nil }()
	for _, after := range []int64{-1, 0, 1, n / 3, n / 2, n - 150, n - 2, n - 1, n + 5} {
		lines = 0
		recs, more, err := ReadAfter(dir, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		want := min(100, max(0, n-1-int(max(after, -1))))
		if len(recs) != want || (want > 0 && recs[0].Seq != max(after, -1)+1) || more != (max(after, -1)+int64(want) < n-1) {
			t.Fatalf("after %d: %d records from %v, more %v", after, len(recs), seqs(recs[:min(1, len(recs))]), more)
		}
		// The page, the line after it, the search's probes (log2 of
		// the file's size) and its window's lines (about 600 bytes each).
		if bound := 100 + 1 + 30 + int(pageScan)/500; lines > bound {
			t.Errorf("after %d: %d lines read, want at most %d (of %d)", after, lines, bound, n)
		}
	}
}

func BenchmarkHistoryPage(b *testing.B) {
	dir := b.TempDir()
	const n = 50000
	seedHistory(b, dir, nil, n)
	b.Run("ReadAll", func(b *testing.B) {
		for range b.N {
			all, err := ReadAll(dir)
			if err != nil || len(all) != n {
				b.Fatal(len(all), err)
			}
		}
	})
	b.Run("ReadAfter", func(b *testing.B) {
		for range b.N {
			recs, _, err := ReadAfter(dir, n/2, 100)
			if err != nil || len(recs) != 100 {
				b.Fatal(len(recs), err)
			}
		}
	})
}
