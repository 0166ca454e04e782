package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/steward"
)

// rootPoll is how often the daemon checks that the jobs folder is still the
// one it serves (a removal is not always reported by the watcher: the
// daemon's own lock file inside keeps the folder's inode alive), and, once
// it is gone, looks for it to come back.
const rootPoll = 200 * time.Millisecond

// watchStewardEvents starts counting steward commands from now on.
func (d *Daemon) watchStewardEvents() {
	dir := filepath.Join(d.store.Dir, signing.Dir)
	if fi, err := os.Stat(filepath.Join(dir, steward.EventsFile)); err == nil {
		d.stewardOff = fi.Size()
	}
	if d.watcher != nil {
		if err := d.watcher.Add(dir); err != nil {
			d.log.Warn("cannot watch steward events; steward command metrics stay at 0", "err", err.Error())
		}
	}
}

func (d *Daemon) readStewardEvents() {
	d.mu.Lock()
	defer d.mu.Unlock()
	evs, off := steward.ReadEvents(filepath.Join(d.store.Dir, signing.Dir, steward.EventsFile), d.stewardOff)
	d.stewardOff = off
	for _, e := range evs {
		d.metrics.Steward(e.Command, e.Result)
	}
}

// watchJob adds a job folder to the watcher (once), so a steward's
// change to its manifest is heard.
func (d *Daemon) watchJob(id string) { d.watchDir(id, d.store.JobDir(id)) }

// watchDir is watchJob with the folder's path (JobDir) at hand: the
// scan's, which the watcher then keeps rather than a copy per job.
func (d *Daemon) watchDir(id, dir string) {
	if d.watcher == nil {
		return
	}
	d.mu.Lock()
	if d.watched[id] {
		d.mu.Unlock()
		return
	}
	err := d.watcher.Add(dir)
	if err == nil {
		d.watched[id] = true
	}
	d.mu.Unlock()
	switch {
	case err == nil:
	case isWatchLimit(err):
		d.pollInstead(id, dir, err) // unwatched.go
	default:
		d.log.Warn("cannot watch job folder; steward changes reach it at the next rescan", "job_id", id, "err", err.Error())
	}
}

// loop handles watcher events until ctx ends (nil) or the daemon cannot go
// on serving the folder.
func (d *Daemon) loop(ctx context.Context) error {
	poll := time.NewTicker(rootPoll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
			if !d.rootGone {
				if fi, err := os.Stat(d.store.Dir); err == nil && os.SameFile(fi, d.root) {
					continue
				}
				if err := d.rootLost(0); err != nil {
					return err
				}
				continue
			}
			if err := d.rootBack(); err != nil {
				return err
			}
		case ev, ok := <-d.watcher.Events:
			if !ok {
				return nil
			}
			if err := d.event(ev); err != nil {
				return err
			}
		case err, ok := <-d.watcher.Errors:
			if !ok {
				return nil
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				d.log.Warn("watcher overflow; rescanning the jobs folder")
				d.rescan()
				continue
			}
			d.logErr("", codes.Watcher, err)
		}
	}
}

func (d *Daemon) event(ev fsnotify.Event) error {
	if filepath.Clean(ev.Name) == d.store.Dir {
		if ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
			return d.rootLost(ev.Op)
		}
		return nil
	}
	d.fileEvent(ev)
	return nil
}

