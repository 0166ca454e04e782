// Package atomicfile writes files so that a reader or a crash sees either the
// old content or the new one, never a mix, and so that the new content is on
// disk before the caller acknowledges it; and creates files made once and
// never replaced, such as keys, whole or not at all (CreateExclusive).
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/logist/logist/internal/regfile"
)

// umask is the process's file mode creation mask, read once: a file
// created with a mode it does not reduce needs no chmod.
var umask = func() os.FileMode {
	u := syscall.Umask(0)
	syscall.Umask(u)
	return os.FileMode(u)
}()

// createTemp creates a new file named prefix+random in dir with perm (less
// the umask), as os.CreateTemp does but through regfile.
func createTemp(dir, prefix string, perm os.FileMode) (*os.File, string, error) {
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		f, err := regfile.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if err == nil {
			return f, name, nil
		}
		if !errors.Is(err, fs.ErrExist) || try == 100 {
			return nil, "", err
		}
	}
}

// Counts of this process's fsyncs (files written here, directories), for
// the daemon's metrics: they explain where write latency goes.
var (
	FileSyncs atomic.Int64
	DirSyncs  atomic.Int64
)

// WriteFile replaces path with data: temp file in the same directory, fsync,
// rename over path, fsync the directory (the rename is only durable once the
// directory entry is).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return WriteFileNoting(path, data, perm, nil)
}

// WriteFileNoting is WriteFile that calls before(fi), fi being the new
// file as it will appear at path, just before the rename makes it visible:
// a watcher that hears of the rename can then already tell the writer's
// own file (inode, size and mtime survive the rename).
func WriteFileNoting(path string, data []byte, perm os.FileMode, before func(os.FileInfo)) error {
	if err := replace(path, data, perm, true, before); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// WriteCopy replaces path with data for readers (temp file, rename: a
// reader sees the old content or the new, whole) but makes nothing
// durable: for a file whose durable copy is kept elsewhere. After a crash
// path may hold the old content, the new, or on some file systems an
// empty or partial file; its owner restores it from the durable copy.
// before is called as for WriteFileNoting.
func WriteCopy(path string, data []byte, perm os.FileMode, before func(os.FileInfo)) error {
	return replace(path, data, perm, false, before)
}

// WriteView replaces path with data like WriteFile but leaves the rename
// undurable: for derived files that nothing acknowledges. The content is
// fsync'd before the rename, so after a crash path holds the old content or
// the new one, whole, on any file system; only which one is not promised.
func WriteView(path string, data []byte, perm os.FileMode) error {
	return replace(path, data, perm, true, nil)
}

// maxPad bounds the blanks writeAt writes to cover a shrinking file's old
// tail (larger shrinks are rare and keep the plain write and truncate).
const maxPad = 1 << 20

// WriteInPlace overwrites path with data in the same file (a new file with
// perm if there is none), durably nothing. It creates no inode, which on
// some file systems costs many times the write; but a reader may see the
// write half done, and a crash may leave old and new bytes mixed. Only for
// a file whose durable copy is elsewhere and whose readers retry a torn
// read or hold a lock the writer holds. after is called with the file as
// written.
func WriteInPlace(path string, data []byte, perm os.FileMode, after func(os.FileInfo)) error {
	return WriteInPlaceShared(path, data, perm, after, nil)
}

// WriteInPlaceShared is WriteInPlace for a file that may have a second
// name of the caller's own: shared(fi), for a file with more than one
// link, reports whether they are all the caller's (the write may show
// through them); else, or with shared nil, the file is replaced.
func WriteInPlaceShared(path string, data []byte, perm os.FileMode, after func(os.FileInfo), shared func(os.FileInfo) bool) error {
	f, err := regfile.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENXIO) {
		// None yet, or a symlink or fifo planted there: a new file.
		return replace(path, data, perm, false, after)
	}
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close() // nothing written
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !st.Mode().IsRegular() || !ok || sys.Nlink != 1 && (shared == nil || !shared(st)) {
		// Written in place, a hard link would carry the write to
		// wherever else the file is linked: replace it instead.
		_ = f.Close() // nothing written
		return replace(path, data, perm, false, after)
	}
	fi, err := writeAt(f, path, data, perm, st.Size())
	// The write's own errors first; then the close's, which some file
	// systems (NFS) report only there.
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", path, cerr)
	}
	if err != nil {
		return err
	}
	if after != nil {
		after(fi)
	}
	return nil
}

