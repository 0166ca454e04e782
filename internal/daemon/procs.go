package daemon

import (
	"os"
	"runtime"

	"github.com/logist/logist/internal/runner"
)

// runProcsPerCPU is how many of Go's processors (GOMAXPROCS) logistd runs
// its jobs on for each CPU it may use, unless the operator set
// GOMAXPROCS. A daemon's work is made of short bursts of CPU between
// blocking system calls (the histories' fsyncs, the folders'), and when
// every processor is busy the runtime hands the processor of each call
// longer than its monitor's 20 µs tick to another thread (a futex wake
// and two context switches), and its monitor (sysmon) then keeps waking
// every 20 µs instead of backing off. With spare processors a blocked
// call's processor is left alone while another is idle, and the monitor
// sleeps longer. At --max-parallel 200 on 2 CPUs (scenario 6), twice as
// many processors as CPUs took 8–10 % less CPU per job and finished the
// 1,000 jobs 3 % sooner; the monitor's share of logistd's CPU fell from
// about 20 % to 13 % (docs/performance.md, "Go's processors per CPU").
// The work sized by the CPUs keeps their number (runner.CPUs): the gate's
// places, a scan's workers.
const runProcsPerCPU = 2

// setRunProcs raises GOMAXPROCS to runProcsPerCPU × the CPUs, unless the
// operator set GOMAXPROCS (which the Go runtime has applied). It is set
// once the start-up scan is done, as the GC target (setRunGC): the scan's
// workers and peak are those measured without it. Setting it stops the
// runtime's own updates of GOMAXPROCS when a container's CPU limit
// changes; a restart reads the new limit.
func setRunProcs() {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return
	}
	if want := runProcsPerCPU * runner.CPUs(); runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
}
