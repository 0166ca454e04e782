package daemon

import (
	"runtime/debug"
	"sync/atomic"

	"github.com/logist/logist/internal/jobstore"
)

// The start-up scan summarises finished jobs that the manifest index does
// not cover yet (a first start, a folder copied in) without checking their
// manifests (jobstore.ScanSummaries): checking 50,000 of them was most of
// a first start's CPU, and none of them runs. They are checked here, once
// the daemon is ready (with --once, before it runs anything), by a full
// listing that also indexes them, so later starts and `logist list` find
// them checked. A manifest found invalid then is reported as the scan
// would have reported it. A job is never run from an unchecked manifest:
// running jobs and templates are checked by the scan itself, and every
// transaction reads its manifest in full.

// lateChecks says whether a scan left finished jobs unchecked (pending)
// and whether a check is under way (running; a scan meanwhile makes it go
// round once more).
type lateChecks struct {
	pending, running atomic.Bool
}

// checkLater checks the finished jobs a scan left unchecked, in the
// background.
func (d *Daemon) checkLater() {
	if !d.checks.pending.Load() || !d.checks.running.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer d.checks.running.Store(false)
		for d.checks.pending.Load() {
			d.checkFinished()
		}
	}()
}

// checkFinished lists the folder with every manifest not in the index
// checked in full, and reports the invalid ones.
func (d *Daemon) checkFinished() {
	if !d.checks.pending.Swap(false) {
		return
	}
	// Like the scan, it reads a whole folder (holdScanGC).
	defer holdScanGC()()
	// Each entry is taken as the listing goes (Scan.Done): nothing of
	// 50,000 manifests, their summaries or their errors is held to its end.
	_, err := d.store.ListSummariesWith(jobstore.Scan{Done: func(e *jobstore.Entry) {
		if e.Unplaced == "" && e.Err != nil {
			d.reportInvalid(e.ID, e.Err)
		}
	}})
	if err != nil {
		// The folder is gone or unreadable: its return rescans.
		return
	}
	// The listing's garbage, like the scan's, is handed back at once.
	debug.FreeOSMemory()
}
