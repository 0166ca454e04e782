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
	id, err := d.store.Place(bare)
	if errors.Is(err, jobstore.ErrIncomplete) && !atStart {
		d.log.Debug("manifest still being written", "file", filepath.Base(bare))
		return
	}
	if err != nil {
		d.reportInvalid(filepath.Base(bare), err)
		return
	}
	d.clearInvalid(filepath.Base(bare)) // reported when it could not be placed
	d.log.Info("placed manifest", "job_id", id, "from", filepath.Base(bare))
	d.mu.Lock()
	d.placed[id] = time.Now()
	d.mu.Unlock()
	d.watchJob(id)
	if !d.consider(id, false, arrived) {
		// No run's first history append will make the move durable.
		if err := d.store.SettlePlaced(id); err != nil {
			d.logErr(id, codes.Place, err)
		}
	}
}
