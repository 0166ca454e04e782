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

// A scan's hold sets the soft memory limit, unless the operator's
// GOMEMLIMIT says otherwise, and its end puts back what it found. Not
// parallel: the limit is the process's.
func TestScanHoldSetsTheMemoryLimitUnlessGOMEMLIMIT(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	t.Setenv("GOMEMLIMIT", "") // restored after the test
	if err := os.Unsetenv("GOMEMLIMIT"); err != nil {
		t.Fatal(err)
	}
	const before = 1 << 40
	debug.SetMemoryLimit(before)
	release := holdScanGC()
	inner := holdScanGC()
	if got := debug.SetMemoryLimit(-1); got != scanMemoryLimit {
		t.Errorf("memory limit under a scan's hold = %d, want %d", got, scanMemoryLimit)
	}
	inner()
	if got := debug.SetMemoryLimit(-1); got != scanMemoryLimit {
		t.Errorf("memory limit with one hold left = %d, want %d", got, scanMemoryLimit)
	}
	release()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("memory limit once the holds ended = %d, want %d", got, before)
	}

	t.Setenv("GOMEMLIMIT", "1GiB")
	release = holdScanGC()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("memory limit under a hold with GOMEMLIMIT set = %d, want the operator's %d", got, before)
	}
	release()
}