// writeAt writes data over f (path, old bytes long) from its start,
// truncates it there (if it was longer) and gives it perm; it returns the file's information
// as written. Data shorter than the file is written padded with spaces to
// the old length, in the same write: between the write and the truncate a
// reader then meets data and blanks (for JSON, the same value), never data
// followed by the old tail, which a writer descheduled between the two
// calls on a loaded machine would leave for a reader to find twice.
// truncate is (*os.File).Truncate; tests count its calls.
var truncate = (*os.File).Truncate

func writeAt(f *os.File, path string, data []byte, perm os.FileMode, old int64) (os.FileInfo, error) {
	w := data
	if n := int64(len(data)); old > n && old-n <= maxPad {
		w = make([]byte, old)
		copy(w, data)
		for i := n; i < old; i++ {
			w[i] = ' '
		}
	}
	if _, err := f.WriteAt(w, 0); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	// A file that grew (the engine's manifest, mostly) already ends where
	// data does: no truncate, a system call that costs ext4 more than the
	// write (docs/performance.md, "Kernel time per job"). The stat after
	// the write tells; a file another writer lengthened since old was
	// taken is cut then.
	n := int64(len(data))
	if old > n {
		if err := truncate(f, n); err != nil {
			return nil, fmt.Errorf("truncate %s: %w", path, err)
		}
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() != n {
		if err := truncate(f, n); err != nil {
			return nil, fmt.Errorf("truncate %s: %w", path, err)
		}
		fi, err = f.Stat()
	}
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if fi.Mode().Perm() != perm {
		// As a replacement would be: the file someone else created may
		// be more open than the caller wants.
		if err := f.Chmod(perm); err != nil {
			return nil, fmt.Errorf("chmod %s: %w", path, err)
		}
		if fi, err = f.Stat(); err != nil {
			return nil, fmt.Errorf("stat %s: %w", path, err)
		}
	}
	return fi, nil
}

func replace(path string, data []byte, perm os.FileMode, sync bool, before func(os.FileInfo)) error {
	return replaceWith(path, func(f *os.File) error { _, err := f.Write(data); return err }, perm, sync, before)
}

// WriteFrom is WriteFile of what r yields, streamed into the temp file:
// for content as large as a file an agent made (a snapshot's object put
// back by a rollback), which is never held in memory whole.
func WriteFrom(path string, r io.Reader, perm os.FileMode) error {
	if err := replaceWith(path, func(f *os.File) error { _, err := io.Copy(f, r); return err }, perm, true, nil); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// replaceWith is replace with the content written by write.
func replaceWith(path string, write func(*os.File) error, perm os.FileMode, sync bool, before func(os.FileInfo)) error {
	dir := filepath.Dir(path)
	f, tmp, err := createTemp(dir, "."+filepath.Base(path)+".tmp-", perm)
	if err != nil {
		return fmt.Errorf("create temp for %s: %w", path, err)
	}
	ok := false
	defer func() {
		if !ok {
			// The failed attempt's leftovers: the error is the failure's.
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if perm&^umask != perm {
		// Created with perm less the umask; the caller asked for perm.
		if err := f.Chmod(perm); err != nil {
			return fmt.Errorf("chmod %s: %w", tmp, err)
		}
	}
	if err := write(f); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", tmp, err)
		}
		FileSyncs.Add(1)
	}
	if before != nil {
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("stat %s: %w", tmp, err)
		}
		before(fi)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := regfile.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	ok = true
	return nil
}

// SyncDir fsyncs a directory so that entries created, renamed or removed in it
// survive a crash. It also settles every change MarkDirty recorded in dir
// before it started.
func SyncDir(dir string) error { return syncDir(filepath.Clean(dir), false) }

// dirty holds directories with entries changed but not yet fsync'd, each
// with the generation of its last change: a SyncDir that began after that
// change covers it. flying holds the fsync of each directory in progress,
// which a SyncDirIfDirty whose change it covers joins instead of queueing
// a second fsync of the same folder behind it.
//
// created holds the entries this process noted (MarkCreated) that nobody
// has asked about yet (EntryDurable) or forgotten (Forget), each with the
// generation of its note and the identity of what it named then; parents
// holds, for each of their parents, the generation at which its last
// successful fsync began (0: none yet), and children how many of created
// are in it: a parent none is left in is forgotten (a job folder, for its
// prepared history, is one per job).
//
// waiting holds the callbacks of AfterSynced not yet due, under each
// folder whose fsync they wait for.
var dirty = struct {
	sync.Mutex
	gen      uint64
	m        map[string]uint64
	flying   map[string]*dirFlight
	created  map[string]noted
	parents  map[string]uint64
	children map[string]int
	waiting  map[string][]*afterSync
}{m: map[string]uint64{}, flying: map[string]*dirFlight{}, created: map[string]noted{}, parents: map[string]uint64{},
	children: map[string]int{}, waiting: map[string][]*afterSync{}}

// dirFlight is one directory fsync in progress.
type dirFlight struct {
	gen  uint64 // dirty.gen when it began: it covers the marks up to gen
	done chan struct{}
	err  error
}

// syncDir fsyncs dir (a clean path). ifDirty: only when a change MarkDirty
// recorded is not yet covered, joining an fsync in flight that covers it.
func syncDir(dir string, ifDirty bool) error {
	dirty.Lock()
	if ifDirty {
		g, ok := dirty.m[dir]
		if !ok {
			dirty.Unlock()
			return nil
		}
		if f := dirty.flying[dir]; f != nil && f.gen >= g {
			dirty.Unlock()
			joinHook()
			<-f.done
			return f.err
		}
	}
	f := &dirFlight{gen: dirty.gen, done: make(chan struct{})}
	dirty.flying[dir] = f
	dirty.Unlock()
	f.err = fsyncDirHook(dir)
	dirty.Lock()
	if dirty.flying[dir] == f {
		delete(dirty.flying, dir)
	}
	if g, ok := dirty.m[dir]; ok && f.err == nil && g <= f.gen {
		delete(dirty.m, dir)
	}
	if s, ok := dirty.parents[dir]; ok && f.err == nil && f.gen > s {
		dirty.parents[dir] = f.gen
	}
	var due []func()
	if f.err == nil && len(dirty.waiting[dir]) > 0 {
		due = synced(dir, f.gen)
	}
	dirty.Unlock()
	close(f.done)
	for _, fn := range due {
		go fn() // off the path of whoever waits for this fsync
	}
	return f.err
}

// afterSync is a callback of AfterSynced: due once need is empty.
type afterSync struct {
	gen  uint64 // dirty.gen at the call: an fsync that began at gen or later covers it
	need map[string]bool
	fn   func()
}

// AfterSynced calls fn, on a goroutine of its own, once each of dirs has
// had a successful fsync that began after this call (SyncDir,
// SyncDirIfDirty, SyncDirtyStart): the entries changed in them before the
// call are then durable. fn does not delay anyone waiting for those
// fsyncs. Nothing here starts one: the caller marks the folders dirty
// (MarkDirty) or fsyncs them itself. An fsync that fails leaves fn
// waiting for the next. The func returned forgets fn if it is not due
// yet: a folder that is gone is never fsync'd again.
func AfterSynced(fn func(), dirs ...string) (cancel func()) {
	w := &afterSync{fn: fn, need: make(map[string]bool, len(dirs))}
	for _, d := range dirs {
		w.need[filepath.Clean(d)] = true
	}
	dirty.Lock()
	dirty.gen++
	w.gen = dirty.gen
	for d := range w.need {
		dirty.waiting[d] = append(dirty.waiting[d], w)
	}
	dirty.Unlock()
	return func() {
		dirty.Lock()
		defer dirty.Unlock()
		for d := range w.need {
			ws := slices.DeleteFunc(dirty.waiting[d], func(x *afterSync) bool { return x == w })
			if len(ws) == 0 {
				delete(dirty.waiting, d)
			} else {
				dirty.waiting[d] = ws
			}
		}
	}
}

// synced records that an fsync of dir begun at gen has succeeded and
// returns the callbacks it made due; dirty is held.
func synced(dir string, gen uint64) (due []func()) {
	ws := dirty.waiting[dir]
	keep := ws[:0]
	for _, w := range ws {
		if w.gen > gen {
			keep = append(keep, w) // changed after this fsync began
			continue
		}
		delete(w.need, dir)
		if len(w.need) == 0 {
			due = append(due, w.fn)
		}
	}
	clear(ws[len(keep):])
	if len(keep) == 0 {
		delete(dirty.waiting, dir)
	} else {
		dirty.waiting[dir] = keep
	}
	return due
}

// Test hooks: fsyncDirHook is fsyncDir (tests hold it to keep fsyncs in
// flight); joinHook is called when a caller joins an fsync in flight.
var (
	fsyncDirHook = fsyncDir
	joinHook     = func() {}
)

func fsyncDir(dir string) error {
	d, err := regfile.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer d.Close() //nolint:errcheck // read-only; the fsync is checked
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	DirSyncs.Add(1)
	return nil
}

// MarkDirty records that an entry in dir was created, renamed or removed
// without fsyncing dir. The durability rule is unchanged (the directory is
// fsync'd before the state that depends on the entry is acknowledged), but
// several changes in one directory can then share one fsync: the caller's
// next SyncDir or SyncDirIfDirty of dir, which it must make before that
// acknowledgement.
func MarkDirty(dir string) {
	dirty.Lock()
	dirty.gen++
	dirty.m[filepath.Clean(dir)] = dirty.gen
	dirty.Unlock()
}

// MarkCreated records that this process created the entry dir (a folder,
// or a file), or found it made by another and takes on settling it: its
// parent is marked dirty (MarkDirty), and EntryDurable can later tell
// whether an fsync of the parent has covered dir's entry since (an fsync
// of a folder that began after an entry was there makes it durable,
// whoever made it). An entry that cannot be looked at now is marked
// dirty but not noted: it is never known durable.
func MarkCreated(dir string) {
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	id, idOK := identify(dir)
	dirty.Lock()
	defer dirty.Unlock()
	dirty.gen++
	dirty.m[parent] = dirty.gen
	if !idOK {
		forgetNoted(dir) // an older note no longer names what is there
		return
	}
	if _, ok := dirty.created[dir]; !ok {
		dirty.children[parent]++
	}
	dirty.created[dir] = noted{gen: dirty.gen, id: id}
	if _, ok := dirty.parents[parent]; !ok {
		dirty.parents[parent] = 0
	}
}

// noted is an entry MarkCreated noted: the generation of the note and
// the identity of the file or folder the entry named then.
type noted struct {
	gen uint64
	id  entryID
}

// entryID tells one file or folder from another made later under the
// same name (a job folder removed and made again while its job waits for
// a slot): the inode, and its generation, since a file system gives a
// freed inode number to the next file made, and a birth time is only as
// fine as the kernel's clock tick.
type entryID struct {
	dev, ino uint64
	gen      int
}

// fsIOCGetVersion is FS_IOC_GETVERSION, _IOR('v', 1, long): the inode's
// generation (ext4, XFS, Btrfs; not tmpfs).
const fsIOCGetVersion = 0x80087601

// identify is the entry path's identity now, without following a
// symbolic link; false where the file system does not give a generation
// (the entry is then never known durable: its folder is fsync'd again).
func identify(path string) (entryID, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return entryID{}, false
	}
	defer unix.Close(fd) //nolint:errcheck // read-only, and only looked at
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return entryID{}, false
	}
	gen, err := unix.IoctlGetInt(fd, fsIOCGetVersion)
	if err != nil {
		return entryID{}, false
	}
	return entryID{dev: st.Dev, ino: st.Ino, gen: gen}, true
}

