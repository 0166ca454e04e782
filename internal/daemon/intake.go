package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// scan looks at the whole folder: places bare manifests, reports invalid
// ones, starts runnable jobs, and forgets what is no longer there (a
// rescan after the watcher lost events). Scans run one at a time; the
// event loop goes on beside them (docs/performance.md, "Readiness"): a
// job both see is handed to the scheduler twice, which runs it once, and
// what an event read while a scan ran is newer than the scan's summary,
// which is then not noted over it (fresh). It returns the jobs it found
// not running (their views are checked after the first scan: views.go).
func (d *Daemon) scan() (stopped []string) {
	d.scanMu.Lock()
	defer d.scanMu.Unlock()
	// A scan of 50,000 jobs makes garbage fast over a large live heap: a
	// tighter GC target for its length keeps the peak near goal 5's 100
	// MiB (130 MiB at the default, measured; docs/performance.md), for
	// little CPU.
	defer holdScanGC()()
	d.mu.Lock()
	d.fresh = map[string]bool{}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.fresh = nil
		d.mu.Unlock()
	}()
	// Summaries: a finished job is only counted, so most manifests need
	// not be read; the ones the daemon acts on are loaded in full, and
	// handed over as soon as they are read (liveFound), before the rest.
	// One CPU is left to the event loop's pickups. Every entry is then
	// taken in id order as the listing goes (noted), which keeps nothing
	// of a finished job's manifest: no summary of 50,000 jobs is held.
	var liveMu sync.Mutex
	invalid := map[string]bool{}
	found := func(e *jobstore.Entry) {
		if !d.liveFound(e) {
			liveMu.Lock()
			invalid[e.ID] = true
			liveMu.Unlock()
		}
	}
	var (
		names     scanned
		unchecked bool
		view      manifest.Manifest // one view serves every finished job
	)
	noted := func(e *jobstore.Entry) {
		if e.Unplaced != "" {
			// liveFound has placed it, or reported it.
			base := filepath.Base(e.Unplaced)
			names.bare[base] = true
			if _, err := os.Lstat(e.Unplaced); err == nil {
				liveMu.Lock()
				invalid[base] = true // not placed: reported
				liveMu.Unlock()
			}
			return
		}
		names.jobs = append(names.jobs, e.ID)
		if e.Live() {
			return // liveFound has seen to it
		}
		if d.isFresh(e.ID) {
			return // an event read it after the scan did
		}
		if e.Err != nil {
			liveMu.Lock()
			invalid[e.ID] = true
			liveMu.Unlock()
			d.reportInvalid(e.ID, e.Err)
			return
		}
		unchecked = unchecked || e.Unchecked
		d.clearInvalid(e.ID)
		d.note(e.ID, e.ViewInto(&view))
		stopped = append(stopped, e.ID)
	}
	names.bare = map[string]bool{}
	_, err := d.store.ScanSummariesWith(jobstore.Scan{Ctx: d.scanCtx, Workers: max(1, runtime.GOMAXPROCS(0)-1),
		Each: d.watchDir, Found: found, Done: noted})
	if testHookScanned != nil {
		testHookScanned(d)
	}
	if d.scanCtx != nil && d.scanCtx.Err() != nil {
		return nil // stopping: what the scan read is of no more use
	}
	if err != nil {
		d.logErr("", codes.Scan, err)
		return nil
	}
	d.retain(&names, invalid)
	if unchecked {
		d.checks.pending.Store(true)
		if d.ready.Load() {
			d.checkLater()
		}
	}
	return stopped
}

// liveFound acts on what a scan found to place, to run or to schedule
// (Entry.Live), from the scan's goroutines, as soon as it is read. It
// reports false for a job it found invalid.
func (d *Daemon) liveFound(e *jobstore.Entry) bool {
	if e.Unplaced != "" {
		d.place(e.Unplaced, true, time.Time{})
		return true
	}
	if e.Leftover != "" {
		d.place(e.Leftover, true, time.Time{}) // removes it: its job is its folder's entry
		return true
	}
	if d.isFresh(e.ID) {
		return true
	}
	l := e.Loaded()
	switch {
	case l != nil:
	case e.Manifest != nil:
		l = &jobstore.Loaded{M: e.Manifest} // no read to hand on: the run reads the file
	default:
		// From the index: the daemon acts on the whole manifest.
		var err error
		if l, err = d.store.LoadFile(e.ID); err != nil {
			d.reportInvalid(e.ID, err)
			return false
		}
	}
	d.clearInvalid(e.ID)
	d.note(e.ID, l.M)
	if l.M.Status.Active() {
		// The whole manifest, just read and checked: the run starts
		// from that read, not from another (NudgeLoaded).
		d.sched.NudgeLoaded(e.ID, l)
	}
	return true
}

