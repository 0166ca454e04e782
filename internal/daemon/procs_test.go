package daemon

import (
	"os"
	"runtime"
	"testing"

	"github.com/logist/logist/internal/runner"
)

// Once the start-up scan is done logistd runs on runProcsPerCPU of Go's
// processors per CPU, unless the operator's GOMAXPROCS (which the runtime
// applied) says otherwise. Not parallel: GOMAXPROCS is the process's.
func TestRunProcsPerCPUUnlessGOMAXPROCS(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	t.Setenv("GOMAXPROCS", "") // restored after the test
	if err := os.Unsetenv("GOMAXPROCS"); err != nil {
		t.Fatal(err)
	}

	runtime.GOMAXPROCS(runner.CPUs())
	setRunProcs()
	if got, want := runtime.GOMAXPROCS(0), runProcsPerCPU*runner.CPUs(); got != want {
		t.Errorf("GOMAXPROCS after setRunProcs = %d, want %d × %d CPUs = %d", got, runProcsPerCPU, runner.CPUs(), want)
	}

	// Never lowered: a process that already runs more keeps them.
	runtime.GOMAXPROCS(8 * runner.CPUs())
	setRunProcs()
	if got, want := runtime.GOMAXPROCS(0), 8*runner.CPUs(); got != want {
		t.Errorf("GOMAXPROCS at %d lowered to %d", want, got)
	}

	runtime.GOMAXPROCS(1)
	t.Setenv("GOMAXPROCS", "1")
	setRunProcs()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS with GOMAXPROCS=1 = %d, want the operator's 1", got)
	}
}