// forgetNoted drops the note of entry dir, if any (dirty held).
func forgetNoted(dir string) (noted, bool) {
	n, ok := dirty.created[dir]
	if !ok {
		return noted{}, false
	}
	delete(dirty.created, dir)
	parent := filepath.Dir(dir)
	if dirty.children[parent]--; dirty.children[parent] <= 0 {
		// A later MarkCreated in it waits for an fsync after it anyway.
		delete(dirty.children, parent)
		delete(dirty.parents, parent)
	}
	return n, true
}

// EntryDurable reports whether the entry dir (a folder or a file) was
// noted by this process (MarkCreated), still names what it named then,
// and an fsync of its parent that began after the note has succeeded:
// dir's entry in its parent is then durable and need not be fsync'd
// again. An entry this process did not note (another process made it,
// and may have died before fsyncing its parent), or that was removed and
// made again since, is never known durable. dir is forgotten: ask once.
func EntryDurable(dir string) bool {
	dir = filepath.Clean(dir)
	dirty.Lock()
	covered := dirty.parents[filepath.Dir(dir)] // before the parent may be forgotten with dir
	n, ok := forgetNoted(dir)
	durable := ok && covered >= n.gen
	dirty.Unlock()
	if !durable {
		return false
	}
	id, ok := identify(dir)
	return ok && id == n.id
}

