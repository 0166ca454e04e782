package daemon

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/jobstore"
)

// place moves a bare manifest into its folder. At a scan (atStart) a file
// still incomplete is reported; on a watcher event it is being written and
// its next write brings it back. arrived is the file's arrival (consider).
func (d *Daemon) place(bare string, atStart bool, arrived time.Time) {
	// A scan and an event may both bring the same file: one places it,
	// the other finds it gone and has nothing to say.
	d.placeMu.Lock()
	defer d.placeMu.Unlock()
	if _, err := os.Lstat(bare); errors.Is(err, fs.ErrNotExist) {
		return
	}
	id, placed, err := d.store.Place(bare)
	if errors.Is(err, jobstore.ErrIncomplete) && !atStart {
		d.log.Debug("manifest still being written", "file", filepath.Base(bare))
		return
	}
	if err != nil {
		d.reportInvalid(filepath.Base(bare), err)
		return
	}
	d.clearInvalid(filepath.Base(bare)) // reported when it could not be placed
	if !placed {
		// The second name of job id's manifest that a placement left: a
		// crash's (removed now) or this daemon's (removed when durable).
		// Nothing to place; the job is its folder's.
		if _, err := os.Lstat(bare); err != nil {
			d.log.Info("removed a placement's second name of its job's job.json", "job_id", id, "file", filepath.Base(bare))
		}
		return
	}
	d.log.Info("placed manifest", "job_id", id, "from", filepath.Base(bare))
	d.mu.Lock()
	d.placed[id] = time.Now()
	d.mu.Unlock()
	d.watchJob(id)
	if !d.consider(id, false, arrived) {
		// No run's first history append will make the move durable.
		d.settlePlaced(id)
	}
}

// settlePlaced makes job id's placement durable (jobstore.SettlePlaced)
// if this daemon placed it and no unit of its run has yet: the job does
// not run, or its run waits for a slot or has ended (runner.Scheduler's
// Aside). A bare name the placement left is removed then.
func (d *Daemon) settlePlaced(id string) {
	if err := d.store.SettlePlaced(id); err != nil {
		d.logErr(id, codes.Place, err)
	}
}

// settlePlacements settles the placements whose bare names are still
// there as the daemon stops (jobstore.Placements).
func (d *Daemon) settlePlacements() {
	for _, id := range d.store.Placements() {
		d.settlePlaced(id)
	}
}

// runAside (runner.Scheduler.Aside): a run of job id waits for a slot or
// has ended, so no unit of it will make its placement durable soon.
func (d *Daemon) runAside(id string) {
	if d.store.Placing(id) {
		d.settlePlaced(id)
	}
}
