package jobstore

// Placement: a bare <name>.json dropped in the jobs folder becomes the job
// folder <id>/job.json. The folders' fsyncs are deferred (the job's first
// history unit makes them, beside its own), so the order in which the new
// entries and the bare name's removal reach the disk is the file system's:
// without a journal (ext4 here; POSIX promises no more) a jobs folder fsync
// can make a removal durable before the job folder's fsync has made the
// new name durable, and a machine crash in between would leave the job
// folder without its manifest and no bare file. So job.json is a hard link
// to the bare file, and the bare name goes only once the job folder's
// fsync (and the jobs folder's, for the folder's own entry) has succeeded.
// A crash before that leaves both names, the same file: a leftover that
// every reader of the jobs folder recognises (Leftover) and the daemon's
// next Place removes. The unlink itself is not fsync'd: a crash that
// loses it leaves that same pair.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/regfile"
)

// ErrIncomplete says a manifest file is still being written.
var ErrIncomplete = errors.New("manifest is still being written")

// placement is a bare name a placement left beside its job's job.json,
// to be removed once job.json's entry is durable.
type placement struct {
	bare    string
	file    os.FileInfo   // the file placed: the name is removed only while it is still this file
	dropped atomic.Bool   // dropBare has begun
	gone    chan struct{} // closed when dropBare has ended
	cancel  func()        // forgets the fsyncs' callback (atomicfile.AfterSynced)
}

// Place moves a bare <name>.json from the jobs folder into its own folder
// <id>/job.json and returns the id. The id is the manifest's job_id when it
// names a valid one (even if the rest of the manifest is invalid, so the
// job shows up under the name its author chose), else the file name. A file
// that is not yet complete JSON is left alone (ErrIncomplete): its writer
// is still at work and the next write event brings it back. The move is
// not yet durable when Place returns: see SettlePlaced.
//
// placed is false, with no error, when bare is the second name an earlier
// placement left of job id's manifest (Leftover): nothing is placed, and
// the name is removed once the job's folder is known durable (now, when
// this process did not place it: after a crash or a restart).
func (s *Store) Place(bare string) (id string, placed bool, err error) {
	id, placed, _, err = s.PlaceRead(bare)
	return id, placed, err
}

// PlaceRead is Place that also returns what it read of the file, now
// job.json, with the file's identity after the move (LoadFrom decodes it,
// a job's first transaction takes it while Unchanged), or nil when it
// cannot vouch for it (the file changed meanwhile, or was copied).
func (s *Store) PlaceRead(bare string) (id string, placed bool, r *FileRead, err error) {
	data, file, err := readBare(bare)
	if err != nil {
		return "", false, nil, err
	}
	s.n.reads.Add(1)
	if id, err = placeID(bare, data); err != nil {
		return "", false, nil, err
	}
	dir := s.JobDir(id)
	mf := filepath.Join(dir, ManifestFile)
	made := true
	if err := os.Mkdir(dir, 0o700); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return "", false, nil, fmt.Errorf("place %s: %w", bare, err)
		}
		made = false
		// A folder without a manifest is what a crash between the mkdir and
		// the link leaves: take it. One whose manifest is this very file
		// is this file's placement (a Leftover). One with another
		// manifest is another job.
		cur, serr := os.Lstat(mf)
		if serr == nil && os.SameFile(cur, file) {
			return id, false, nil, s.dropLeftover(id, bare, file)
		}
		if !errors.Is(serr, fs.ErrNotExist) {
			return "", false, nil, errTaken(bare, id)
		}
	}
	if err := s.moveIn(id, bare, mf, file, data); err != nil {
		_ = os.Remove(dir) // only if empty; one left is taken by the next Place
		return "", false, nil, fmt.Errorf("place %s: %w", bare, err)
	}
	if links(file) == 1 {
		// Linked or renamed, not copied: job.json is the file read.
		r = placedRead(mf, file, data)
	}
	// Not fsync'd here but marked: the job's first history append fsyncs
	// both folders beside its own record (history.Log), and a job that
	// will not run soon is settled by SettlePlaced. A folder made here is
	// recorded as made (atomicfile.MarkCreated): once a jobs folder fsync
	// has covered it, the job's new history does not need another.
	atomicfile.MarkDirty(dir)
	if made {
		atomicfile.MarkCreated(dir)
	} else {
		atomicfile.MarkDirty(s.Dir)
	}
	return id, true, r, nil
}

