package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
)

// Job folders the watcher cannot take are polled instead. The daemon
// watches every job folder so that a steward's change to a manifest (a
// logist command, a hand edit) and another process's records are heard
// at once; inotify allows a user fs.inotify.max_user_watches watches,
// which the kernel sizes by memory (about 8,000 per GiB: a machine of
// 4 GiB has fewer than 50,000). Past the limit each folder used to get a
// warning and was then deaf to steward changes until the next rescan,
// which only an overflow or the folder's return brings. Now the first
// refusal is reported once, with the setting to raise, and the folders
// over the limit are polled: each poll compares their manifest's and
// history's identity (inode, size, modification time) and their
// manifest's attributes (mode, owner, inode change time) with the last
// seen, and a change is handled as the watcher's event would have been:
// a new identity as a write, new attributes alone as IN_ATTRIB's chmod,
// which has a manifest the daemon could not read looked at again.
// A poll also tries to watch one polled folder again, so watches freed
// by removed jobs are taken up.

// unwatchedPoll is how often polled folders are looked at: a steward's
// change to one is heard within it.
const unwatchedPoll = time.Second

// polled is the set of job folders polled instead of watched.
type polled struct {
	mu       sync.Mutex
	dirs     map[string]*polledDir // job id -> what was last seen
	started  bool                  // the poller runs
	reported bool                  // the limit was reported
}

type polledDir struct {
	dir               string
	manifest, history fileID
}

// fileID is what tells a file changed between two looks without reading
// it: its identity (a new file or new content) and its attributes, which
// change alone when a chmod or chown gives it back to the daemon (or takes
// it away). The inode change time is among them: a mode changed and
// changed back between two looks (chmod 000, then 0600) still shows, as
// inotify's two IN_ATTRIB events would, unless both fell within one tick
// of the clock the file system stamps inodes with.
type fileID struct {
	ino, size, mtime int64
	exists           bool
	attrs            fileAttrs
}

type fileAttrs struct {
	mode     os.FileMode
	uid, gid uint32
	ctime    int64
}

func idOf(path string) fileID {
	fi, err := os.Lstat(path)
	if err != nil {
		return fileID{}
	}
	id := fileID{size: fi.Size(), mtime: fi.ModTime().UnixNano(), exists: true, attrs: fileAttrs{mode: fi.Mode()}}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.ino = int64(st.Ino)
		id.attrs.uid, id.attrs.gid = st.Uid, st.Gid
		id.attrs.ctime = st.Ctim.Nano()
	}
	return id
}

// sameFile says whether a and b are the same file with the same content
// as far as a look tells (identity, size, modification time), whatever
// their attributes.
func (a fileID) sameFile(b fileID) bool {
	a.attrs, b.attrs = fileAttrs{}, fileAttrs{}
	return a == b
}

// isWatchLimit says whether a watcher's Add failed for inotify's limit
// (ENOSPC: no watch left for this user).
func isWatchLimit(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// pollInstead takes a job folder the watcher refused for its limit into
// the polled set, reporting the limit the first time.
func (d *Daemon) pollInstead(id, dir string, err error) {
	p := &d.polled
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dirs == nil {
		p.dirs = map[string]*polledDir{}
	}
	if _, ok := p.dirs[id]; ok {
		return
	}
	p.dirs[id] = &polledDir{dir: dir, manifest: idOf(filepath.Join(dir, jobstore.ManifestFile)), history: idOf(history.Path(dir))}
	if !p.reported {
		p.reported = true
		joblog.Log(d.log, "inotify watch limit reached; job folders past it are polled every second instead of watched",
			joblog.Problem{Job: id, Code: codes.WatchLimit}, "err", err.Error(), "watched", d.watchedCount(),
			"fix", "raise fs.inotify.max_user_watches (sysctl), then restart logistd")
	}
	if !p.started && d.scanCtx != nil {
		p.started = true
		d.scans.Add(1)
		go func() {
			defer d.scans.Done()
			ticks := d.opts.pollTicks
			if ticks == nil {
				t := time.NewTicker(unwatchedPoll)
				defer t.Stop()
				ticks = t.C
			}
			for {
				select {
				case <-d.scanCtx.Done():
					return
				case <-ticks:
					d.pollOnce()
				}
			}
		}()
	}
}

func (d *Daemon) watchedCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.watched)
}

// forgetPolled drops a folder from the polled set (it left the folder,
// or the watcher took it).
func (d *Daemon) forgetPolled(id string) {
	p := &d.polled
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.dirs, id)
}

// pollOnce looks at every polled folder once. First it tries to watch
// one of them again (watches freed by removed jobs are taken up, one a
// poll); that folder is still compared this once, so a change made before
// its watch was in place is not missed.
func (d *Daemon) pollOnce() {
	p := &d.polled
	p.mu.Lock()
	retry := ""
	for id := range p.dirs {
		retry = id
		break
	}
	p.mu.Unlock()
	rewatched := false
	if retry != "" {
		d.mu.Lock()
		if err := d.watcher.Add(d.store.JobDir(retry)); err == nil {
			d.watched[retry] = true
			rewatched = true
		}
		d.mu.Unlock()
	}

	type change struct {
		id, dir                                   string
		gone, manifest, manifestGone, attrs, hist bool
	}
	var changes []change
	p.mu.Lock()
	for id, pd := range p.dirs {
		if _, err := os.Lstat(pd.dir); errors.Is(err, os.ErrNotExist) {
			changes = append(changes, change{id: id, dir: pd.dir, gone: true})
			continue
		}
		m, h := idOf(filepath.Join(pd.dir, jobstore.ManifestFile)), idOf(history.Path(pd.dir))
		c := change{id: id, dir: pd.dir, manifest: !m.sameFile(pd.manifest), manifestGone: pd.manifest.exists && !m.exists,
			attrs: m.exists && m != pd.manifest, hist: !h.sameFile(pd.history)}
		pd.manifest, pd.history = m, h
		if c.manifest || c.attrs || c.hist {
			changes = append(changes, c)
		}
	}
	if rewatched {
		delete(p.dirs, retry)
	}
	p.mu.Unlock()

	// Each change as the watcher would have reported it (fileEvent).
	for _, c := range changes {
		if c.gone {
			d.forgetPolled(c.id)
			d.fileEvent(fsnotify.Event{Name: c.dir, Op: fsnotify.Remove})
			continue
		}
		if c.hist {
			d.fileEvent(fsnotify.Event{Name: history.Path(c.dir), Op: fsnotify.Write})
		}
		switch {
		case c.manifestGone:
			d.fileEvent(fsnotify.Event{Name: filepath.Join(c.dir, jobstore.ManifestFile), Op: fsnotify.Remove})
		case c.manifest:
			d.fileEvent(fsnotify.Event{Name: filepath.Join(c.dir, jobstore.ManifestFile), Op: fsnotify.Write})
		case c.attrs:
			d.fileEvent(fsnotify.Event{Name: filepath.Join(c.dir, jobstore.ManifestFile), Op: fsnotify.Chmod})
		}
	}
}
