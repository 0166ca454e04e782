package daemon

// A collection that is almost due when the last running job ends runs
// then, while no job runs, rather than in the middle of the next job's
// pickup. A pickup that meets a collection shares the CPUs with its mark
// phase and pays its assists: 15 of 600 of scenario 1's pickups did, 3.4
// ms slower at the median (docs/performance.md, "Pickup"), and 2.5 % of
// the drops is where a p99 of 100 is read. The collection would have come
// within the next few jobs anyway: collecting a little early costs a few
// more collections, not more work per one.

import (
	"runtime"
	"runtime/metrics"
	"sync/atomic"
)

// idleGCDue is how far from the last collection's live heap to its goal
// the heap must have grown for an idle collection: three quarters of the
// way. A job allocates a few percent of that; the rest of the way is
// left for the runtime's own trigger, which a pickup then rarely meets.
const idleGCDue = 0.75

// idleGC is set while an idle collection runs: one at a time.
var idleGC atomic.Bool

// collectWhileIdle starts a collection, on a goroutine of its own, if one
// is almost due (gcDue), and reports whether it did. The scheduler calls
// it when its last running job has ended (runner.Scheduler.OnIdle).
func collectWhileIdle() (started bool) {
	if !gcDue(heapNow()) || !idleGC.CompareAndSwap(false, true) {
		return false
	}
	go func() {
		defer idleGC.Store(false)
		runtime.GC()
	}()
	return true
}

// heapNow reads the heap's goal, the live heap the last collection left,
// and what the heap holds now (objects, live or not yet collected).
func heapNow() (goal, live, now uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	for _, x := range s {
		if x.Value.Kind() != metrics.KindUint64 {
			return 0, 0, 0 // not reported by this runtime: never due
		}
	}
	return s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
}

// gcDue reports whether the heap (now) has grown idleGCDue of the way
// from live to goal.
func gcDue(goal, live, now uint64) bool {
	if goal <= live || now <= live {
		return false
	}
	return float64(now-live) >= idleGCDue*float64(goal-live)
}