// moveIn makes mf (job id's job.json) the file bare names, whose content
// was read as data.
//
// A file with one link is linked (the bare name is removed later:
// dropBare). Where the link is refused (fs.protected_hardlinks for a file
// the daemon neither owns nor may read and write, another file system, no
// hard links there, too many links) it is renamed, as before the link:
// that path keeps the window the link closes (on a file system without a
// journal a crash before the job's first unit can leave the folder
// without its manifest; docs/design.md, "Placement").
//
// A file with other links already (someone's hard link outside the jobs
// folder, or another bare name of the same file) is copied, never shared:
// the job's manifest is rewritten in place by the daemon's transactions,
// which would change the other names too, and another name's writer would
// change the job's manifest under it. The copy is made durable, and the
// bare name's removal too, before Place returns: a crash leaves either
// the bare file alone or the job alone.
func (s *Store) moveIn(id, bare, mf string, file os.FileInfo, data []byte) error {
	if links(file) > 1 {
		if err := atomicfile.WriteFile(mf, data, 0o600); err != nil {
			return err
		}
		if err := atomicfile.SyncDir(s.Dir); err != nil { // the job folder's entry
			return err
		}
		if err := os.Remove(bare); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return atomicfile.SyncDir(s.Dir)
	}
	err := linkFile(bare, mf)
	if err == nil {
		p := &placement{bare: bare, file: file, gone: make(chan struct{})}
		// Registered before the folders are marked dirty: the fsyncs that
		// settle those marks begin after this, and so remove the name.
		p.cancel = atomicfile.AfterSynced(func() { s.dropBare(id, p) }, s.JobDir(id), s.Dir)
		s.placing.Store(id, p)
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		return err // another placement of the same id, just now
	}
	return os.Rename(bare, mf)
}

// linkFile is os.Link (a test refuses it, as a file system may).
var linkFile = os.Link

