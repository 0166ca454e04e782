package history

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logist/logist/internal/signing"
)

// benchRecord is a typical response record (about 600 bytes stored).
func benchRecord(i int) *Record {
	n := i / 2
	return &Record{Type: TypeResponse, Interaction: &n, Phase: "work", Role: "worker", Attempt: 1, StateBefore: "RUNNING",
		Response: &Response{Status: StatusSuccess, Action: "COMPLETED", EvidenceFiles: []string{"greet.py", "test_greet.py"},
			Summary:              "Wrote greet.py with greet(name) and its tests; all pass.",
			RawResponse:          `{"action":"COMPLETED","evidence_files":["greet.py","test_greet.py"],"summary_for_supervisor":"Wrote greet.py with greet(name) and its tests; all pass."}`,
			ExecutionTimeSeconds: 12.5, CostUSD: 0.02}}
}

// seedHistory writes n chained, signed records straight into dir's active
// file (no fsync per record: setup only).
func seedHistory(b *testing.B, dir string, signer Signer, n int) {
	b.Helper()
	f, err := os.Create(filepath.Join(dir, FileName))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	prev := GenesisHash
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		rec := benchRecord(i)
		rec.V, rec.Seq, rec.PrevHash = RecordVersion, int64(i), prev
		rec.Time = ts.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano)
		line, hash, err := encodeLine(rec, signer)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		prev = hash
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAppend measures one more durable (fsync'd, signed) append to a
// history that already holds 10, 1,000, 10,000 or 100,000 records: the
// cost is the record's, not the history's, so the four should be alike.
//
//	go test -run '^$' -bench Append -benchtime 200x ./internal/history
func BenchmarkAppend(b *testing.B) {
	key, err := signing.LoadOrCreate(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for _, existing := range []int{10, 1000, 10000, 100000} {
		b.Run(fmt.Sprintf("existing=%d", existing), func(b *testing.B) {
			dir := b.TempDir()
			seedHistory(b, dir, key, existing)
			l, torn, err := OpenWith(dir, Options{Signer: key})
			if err != nil || torn != nil {
				b.Fatalf("open: %v %v", err, torn)
			}
			defer l.Close()
			if l.State().NextSeq != int64(existing) {
				b.Fatalf("seeded %d records, log says %d", existing, l.State().NextSeq)
			}
			fi, _ := os.Stat(l.Path())
			b.ResetTimer()
			for i := range b.N {
				if err := l.Append(benchRecord(existing + i)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(fi.Size())/(1<<20), "MiB-before")
		})
	}
}

// BenchmarkOpen measures opening a history of 1,000, 10,000 or 50,000
// records that an earlier open has marked (mark.go): the cost is that of
// the records after the mark, not of the history, so the three should be
// alike (issue 21's goal 4: <= 10 ms at 50,000 records).
//
//	go test -run '^$' -bench Open -benchtime 20x ./internal/history
func BenchmarkOpen(b *testing.B) {
	for _, existing := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("existing=%d", existing), func(b *testing.B) {
			dir := b.TempDir()
			seedHistory(b, dir, nil, existing)
			first := time.Now()
			l, _, err := OpenWith(dir, Options{})
			if err != nil {
				b.Fatal(err)
			}
			l.Close()
			firstOpen := time.Since(first)
			b.ResetTimer()
			for range b.N {
				l, _, err := OpenWith(dir, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if l.State().NextSeq != int64(existing) {
					b.Fatalf("seeded %d records, log says %d", existing, l.State().NextSeq)
				}
				l.Close()
			}
			b.ReportMetric(float64(firstOpen.Microseconds())/1000, "ms-unmarked-open")
		})
	}
}

// BenchmarkJobHistoryCurrent is the daemon's start-up check of one
// finished job's jobHistory.json (views.go in internal/daemon), done for
// every job that is not running.
func BenchmarkJobHistoryCurrent(b *testing.B) {
	dir := b.TempDir()
	l, _, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 6 {
		if err := l.Append(benchRecord(i)); err != nil {
			b.Fatal(err)
		}
	}
	if err := WriteJobHistory(dir, "j", "", ""); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if ok, err := JobHistoryCurrent(dir); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