// Forget drops the notes of dir and of every entry under it (MarkCreated):
// the folder left, so what was noted in it names nothing any more (a job
// folder removed before its start, whose files were made ahead).
func Forget(dir string) {
	dir = filepath.Clean(dir)
	prefix := dir + string(filepath.Separator)
	dirty.Lock()
	defer dirty.Unlock()
	for p := range dirty.created {
		if p == dir || strings.HasPrefix(p, prefix) {
			forgetNoted(p)
		}
	}
}

// Noted reports whether the entry path is noted (MarkCreated) and not yet
// asked about or forgotten: what the daemon's tests look at.
func Noted(path string) bool {
	dirty.Lock()
	defer dirty.Unlock()
	_, ok := dirty.created[filepath.Clean(path)]
	return ok
}

// Dirty reports whether dir has a change MarkDirty recorded that no
// folder fsync has covered yet.
func Dirty(dir string) bool {
	dirty.Lock()
	defer dirty.Unlock()
	_, ok := dirty.m[filepath.Clean(dir)]
	return ok
}

// SyncDirIfDirty fsyncs dir if a change MarkDirty recorded there is not yet
// covered by a SyncDir.
func SyncDirIfDirty(dir string) error { return syncDir(filepath.Clean(dir), true) }

// SyncDirtyStart starts SyncDirIfDirty of each of dirs that has a change
// to settle, at once and side by side, and returns a wait for them (the
// first error). A caller fsyncing a file of its own meanwhile overlaps the
// two: on the disks measured three fsyncs side by side took about 2/3 of
// the time of three in turn. Nothing dirty starts nothing.
func SyncDirtyStart(dirs ...string) (wait func() error) {
	var errs []chan error
	for _, d := range dirs {
		d = filepath.Clean(d)
		if !Dirty(d) {
			continue
		}
		ch := make(chan error, 1)
		errs = append(errs, ch)
		go func() { ch <- syncDir(d, true) }()
	}
	return func() error {
		var first error
		for _, ch := range errs {
			if err := <-ch; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
}

// MkdirDeferred creates dir (and missing parents) like MkdirAll, but marks
// each parent it changed dirty (MarkDirty) instead of fsyncing it: the caller
// fsyncs them, once for several creates, before relying on them.
func MkdirDeferred(dir string, perm os.FileMode) error {
	// Also when another writer made it: as MkdirAll, never trust that it
	// fsync'd the parent.
	return mkdirs(dir, perm, func(parent string) error { MarkDirty(parent); return nil })
}

// MkdirMissingDeferred is MkdirDeferred for a dir its caller has just
// seen missing: the mkdir comes first, one system call where
// MkdirDeferred's stats of dir and of its parent come before it. A dir
// another writer made meanwhile counts as made (its parent marked dirty,
// as MkdirDeferred marks it); a missing parent is left to MkdirDeferred.
func MkdirMissingDeferred(dir string, perm os.FileMode) error {
	err := os.Mkdir(dir, perm)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrExist):
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("%s exists and is not a directory", dir)
		}
	case errors.Is(err, fs.ErrNotExist):
		return MkdirDeferred(dir, perm)
	default:
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	MarkDirty(filepath.Dir(dir))
	return nil
}

// MkdirAll creates dir (and parents) and fsyncs the parent of every directory
// it created.
func MkdirAll(dir string, perm os.FileMode) error {
	return mkdirs(dir, perm, SyncDir)
}

// mkdirs creates dir and its missing parents, calling settle on the parent
// of each one it created (or found created by another writer meanwhile).
func mkdirs(dir string, perm os.FileMode, settle func(parent string) error) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s exists and is not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirs(parent, perm, settle); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil && !os.IsExist(err) {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	return settle(parent)
}