// links is the file's link count (1 where the system does not say).
func links(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// placementID is the id Place gives the bare file bare holding data.
func placementID(bare string, data []byte) string {
	id := strings.TrimSuffix(filepath.Base(bare), ".json")
	var probe struct {
		JobID string `json:"job_id"`
	}
	if json.Unmarshal(data, &probe) == nil && probe.JobID != "" && manifest.ValidID(probe.JobID) == nil {
		id = probe.JobID
	}
	return id
}

// readBare reads the bare manifest bare (at most one byte more than a
// manifest may hold) and says which file it read. Only a regular file is
// read (notPlaceable): a named pipe never blocks the daemon, and a
// symlink is not followed out of the jobs folder.
func readBare(bare string) ([]byte, os.FileInfo, error) {
	f, err := regfile.OpenFileHere(bare, os.O_RDONLY, 0)
	if errors.Is(err, regfile.ErrNotRegular) {
		return nil, nil, notPlaceable(bare)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("place %s: %w", bare, err)
	}
	defer f.Close() //nolint:errcheck // read-only
	file, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("place %s: %w", bare, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, manifest.MaxSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("place %s: %w", bare, err)
	}
	return data, file, nil
}

// notPlaceable is why the bare name bare, a <name>.json in the jobs
// folder that is not a regular file, is not placed: what it is, and what
// to do. A symlink is not followed: the job's folder and its manifest
// are the daemon's to write, and a link would make its first save write
// where the link points, or a copy the link's owner does not expect.
func notPlaceable(bare string) error {
	fi, err := os.Lstat(bare)
	if err != nil {
		return fmt.Errorf("place %s: %w", bare, err)
	}
	var what, fix string
	switch t := fi.Mode().Type(); {
	case t&fs.ModeSymlink != 0:
		what, fix = "a symlink", "copy the manifest into the jobs folder (logistd does not follow links out of it)"
		if to, err := os.Readlink(bare); err == nil {
			what = fmt.Sprintf("a symlink (to %q)", to)
		}
	case t&fs.ModeNamedPipe != 0:
		what, fix = "a named pipe (FIFO)", "write the manifest to a regular file and move it in"
	case t&fs.ModeSocket != 0:
		what, fix = "a socket", "write the manifest to a regular file and move it in"
	case t&fs.ModeDevice != 0:
		what, fix = "a device", "write the manifest to a regular file and move it in"
	default:
		what, fix = "not a regular file", "write the manifest to a regular file and move it in"
	}
	return &manifest.Error{File: bare, Reason: fmt.Sprintf("it is %s, not a regular file; not placed: %s", what, fix)}
}

// placeID is the id of the job the bare manifest bare, whose bytes are
// data, is placed as (placementID), or why it is not placed: not yet
// (ErrIncomplete: its writer is still at work), or not as it is (too
// large; neither its name nor its job_id a valid job id), the error
// naming the file and what to do.
func placeID(bare string, data []byte) (string, error) {
	if len(data) > manifest.MaxSize {
		// Not moved: a file this size is not a manifest, whatever it is.
		return "", &manifest.Error{File: bare, Reason: fmt.Sprintf("file is larger than %d bytes; not placed", manifest.MaxSize)}
	}
	if manifest.Incomplete(data) {
		return "", ErrIncomplete
	}
	id := placementID(bare, data)
	if manifest.ValidID(id) != nil {
		return "", &manifest.Error{File: bare, Reason: fmt.Sprintf("not placed: job id %q is invalid: rename the file or set a valid job_id (a job id uses %s)", id, manifest.IDRule)}
	}
	return id, nil
}

// errTaken is why bare is not placed: job id, which it would become, is
// another's.
func errTaken(bare, id string) error {
	return &manifest.Error{File: bare, Reason: fmt.Sprintf("not placed: job %s already exists; rename the file or change its job_id", id)}
}

// Placement says what Place would do now with the bare manifest bare (a
// listing's Entry.Unplaced): the id of the job it becomes, or why it is
// not placed, as Place would say it (placeID; errTaken). It reads the file
// and changes nothing.
func (s *Store) Placement(bare string) (string, error) {
	data, file, err := readBare(bare)
	if err != nil {
		return "", err
	}
	id, err := placeID(bare, data)
	if err != nil {
		return "", err
	}
	// As Place: a folder without a manifest is taken, one whose manifest
	// is this file is its placement's, one with another is another job.
	cur, err := os.Lstat(filepath.Join(s.JobDir(id), ManifestFile))
	if err == nil && !os.SameFile(cur, file) || err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", errTaken(bare, id)
	}
	return id, nil
}

// dropBare removes the bare name placement p left of job id's manifest,
// once (whoever comes first: the fsyncs' callback or SettlePlaced), and
// only while the name is still the file placed: a new file dropped under
// the same name since is a new manifest.
func (s *Store) dropBare(id string, p *placement) {
	if !p.dropped.CompareAndSwap(false, true) {
		// Begun elsewhere (the fsyncs' callback, say): its end is
		// this call's, so that the name is gone when it returns.
		<-p.gone
		return
	}
	defer close(p.gone)
	p.cancel() // dropped here before the callback: it waits no more
	if cur, err := os.Lstat(p.bare); err == nil && os.SameFile(cur, p.file) {
		_ = os.Remove(p.bare) // not fsync'd: a crash that loses it leaves a Leftover
	}
	// Forgotten only now: until the name is gone, the engine's saves
	// keep writing job.json in place (placedFile).
	s.placing.CompareAndDelete(id, p)
}

