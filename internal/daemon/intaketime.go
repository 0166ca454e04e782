package daemon

// The intake latency: how long the daemon itself takes from a job's
// arrival in the jobs folder to its run beginning (logistd_intake_latency_seconds,
// docs/operations.md). The arrival is the folder's or file's change time,
// which the kernel sets when it is made or renamed in, so the figure
// includes the events' wait in the watcher's queue and for the event loop,
// which a time stamped by the loop would not see (docs/performance.md,
// goal 6, "The first wave's intake").

import (
	"os"
	"syscall"
	"time"

	"github.com/logist/logist/internal/jobstore"
)

// arrival is when fi's folder or file arrived in the jobs folder: its
// change time. A time in the future (a clock step) counts as now; zero
// when the file system gives none.
func arrival(fi os.FileInfo) time.Time {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}
	}
	t := time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	if now := time.Now(); t.After(now) {
		return now
	}
	return t
}

// handOver hands job id, whose manifest l was just read and checked, to
// the scheduler, which starts its run from that read. The time it arrived,
// if known (not zero), is kept for its run's beginning (runBegun). It
// reports whether the job runs.
func (d *Daemon) handOver(id string, l *jobstore.Loaded, arrived time.Time) bool {
	if arrived.IsZero() {
		return d.sched.NudgeLoaded(id, l)
	}
	d.mu.Lock()
	d.arrivals[id] = arrived // before the run can begin
	d.mu.Unlock()
	if d.sched.NudgeLoaded(id, l) {
		return true
	}
	d.mu.Lock()
	delete(d.arrivals, id)
	d.mu.Unlock()
	return false
}

// runBegun (runner.Scheduler.OnRun) observes the intake latency of a job
// whose arrival was noted.
func (d *Daemon) runBegun(id string) {
	if el, ok := d.takeSince(d.arrivals, id); ok {
		d.metrics.Intake(el)
	}
}

// takeSince removes id's time from m (the daemon's, under d.mu) and says
// how long ago it was: the pickup's and the intake's latencies alike.
func (d *Daemon) takeSince(m map[string]time.Time, id string) (time.Duration, bool) {
	d.mu.Lock()
	t, ok := m[id]
	delete(m, id)
	d.mu.Unlock()
	if !ok {
		return 0, false
	}
	return time.Since(t), true
}
