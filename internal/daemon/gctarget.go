package daemon

import (
	"runtime/debug"
	"sync"
)

// scanGCPercent is the GC target while start-up work that holds a whole
// folder's worth of state runs (the scans, the views check after the
// first one, the late check): such work makes garbage fast over a large
// live heap, and the default target would let the heap grow to twice it
// (docs/performance.md, "Start-up and listing at 50,000 jobs"). A lower
// target set by the operator (GOGC) is kept.
const scanGCPercent = 50

// gcHold keeps the GC target at scanGCPercent while anyone holds it. The
// target is the process's: holds from several goroutines (a scan, the
// late check, and in tests several daemons) are counted, and the last
// release puts back what the first hold found.
var gcHold struct {
	mu   sync.Mutex
	n    int
	prev int
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
			}
			gcHold.mu.Unlock()
		})
	}
}
