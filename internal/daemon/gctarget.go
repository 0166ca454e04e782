package daemon

import (
	"os"
	"runtime/debug"
	"sync"
)

// runGCPercent is logistd's GC target while it runs jobs, unless the
// operator set GOGC. Jobs start and end in waves (--max-parallel of them
// whose agents return together), and every wave allocates fast over a
// small live heap: at the default 100, 1,000 one-second jobs at
// --max-parallel 200 took some 40 collections, whose assists and mark
// phases stretch the commits on the next agents' path; at 200, about 23,
// for some 20 MiB more at the peak (docs/performance.md, "1,000 agents at
// --max-parallel 200"). It takes over once the start-up scan is done: the
// start-up keeps the default, and work that holds a whole folder's worth
// of state runs at scanGCPercent (holdScanGC) before and after.
const runGCPercent = 200

// setRunGC makes runGCPercent the process's GC target, unless GOGC (which
// the Go runtime has applied) says otherwise: now, or when the holds in
// place end (they put it back then instead of what they found).
func setRunGC() {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	gcHold.mu.Lock()
	defer gcHold.mu.Unlock()
	if gcHold.n > 0 {
		gcHold.prev = runGCPercent
		return
	}
	debug.SetGCPercent(runGCPercent)
}

// scanGCPercent is the GC target while start-up work that holds a whole
// folder's worth of state runs (the scans, the views check after the
// first one, the late check): such work makes garbage fast over a large
// live heap, and the default target would let the heap grow to twice it
// (docs/performance.md, "Start-up and listing at 50,000 jobs"). A lower
// target set by the operator (GOGC) is kept.
const scanGCPercent = 50

// scanMemoryLimit is the Go runtime's soft memory limit under the same
// holds, unless the operator set GOMEMLIMIT. The GC target alone bounds
// the heap, not what the process keeps from the kernel: a first start at
// 50,000 jobs peaked at 100 MiB resident through its late check (a
// 42 MiB live heap, its 64 MiB goal, freed pages not yet handed back, and
// the binary's own 30 MiB). Near the limit the runtime collects sooner
// and returns freed pages at once: 82 MiB at the peak (docs/performance.md,
// "Memory through the start-up"). A folder whose live heap outgrows it
// costs more GC (the runtime caps that at half the CPU), never a failure:
// the limit is soft.
const scanMemoryLimit = 64 << 20

// gcHold keeps the GC target at scanGCPercent (and the memory limit at
// scanMemoryLimit) while anyone holds it. Both are the process's: holds
// from several goroutines (a scan, the late check, and in tests several
// daemons) are counted, and the last release puts back what the first
// hold found.
var gcHold struct {
	mu       sync.Mutex
	n        int
	prev     int
	prevLim  int64
	limitSet bool
}

// holdScanGC lowers the GC target for the length of some start-up work;
// the caller calls the function it returns when done.
func holdScanGC() (release func()) {
	gcHold.mu.Lock()
	if gcHold.n == 0 {
		gcHold.prev = debug.SetGCPercent(scanGCPercent)
		if gcHold.prev < scanGCPercent {
			debug.SetGCPercent(gcHold.prev) // the operator's is lower, or off
		}
		if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
			gcHold.prevLim, gcHold.limitSet = debug.SetMemoryLimit(scanMemoryLimit), true
		}
	}
	gcHold.n++
	gcHold.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			gcHold.mu.Lock()
			gcHold.n--
			if gcHold.n == 0 {
				debug.SetGCPercent(gcHold.prev)
				if gcHold.limitSet {
					debug.SetMemoryLimit(gcHold.prevLim)
					gcHold.limitSet = false
				}
			}
			gcHold.mu.Unlock()
		})
	}
}