// isFresh reports whether an event read job id while the running scan
// did: the scan's older read is not noted over it.
func (d *Daemon) isFresh(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fresh[id]
}

// markFresh notes, while a scan runs, that job id was just read outside it.
func (d *Daemon) markFresh(id string) {
	d.mu.Lock()
	if d.fresh != nil {
		d.fresh[id] = true
	}
	d.mu.Unlock()
}

// scanned is what a scan listed: its job folders that hold a manifest,
// in id order (the listing's), and the file names of the bare manifests.
// A sorted slice, not a map: 50,000 names are 16 bytes each.
type scanned struct {
	jobs []string
	bare map[string]bool
}

func (n *scanned) job(id string) bool {
	_, ok := slices.BinarySearch(n.jobs, id)
	return ok
}

// retain forgets the jobs and invalid manifests the daemon counts that a
// scan did not find (names, nil when the folder is gone; invalid: what
// the scan reported invalid). A job whose folder appeared since the scan
// read the folder is kept, and so is an invalid manifest reported since
// (not listed, and still there).
func (d *Daemon) retain(names *scanned, invalid map[string]bool) {
	for _, id := range d.metrics.Jobs() {
		if names == nil || !names.job(id) {
			if _, err := os.Stat(filepath.Join(d.store.JobDir(id), jobstore.ManifestFile)); err != nil {
				d.gone(id)
			}
		}
	}
	d.mu.Lock()
	for k := range d.invalid {
		if invalid[k] || d.fresh[k] {
			continue // reported by the scan, or by an event since
		}
		if names != nil && !names.job(k) && !names.bare[k] {
			if _, err := os.Lstat(filepath.Join(d.store.Dir, k)); err == nil {
				continue
			}
		}
		delete(d.invalid, k)
	}
	d.metrics.SetInvalid(len(d.invalid))
	d.mu.Unlock()
}

// gone forgets a job folder or manifest file that left the jobs folder, or
// a folder that no longer holds a manifest.
func (d *Daemon) gone(name string) {
	d.store.ForgetPlacement(name) // its bare name goes with it
	// Entries of its files made ahead of a start that never came: they
	// name nothing now, and would be kept until the daemon's end.
	atomicfile.Forget(d.store.JobDir(name))
	d.clearInvalid(name)
	d.metrics.Forget(name)
	d.relay.forget(name)
	d.mu.Lock()
	delete(d.seen, name)
	delete(d.arrivals, name)
	delete(d.costWarned, name) // a job made again under this name is warned again
	d.mu.Unlock()
}

// consider looks at one job after a change. From a watcher event, a
// manifest that is not yet complete JSON is being written: wait for the
// next write instead of reporting it. arrived is when the job's folder
// or file came into the jobs folder, if known (handOver). It reports
// whether the job was handed to the scheduler to run. pre, if not nil, is
// the manifest file as a placement just read it (not read again).
func (d *Daemon) consider(id string, fromEvent bool, arrived time.Time, pre *jobstore.FileRead) (runs bool) {
	d.markFresh(id)
	l, err := d.store.LoadFrom(id, pre)
	if err != nil {
		if errors.Is(err, jobstore.ErrNotFound) {
			// A folder whose name cannot be a job id (control characters,
			// '..', ...) is reported as the scan reports it, not ignored.
			if ierr := manifest.ValidID(id); ierr != nil {
				if _, serr := os.Stat(filepath.Join(d.store.JobDir(id), jobstore.ManifestFile)); serr == nil {
					d.reportInvalid(id, err)
				}
			}
			return false
		}
		if fromEvent {
			// One past the size logist reads is not being written: it
			// is too large, and the next write will not make it less so.
			if data, rerr := d.store.ReadManifest(id); rerr == nil && len(data) <= manifest.MaxSize && manifest.Incomplete(data) {
				return false
			}
		}
		d.reportInvalid(id, err)
		return false
	}
	d.clearInvalid(id)
	d.note(id, l.M)
	return d.handOver(id, l, arrived)
}

// note records what the daemon knows of a job it has just read: its status
// for the gauges, since when it waits, when it was first seen runnable (for
// pickup latency), and its schedule if it is a template.
func (d *Daemon) note(id string, m *manifest.Manifest) {
	d.metrics.Seen(id, m.Status, m.Schedule != nil)
	if m.Status.Waiting() {
		if t, err := time.Parse(time.RFC3339Nano, m.Run.UpdatedAt); err == nil {
			d.metrics.WaitingSince(id, t)
		}
	}
	d.mu.Lock()
	if m.Status == lifecycle.Pending && m.Schedule == nil {
		if _, ok := d.seen[id]; !ok {
			d.seen[id] = time.Now()
		}
	}
	d.mu.Unlock()
	if m.Status.Active() || m.Schedule != nil {
		d.warnCost(id, m)
	}
	if d.cron != nil && !d.opts.Once {
		d.cron.Sync(id, m)
	}
}

