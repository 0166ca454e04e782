package metrics

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/logist/logist/internal/lifecycle"
)

// The waiting gauges, kept incrementally, agree with a scan of every job
// after each random transition, removal and WaitingSince.
func TestOldestWaitingMatchesScan(t *testing.T) {
	m := New(prometheus.NewRegistry(), "v", "r")
	clock := time.Unix(1700000000, 0)
	m.nowFunc = func() time.Time { clock = clock.Add(time.Second); return clock }
	rng := rand.New(rand.NewSource(1))
	statuses := []lifecycle.Status{lifecycle.Pending, lifecycle.Running, lifecycle.InterventionRequired,
		lifecycle.HaltedCost, lifecycle.HaltedTime, lifecycle.Success}
	want := map[string]time.Time{}
	for step := 0; step < 3000; step++ {
		id := fmt.Sprint("j", rng.Intn(40))
		switch rng.Intn(10) {
		case 0:
			m.Forget(id)
			delete(want, id)
		case 1:
			at := time.Unix(1600000000+int64(rng.Intn(1e6)), 0)
			m.WaitingSince(id, at)
			if _, ok := want[id]; ok {
				want[id] = at
			}
		default:
			to := statuses[rng.Intn(len(statuses))]
			m.JobStatus(id, "", to)
			if !to.Waiting() {
				delete(want, id)
			} else if _, ok := want[id]; !ok {
				want[id] = clock
			}
		}
		var oldest float64
		for _, at := range want {
			if v := float64(at.UnixNano()) / 1e9; oldest == 0 || v < oldest {
				oldest = v
			}
		}
		if got := testutil.ToFloat64(m.oldestWaiting); got != oldest {
			t.Fatalf("step %d: oldest waiting %v, want %v", step, got, oldest)
		}
		if got := testutil.ToFloat64(m.waiting); got != float64(len(want)) {
			t.Fatalf("step %d: waiting %v, want %d", step, got, len(want))
		}
	}
}

// Start-up reports every job's status once; with many jobs waiting, the
// cost per report must not grow with their number.
func BenchmarkJobStatusManyWaiting(b *testing.B) {
	m := New(prometheus.NewRegistry(), "v", "r")
	for i := 0; i < 10000; i++ {
		m.JobStatus(fmt.Sprint("w", i), "", lifecycle.InterventionRequired)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.JobStatus(fmt.Sprint("x", i%1000), "", lifecycle.Success)
	}
}
