package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// scan looks at the whole folder: places bare manifests, reports invalid
// ones, starts runnable jobs, and forgets what is no longer there (a
// rescan after the watcher lost events).
func (d *Daemon) scan() {
	// Summaries: a finished job is only counted, so most manifests need
	// not be read; the ones the daemon acts on are loaded in full.
	entries, err := d.store.ScanSummaries()
	if err != nil {
		d.logErr("", codes.Scan, err)
		return
	}
	unchecked := false
	jobs, invalid := map[string]bool{}, map[string]bool{}
	for _, e := range entries {
		if e.Unplaced != "" {
			d.place(e.Unplaced, true)
			if _, err := os.Lstat(e.Unplaced); err == nil {
				invalid[filepath.Base(e.Unplaced)] = true // not placed: reported
			}
			continue
		}
		jobs[e.ID] = true
		d.watchJob(e.ID)
		if e.Err != nil {
			invalid[e.ID] = true
			d.reportInvalid(e.ID, e.Err)
			continue
		}
		unchecked = unchecked || e.Unchecked
		d.clearInvalid(e.ID)
		m := e.Manifest
		if e.Partial && (e.Sum.Status.Active() || e.Sum.Schedule != nil) {
			if m, err = d.store.Load(e.ID); err != nil {
				invalid[e.ID] = true
				d.reportInvalid(e.ID, err)
				continue
			}
		} else if e.Partial {
			m = e.View() // for this job only: the listing holds summaries
		}
		d.note(e.ID, m)
		if !m.Status.Active() && !d.ready.Load() {
			d.views = append(d.views, e.ID) // the start-up scan's (views.go)
		}
		if m.Status.Active() {
			// m is the whole manifest, just read and checked: the run
			// starts from it, not from another read.
			d.sched.NudgeManifest(e.ID, m)
		}
	}
	d.retain(jobs, invalid)
	if unchecked {
		d.checks.pending.Store(true)
		if d.ready.Load() {
			d.checkLater()
		}
	}
}

// retain forgets the jobs and invalid manifests the daemon counts that a
// scan did not find (jobs: folders holding a manifest; invalid: what the
// scan reported invalid). A job whose folder appeared since the scan read
// the folder is kept.
func (d *Daemon) retain(jobs, invalid map[string]bool) {
	for _, id := range d.metrics.Jobs() {
		if !jobs[id] {
			if _, err := os.Stat(filepath.Join(d.store.JobDir(id), jobstore.ManifestFile)); err != nil {
				d.gone(id)
			}
		}
	}
	d.mu.Lock()
	for k := range d.invalid {
		if !invalid[k] {
			delete(d.invalid, k)
		}
	}
	d.metrics.SetInvalid(len(d.invalid))
	d.mu.Unlock()
}

// gone forgets a job folder or manifest file that left the jobs folder, or
// a folder that no longer holds a manifest.
func (d *Daemon) gone(name string) {
	d.clearInvalid(name)
	d.metrics.Forget(name)
	d.relay.forget(name)
	d.mu.Lock()
	delete(d.seen, name)
	delete(d.costWarned, name) // a job made again under this name is warned again
	d.mu.Unlock()
}

// consider looks at one job after a change. From a watcher event, a
// manifest that is not yet complete JSON is being written: wait for the
// next write instead of reporting it. It reports whether the job was
// handed to the scheduler to run.
func (d *Daemon) consider(id string, fromEvent bool) (runs bool) {
	m, err := d.store.Load(id)
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
			if data, rerr := d.store.ReadManifest(id); rerr == nil && manifest.Incomplete(data) {
				return false
			}
		}
		d.reportInvalid(id, err)
		return false
	}
	d.clearInvalid(id)
	d.note(id, m)
	return d.sched.NudgeManifest(id, m)
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
	delete(d.invalid, id)
	d.metrics.SetInvalid(len(d.invalid))
	d.mu.Unlock()
}