// warnCost logs, once per job and text, that the job's calls cannot all be
// priced (agent.CostWarning): its cost would stay 0 and its budget never
// stop it, and the steward learns that at intake, not from the bill.
func (d *Daemon) warnCost(id string, m *manifest.Manifest) {
	w := agent.CostWarning(m)
	d.mu.Lock()
	same := d.costWarned[id] == w
	d.costWarned[id] = w
	d.mu.Unlock()
	if w == "" || same {
		return
	}
	joblog.Log(d.log, w, joblog.Problem{Job: id, Status: string(m.Status), Code: codes.CostUnknown,
		Checkpoint: m.Run.CheckpointID, Phase: m.Phase()})
}

// reportInvalid logs an invalid manifest (once per reason) and counts it
// instead of its job: id is the job, or the file name of a manifest not
// placed.
func (d *Daemon) reportInvalid(id string, err error) {
	if errors.Is(err, fs.ErrPermission) {
		d.reportDenied(id, err)
		return
	}
	d.metrics.Forget(id)
	d.mu.Lock()
	same := d.invalid[id] == err.Error()
	d.invalid[id] = err.Error()
	d.metrics.SetInvalid(len(d.invalid))
	d.mu.Unlock()
	if !same {
		joblog.Log(d.log, "invalid manifest", joblog.Problem{Job: id, Status: "INVALID", Code: codes.ManifestInvalid}, "err", err.Error())
	}
}

func (d *Daemon) clearInvalid(id string) {
	d.mu.Lock()
	denied := d.denied[id] != ""
	delete(d.denied, id)
	delete(d.invalid, id)
	d.metrics.SetInvalid(len(d.invalid))
	d.mu.Unlock()
	if denied {
		if err := d.store.ClearStall(id); err != nil {
			d.log.Warn("cannot clear the job's stall note", "job_id", id, "err", err.Error())
		}
		d.metrics.Stalled(id, "")
	}
}

// reportDenied reports a job whose manifest the daemon may not read (a
// file another user wrote, a mode changed by hand): not an invalid
// manifest but a storage problem, STORAGE_DENIED, logged once per reason,
// counted among the stalled jobs and noted for logist status with what to
// repair. The job runs once its manifest is readable again: a chown or
// chmod of job.json wakes the daemon (watch.go), as a restart does.
func (d *Daemon) reportDenied(id string, err error) {
	fix := deniedFix(d.store.JobDir(id))
	reason := err.Error() + "; " + fix
	d.mu.Lock()
	same := d.denied[id] == reason
	d.denied[id] = reason
	_, wasInvalid := d.invalid[id]
	delete(d.invalid, id)
	d.metrics.SetInvalid(len(d.invalid))
	d.mu.Unlock()
	if wasInvalid {
		d.metrics.Forget(id)
	}
	d.metrics.Stalled(id, codes.StorageDenied)
	if same {
		return
	}
	joblog.Log(d.log, "cannot read the job's manifest", joblog.Problem{Job: id, Status: "UNREADABLE", Code: codes.StorageDenied},
		"err", err.Error(), "fix", fix)
	since := time.Now().UTC().Format(time.RFC3339)
	if prev, ok := d.store.ReadStall(id); ok && prev.Code == codes.StorageDenied {
		since = prev.Since
	}
	if werr := d.store.WriteStall(id, jobstore.Stall{Code: codes.StorageDenied, Reason: reason, Since: since, Refused: true}); werr != nil {
		d.log.Warn("cannot note the job's stall", "job_id", id, "err", werr.Error())
	}
}

// deniedFix says who owns a job's manifest, who the daemon runs as, and
// how to give the file back to the daemon.
func deniedFix(jobDir string) string {
	file := filepath.Join(jobDir, jobstore.ManifestFile)
	me := jobstore.UserName(uint32(os.Geteuid()))
	fi, err := os.Stat(file)
	if err != nil {
		return fmt.Sprintf("logistd runs as %s: give the job's files back to it (chown -R %s %s)", me, me, jobDir)
	}
	owner := "?"
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		owner = jobstore.UserName(st.Uid)
	}
	return fmt.Sprintf("%s is %s's with mode %04o, and logistd runs as %s: give the job's files back to it "+
		"(chown -R %s %s; steer jobs as the jobs folder's owner: sudo -u %s logist ...); the job runs once it can be read",
		file, owner, fi.Mode().Perm(), me, me, jobDir, me)
}
