package jobstore

// A pickup reads a job's manifest once. What the intake read (the
// watcher's event, the start-up scan, a placement) is handed on, with the
// file's identity as it was read, to the scheduler and the job's first
// transaction, which takes it under the job's lock only while the file is
// still that one (Unchanged): the same inode, size, modification and
// change times. A steward's command replaces the file (a new inode), and
// any write changes its times, so a change made between the intake's read
// and the first transaction is read, decoded and checked again, exactly
// as if nothing had been handed on. Before, job.json was read three times
// and decoded twice at each pickup (docs/performance.md, "Pickup").

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/logist/logist/internal/manifest"
)

// FileRead is one read of a job's manifest file: its bytes, and the file's
// identity from an fstat made before they were read.
type FileRead struct {
	Raw []byte
	key statKey
}

// Loaded is a FileRead decoded and checked (Store.LoadFile): M is what Raw
// decodes to. Whoever is handed a Loaded must not change M while others
// may read it; the first transaction works on a copy.
type Loaded struct {
	M *manifest.Manifest
	FileRead
}

// Counts says how often a Store read a manifest file (Reads: job.json or
// a bare manifest), decoded one (Decodes) and checked one in full against
// the schema and the semantic checks (Checks). For tests: a pickup costs
// one of each.
type Counts struct {
	Reads, Decodes, Checks int64
}

// counts are a Store's Counts.
type counts struct {
	reads, decodes, checks atomic.Int64
}

// Counts returns how many manifest reads, decodes and checks s has made.
func (s *Store) Counts() Counts {
	return Counts{Reads: s.n.reads.Load(), Decodes: s.n.decodes.Load(), Checks: s.n.checks.Load()}
}

// keyOfStat is the identity a FileRead keeps, from an fstat or stat.
func keyOfStat(st *syscall.Stat_t) statKey {
	return statKey{Ino: int64(st.Ino), Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
}

// LoadFile is Load that also returns the bytes the manifest was read
// from and the file's identity then, to hand on (Unchanged).
func (s *Store) LoadFile(id string) (*Loaded, error) { return s.loadFile(id, nil) }

// LoadFrom is LoadFile for a manifest file already read as r (a
// placement's read: PlaceRead), or read now if r is nil. A read that does
// not pass is read again, as LoadFile would (a half-saved file).
func (s *Store) LoadFrom(id string, r *FileRead) (*Loaded, error) {
	if r == nil {
		return s.loadFile(id, nil)
	}
	return s.loadFile(id, &read{FileRead: *r})
}

// Unchanged reports, for a caller holding job id's lock, whether its
// manifest file is still the one r was read from: same inode, size,
// modification and change times. A write since (in place or a new file)
// changes at least one of them; then the file must be read again.
func (s *Store) Unchanged(id string, r *FileRead) bool {
	if r == nil || r.key == (statKey{}) {
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(s.JobDir(id), ManifestFile), &st); err != nil {
		return false
	}
	return st.Mode&syscall.S_IFMT == syscall.S_IFREG && keyOfStat(&st) == r.key
}

// placedRead is the FileRead of a placement: data, read from the bare
// file whose stat before the read was file, now job.json at mf. The link
// (or rename) changed the file's change time, so its identity is taken
// again; nil unless the file is still the one read (inode, size,
// modification time) and data is all of it.
func placedRead(mf string, file os.FileInfo, data []byte) *FileRead {
	before, ok := statKeyOf(file)
	if !ok || before.Size != int64(len(data)) {
		return nil
	}
	cur, err := os.Lstat(mf)
	if err != nil || !cur.Mode().IsRegular() || !os.SameFile(cur, file) {
		return nil
	}
	now, ok := statKeyOf(cur)
	if !ok || now.Size != before.Size || now.Mtime != before.Mtime {
		return nil
	}
	return &FileRead{Raw: data, key: now}
}