func (d *Daemon) fileEvent(ev fsnotify.Event) {
	rel, err := filepath.Rel(d.store.Dir, ev.Name)
	if err != nil || strings.HasPrefix(rel, "..") {
		return
	}
	parts := strings.Split(rel, string(filepath.Separator))
	base := parts[len(parts)-1]
	if rel == filepath.Join(signing.Dir, steward.EventsFile) {
		d.readStewardEvents()
		return
	}
	if strings.HasPrefix(parts[0], ".") {
		return
	}
	switch len(parts) {
	case 1:
		if ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
			if _, err := os.Lstat(ev.Name); errors.Is(err, fs.ErrNotExist) {
				// Removed or moved away: a job folder, or a manifest
				// file not yet placed.
				d.mu.Lock()
				delete(d.watched, base)
				d.mu.Unlock()
				d.forgetPolled(base)
				d.gone(base)
				return
			}
		}
		if ev.Op&(fsnotify.Create|fsnotify.Write|fsnotify.Rename) == 0 {
			return
		}
		fi, err := os.Lstat(ev.Name)
		if err != nil {
			return
		}
		switch {
		case fi.IsDir():
			d.mu.Lock()
			at, ok := d.placed[base]
			delete(d.placed, base)
			// Bounded in time: an event lost to an overflow must not make
			// a later folder of the same name pass unseen.
			own := ok && ev.Op&fsnotify.Create != 0 && time.Since(at) < 5*time.Second
			d.mu.Unlock()
			if own {
				return // place has looked at it
			}
			d.watchJob(base)
			d.consider(base, true, arrival(fi), nil)
		case strings.HasSuffix(base, ".json"):
			// A symlink or a pipe too: Place reports it, and reads
			// nothing that could block.
			d.place(ev.Name, false, arrival(fi))
		}
	case 2:
		if history.IsFile(base) {
			// Another process's records (a steward's command) are read
			// and logged; the daemon's own are told apart by size.
			d.relay.notify(parts[0])
			return
		}
		if base == jobstore.ManifestFile && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
			if _, err := os.Lstat(ev.Name); errors.Is(err, fs.ErrNotExist) {
				d.store.NoteChanged(parts[0]) // for listings: the index still has it
				d.gone(parts[0])              // no manifest: no longer a job
			}
			return
		}
		if base == jobstore.ManifestFile && ev.Op&(fsnotify.Create|fsnotify.Write|fsnotify.Rename) != 0 {
			// The echo of our own save carries no news (the engine that
			// wrote it goes on by itself); a steward's change is a new file.
			if d.store.WrittenHere(parts[0]) {
				return
			}
			// A hand edit journals nothing itself: the daemon does, so
			// that listings, which trust the index for the jobs the
			// journal does not name, show it (jobstore, changes.go).
			d.store.NoteChanged(parts[0])
			// A job placed here whose bare name is still there (it waits
			// for a slot): a new job.json is no longer that name's file,
			// so the placement is settled now, not at a later crash.
			d.settleIfPlacing(parts[0])
			d.consider(parts[0], true, time.Time{}, nil)
			return
		}
		if base == jobstore.ManifestFile && ev.Op&fsnotify.Chmod != 0 && d.isDenied(parts[0]) {
			// A manifest the daemon could not read, given back to it
			// (chown, chmod): read it again (reportDenied).
			d.consider(parts[0], true, time.Time{}, nil)
		}
	}
}

// isDenied reports whether job id's manifest was last found unreadable.
func (d *Daemon) isDenied(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.denied[id] != ""
}

// rootLost handles the jobs folder itself being removed or moved away: its
// watch is gone with it (and the watches of its job folders), so the daemon
// polls for a folder at the same path and takes it up when it appears.
func (d *Daemon) rootLost(op fsnotify.Op) error {
	if d.rootGone {
		return nil
	}
	d.rootGone = true
	_ = d.watcher.Remove(d.store.Dir) // moved away: stop hearing about the old folder
	d.mu.Lock()
	for id := range d.watched {
		_ = d.watcher.Remove(d.store.JobDir(id))
	}
	d.watched = map[string]bool{}
	d.mu.Unlock()
	d.polled.mu.Lock()
	d.polled.dirs = nil // the scan when it is back takes them again
	d.polled.mu.Unlock()
	// Nothing is in the folder while it is gone.
	d.retain(nil, nil)
	d.relay.reset()
	how := "noticed by polling"
	if op != 0 {
		how = op.String()
	}
	joblog.Log(d.log, "jobs folder removed or moved away; waiting for it to come back", joblog.Problem{Code: codes.JobsDirGone},
		"jobs_dir", d.store.Dir, "how", how)
	return d.rootBack()
}

// rootBack takes up a jobs folder that has reappeared: its daemon lock (the
// old one went with the old folder), its signing key, a watch, and a full
// scan. It fails when the daemon must stop: another logistd took the new
// folder first.
func (d *Daemon) rootBack() error {
	fi, err := os.Stat(d.store.Dir)
	if err != nil || !fi.IsDir() {
		return nil // not back yet
	}
	// The watch goes on the new folder first, then the scan: a job
	// dropped in between is seen twice, never missed.
	lock, err := d.store.LockDaemon()
	var held *jobstore.DaemonLockedError
	if errors.As(err, &held) && held.PID == os.Getpid() {
		// The same folder, moved away and back: the lock we hold is its lock.
		lock, err = d.lock, nil
	}
	if err != nil {
		return fmt.Errorf("jobs folder %s is back but cannot be taken up: %w", d.store.Dir, err)
	}
	release := func() {
		if lock != d.lock {
			_ = lock.Unlock() // closing the descriptor releases it anyway
		}
	}
	key, err := signing.LoadOrCreate(d.store.Dir)
	if err != nil {
		release()
		d.logErr("", codes.DaemonKey, fmt.Errorf("jobs folder %s is back but its signing key cannot be set up: %w; will try again", d.store.Dir, err))
		return nil
	}
	if err := d.watcher.Add(d.store.Dir); err != nil {
		release()
		d.logErr("", codes.Watcher, fmt.Errorf("watch %s: %w; will try again", d.store.Dir, err))
		return nil
	}
	if lock != d.lock {
		_ = d.lock.Unlock() // closing the descriptor releases it anyway
		d.lock = lock
	}
	d.key.k.Store(key)
	d.root, d.rootGone = fi, false
	d.log.Info("jobs folder is back; rescanning", "jobs_dir", d.store.Dir, "signing_key", key.ID())
	d.rescan()
	return nil
}
