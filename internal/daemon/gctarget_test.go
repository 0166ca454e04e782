package daemon

import (
	"os"
	"runtime/debug"
	"testing"
)

// After the start-up scan logistd runs its jobs at runGCPercent: at once,
// or, under a scan's hold, when the hold ends; unless the operator's GOGC
// (which the runtime applied) says otherwise. Not parallel: the GC target
// is the process's.
func TestRunGCTargetAfterHoldsUnlessGOGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	t.Setenv("GOGC", "") // restored after the test
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	target := func() int {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		return p
	}

	release := holdScanGC()
	setRunGC()
	if got := target(); got != scanGCPercent {
		t.Errorf("GC target under a scan's hold = %d, want the hold's %d", got, scanGCPercent)
	}
	release()
	if got := target(); got != runGCPercent {
		t.Errorf("GC target once the hold ended = %d, want %d", got, runGCPercent)
	}

	debug.SetGCPercent(100)
	setRunGC()
	if got := target(); got != runGCPercent {
		t.Errorf("GC target with no hold = %d, want %d", got, runGCPercent)
	}

	debug.SetGCPercent(100)
	t.Setenv("GOGC", "100")
	setRunGC()
	if got := target(); got != 100 {
		t.Errorf("GC target with GOGC=100 = %d, want the operator's 100", got)
	}
}
