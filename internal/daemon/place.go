package daemon

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
)

// incompleteQuiet is how long a bare manifest that is not yet complete
// JSON may go unwritten before a running daemon reports it as a scan
// does: its writer has stopped or died. Until then each write event
// brings it back (place).
var incompleteQuiet = 10 * time.Second

// placeWhenQuiet looks at the bare manifest again, as a scan would (place
// with atStart), once incompleteQuiet has passed without a write event
// for it: one timer a file, reset by each event. A file cut short by its
// writer was never reported while the daemon ran (logist list showed it,
// the log and logistd_invalid_manifests did not).
func (d *Daemon) placeWhenQuiet(bare string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.quiet[bare]; ok {
		t.Reset(incompleteQuiet)
		return
	}
	d.quiet[bare] = time.AfterFunc(incompleteQuiet, func() {
		d.mu.Lock()
		delete(d.quiet, bare)
		d.mu.Unlock()
		if d.scanCtx != nil && d.scanCtx.Err() != nil {
			return // stopping
		}
		d.place(bare, true, time.Time{})
	})
}

// place moves a bare manifest into its folder. At a scan (atStart) a file
// still incomplete is reported; on a watcher event it is being written and
// its next write brings it back. arrived is the file's arrival (consider).
func (d *Daemon) place(bare string, atStart bool, arrived time.Time) {
	// A scan and an event may both bring the same file: one places it,
	// the other finds it gone, or the placement's second name (not
	// placed), and has nothing to say.
	d.placeMu.Lock()
	defer d.placeMu.Unlock()
	if _, err := os.Lstat(bare); errors.Is(err, fs.ErrNotExist) {
		return
	}
	id, placed, read, err := d.store.PlaceRead(bare)
	if errors.Is(err, jobstore.ErrIncomplete) {
		if !atStart {
			d.log.Debug("manifest still being written", "file", filepath.Base(bare))
			d.placeWhenQuiet(bare)
			return
		}
		err = &manifest.Error{File: bare, Reason: "invalid JSON, cut short, and not written to since: not placed: complete it (logistd places it then) or remove it"}
	}
	if err != nil {
		if _, serr := os.Lstat(bare); errors.Is(serr, fs.ErrNotExist) {
			// Gone meanwhile: a placement's second name removed once its
			// folder was durable (off placeMu), or its writer took it back.
			return
		}
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
	if !d.consider(id, false, arrived, read) { // what Place read: not read again
		// No run's first history append will make the move durable.
		d.settlePlaced(id)
	}
}

// settlePlaced makes job id's placement durable (jobstore.SettlePlaced)
// where no unit of a run will soon: the job does not run, its run ended
// before its first unit (runEnded), a steward replaced its job.json while
// it waited for a slot (watch.go), or the daemon stops. A bare name the
// placement left is removed then. A job that waits for a slot keeps its
// bare name until its first unit: settling it sooner would cost its
// folder a second fsync (measured: 1.4 more per job for 300 bare
// manifests at --max-parallel 4).
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

// settleIfPlacing is settlePlaced for a job this daemon placed whose bare
// name is still there (jobstore.Placing); for any other, nothing.
func (d *Daemon) settleIfPlacing(id string) {
	if d.store.Placing(id) {
		d.settlePlaced(id)
	}
}

// runEnded (runner.Scheduler.OnEnd): a run of job id ended; one that
// never reached its first unit (halted while it waited) leaves its
// placement to settle.
func (d *Daemon) runEnded(id string) { d.settleIfPlacing(id) }
