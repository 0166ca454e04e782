package jobtx

import (
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/jobstore"
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

// BenchmarkPickup is a pickup's manifest work from the intake's load to
// the run's first transaction begun, on a new job (a new store each time,
// as nothing was checked before): with the intake's read handed on
// (Kept.Start), and read, hashed and decoded again by Begin (reread), as
// before it was handed on. Reported with the CPU time per pickup.
func BenchmarkPickup(b *testing.B) {
	for _, handOn := range []bool{true, false} {
		name := "handed-on"
		if !handOn {
			name = "reread"
		}
		b.Run(name, func(b *testing.B) {
			env := newJob(b)
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				env.Store = jobstore.New(env.Store.Dir)
				l, err := env.Store.LoadFile("j")
				if err != nil {
					b.Fatal(err)
				}
				var keep Kept
				if handOn {
					keep.Start(l)
				}
				tx, err := Begin(env, "j", &keep)
				if err != nil {
					b.Fatal(err)
				}
				tx.Close()
				keep.Close()
			}
			b.StopTimer()
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := syscall.TimevalToNsec(ru1.Stime) + syscall.TimevalToNsec(ru1.Utime) -
				syscall.TimevalToNsec(ru0.Stime) - syscall.TimevalToNsec(ru0.Utime)
			b.ReportMetric(float64(cpu)/1e3/float64(b.N), "cpu-us/op")
		})
	}
}