// dropLeftover removes bare, the second name of job id's manifest file
// (file). If this process's placement left it, its fsyncs remove it; else
// (a crash, a restart) the job's folder and its entry are made durable
// first, as the placement would have, and the removal after: the job's
// run, started beside, may already have replaced job.json (a file with
// two links is not written in place, placedFile), and a crash that lost
// the removal would then leave the name beside another file.
func (s *Store) dropLeftover(id, bare string, file os.FileInfo) error {
	if v, ok := s.placing.Load(id); ok && os.SameFile(v.(*placement).file, file) {
		return nil
	}
	if err := atomicfile.SyncDir(s.JobDir(id)); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(s.Dir); err != nil {
		return err
	}
	if cur, err := os.Lstat(bare); err == nil && os.SameFile(cur, file) {
		if err := os.Remove(bare); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return atomicfile.SyncDir(s.Dir)
	}
	return nil
}

// Leftover reports whether bare, a bare manifest in the jobs folder, is
// the second name a placement left of its job's job.json (the same file):
// not a manifest to place nor to report, only a name to remove (Place).
func (s *Store) Leftover(bare string) bool {
	fi, err := os.Lstat(bare)
	if err != nil || !fi.Mode().IsRegular() || links(fi) < 2 {
		return false
	}
	data, err := regfile.ReadLimited(bare, manifest.MaxSize)
	if err != nil || len(data) > manifest.MaxSize {
		return false
	}
	id := placementID(bare, data)
	if manifest.ValidID(id) != nil {
		return false
	}
	cur, err := os.Lstat(filepath.Join(s.JobDir(id), ManifestFile))
	return err == nil && os.SameFile(cur, fi)
}

// placedFile returns, for WriteInPlaceShared, whether a manifest file of
// job id with several links is the file its placement by this process
// linked, with the bare name as its only other name: the daemon's
// in-place saves then keep the inode (and show through the bare name,
// which goes soon), rather than replace job.json with a file the bare
// name no longer is, which a crash before the unlink would leave beside
// it as "already exists". Nil when nothing is pending.
func (s *Store) placedFile(id string) func(os.FileInfo) bool {
	v, ok := s.placing.Load(id)
	if !ok {
		return nil
	}
	p := v.(*placement)
	return func(fi os.FileInfo) bool { return links(fi) == 2 && os.SameFile(fi, p.file) }
}

// Placing reports whether job id's placement by this process still has
// its bare name beside job.json (its folder not yet fsync'd since).
func (s *Store) Placing(id string) bool {
	_, ok := s.placing.Load(id)
	return ok
}

// ForgetPlacement is for job id whose folder or job.json has left the
// jobs folder while its placement's bare name was still there (a job
// waiting for a slot keeps it until its first unit): the name goes with
// the job, while it is still the file placed, rather than come back as a
// new manifest to place.
func (s *Store) ForgetPlacement(id string) {
	if v, ok := s.placing.Load(id); ok {
		s.dropBare(id, v.(*placement))
	}
}

// Placements lists the jobs whose placement by this process still has its
// bare name (Placing): a daemon that stops settles them, so that it
// leaves no second name behind (its runs' units may have made them
// durable, with the names' removal not yet run).
func (s *Store) Placements() []string {
	var ids []string
	s.placing.Range(func(k, _ any) bool {
		ids = append(ids, k.(string))
		return true
	})
	return ids
}

// SettlePlaced makes a placement durable (Place) where no history append
// of the job will do it soon (the job is not runnable; the daemon says
// when else: daemon/place.go). The bare name goes once it is.
func (s *Store) SettlePlaced(id string) error {
	if err := atomicfile.SyncDirtyStart(s.JobDir(id), s.Dir)(); err != nil {
		return err
	}
	// Both folders have had an fsync since the placement (each was dirty
	// from it until one covered it): the callback is due, if not run.
	if v, ok := s.placing.Load(id); ok {
		s.dropBare(id, v.(*placement))
	}
	return nil
}
