package jobtx

import (
	"syscall"
	"testing"
	"time"
)

// BenchmarkCommitUnit is one worker answer's commit (response, recovery
// point, transition, manifest) on a job, with the kernel time per commit:
// the commit's cost apart from the disk's fsync latency.
func BenchmarkCommitUnit(b *testing.B) {
	t := &testing.T{}
	f := newFixture(t)
	var ru0, ru1 syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru0); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var keep Kept
	for i := 0; i < b.N; i++ {
		// The history and lock kept open across transactions, as the
		// engine does.
		tx, err := Begin(f.env, "j", &keep)
		if err != nil {
			b.Fatal(err)
		}
		f.unit(t, tx)
		// Back to the worker's phase so that the next unit is legal.
		tx.M.Status = "RUNNING"
		tx.M.SetPhase("work")
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		tx.Close()
	}
	b.StopTimer()
	keep.Close()
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru1); err != nil {
		b.Fatal(err)
	}
	sys := time.Duration(syscall.TimevalToNsec(ru1.Stime) - syscall.TimevalToNsec(ru0.Stime))
	usr := time.Duration(syscall.TimevalToNsec(ru1.Utime) - syscall.TimevalToNsec(ru0.Utime))
	b.ReportMetric(float64(sys.Microseconds())/float64(b.N), "sys-us/op")
	b.ReportMetric(float64(usr.Microseconds())/float64(b.N), "user-us/op")
}
