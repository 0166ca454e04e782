// Package jobstore is the jobs folder on disk: one folder per job holding
// job.json (the manifest), history.jsonl, jobHistory.json and workspace/.
// It owns the per-job lock that serialises every change to a job, whether
// the daemon or a steward's CLI makes it, and the daemon's folder lock.
package jobstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/regfile"
)

// Names inside a job folder.
const (
	ManifestFile = "job.json"
	WorkspaceDir = "workspace"
	RequestsDir  = "requests"
	daemonLock   = ".logistd.lock"
)

// ErrNotFound marks a job that does not exist.
var ErrNotFound = errors.New("not found")

// Store is a jobs folder.
type Store struct {
	Dir string
	// written remembers, per job, the manifest file this process last
	// saved, so that the watcher's echo of our own write can be ignored.
	written sync.Map // id -> fileKey
	// checked remembers, per job, the SHA-256 of the manifest bytes that
	// last passed the full check (or that this process wrote itself):
	// loading the same bytes again skips the schema, the costliest part
	// of a load. Keyed by content, so a change from outside is never
	// mistaken for a checked file.
	checked sync.Map // id -> [32]byte
	// Committed, if set, reports whether a manifest with this SHA-256 is
	// the one a Logist transaction committed for job id (signed in its
	// history): such bytes need no check either. The CLI sets it, so that
	// a command that reads a job does not pay for compiling the schema.
	Committed func(id string, sum [32]byte) bool
	// InPlace makes WriteManifestCopy overwrite the manifest file in place
	// instead of replacing it with a new file. The daemon sets it: its
	// engine is the one frequent writer, and a steward's save, always a
	// new file, stays easy to tell from the engine's (WrittenHere).
	InPlace  bool
	inflight sync.Map // id -> true while an in-place write is under way
	// KeepJournalOpen makes NoteChanged keep the change journal open
	// between notes (for a long-lived Store that notes every save: the
	// daemon's). A Store made for one note leaves it unset, so that no
	// descriptor outlives it.
	KeepJournalOpen bool
	journal         journalWriter
	// placing holds, per job, the bare name this process's placement
	// left beside its job.json until that is durable (place.go).
	placing sync.Map // id -> *placement
	// n counts manifest reads, decodes and checks (Counts).
	n counts
}

type fileKey struct {
	ino, size int64
	mtime     int64
}

func keyOf(fi os.FileInfo) (fileKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{int64(st.Ino), fi.Size(), fi.ModTime().UnixNano()}, true
}

// WrittenHere reports whether job id's manifest is still the file this
// process last saved: a watcher event about it is our own write. Another
// process's atomic replace is a new file (new inode), so it never matches.
func (s *Store) WrittenHere(id string) bool {
	k, busy, saved := s.lastSave(id)
	if busy || !saved {
		return busy
	}
	var st syscall.Stat_t
	return syscall.Stat(filepath.Join(s.JobDir(id), ManifestFile), &st) == nil && k == saveKeyOf(&st)
}

// WrittenHereAs is WrittenHere for the holder of job id's lock l, from
// the stat of job.json l took when it was taken (Lock.Manifest) rather
// than a stat of its own.
func (s *Store) WrittenHereAs(id string, l *Lock) bool {
	k, busy, saved := s.lastSave(id)
	if busy || !saved {
		return busy
	}
	st := l.Manifest()
	return st != nil && k == saveKeyOf(st)
}

// lastSave is the key of this process's last save of job id's manifest
// (saved: there is one), or busy while a save in place is under way.
func (s *Store) lastSave(id string) (k fileKey, busy, saved bool) {
	if _, busy := s.inflight.Load(id); busy {
		return fileKey{}, true, false
	}
	v, ok := s.written.Load(id)
	if !ok {
		return fileKey{}, false, false
	}
	return v.(fileKey), false, true
}

// saveKeyOf is keyOf for a stat.
func saveKeyOf(st *syscall.Stat_t) fileKey {
	return fileKey{int64(st.Ino), st.Size, st.Mtim.Nano()}
}

// New returns a store for dir (made absolute so agents can be given paths).
func New(dir string) *Store {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return &Store{Dir: dir}
}

// JobDir is the folder of job id.
func (s *Store) JobDir(id string) string { return filepath.Join(s.Dir, id) }

// dirOf returns JobDir for each name a listing of the folder gives (no
// separator, not "." or ".."): without filepath.Join's Clean, which is
// most of the CPU of listing 50,000 names from the index.
func (s *Store) dirOf() func(name string) string {
	if s.Dir != filepath.Clean(s.Dir) {
		return s.JobDir
	}
	prefix := s.Dir + string(filepath.Separator)
	return func(name string) string {
		if name == "." || name == ".." || strings.ContainsRune(name, filepath.Separator) {
			return s.JobDir(name)
		}
		return prefix + name
	}
}

// dirOfShared is dirOf for a listing held as a whole (a display's, its
// names from the index): the paths are cut from 64 KiB chunks, 50,000 of
// them in about 60 allocations rather than 50,000. A path keeps its chunk
// alive, so a caller that keeps a few entries of many should use dirOf.
func (s *Store) dirOfShared() func(name string) string {
	dirOf := s.dirOf()
	if s.Dir != filepath.Clean(s.Dir) {
		return dirOf
	}
	prefix := s.Dir + string(filepath.Separator)
	var chunk []byte
	return func(name string) string {
		if name == "" || name == "." || name == ".." || strings.ContainsRune(name, filepath.Separator) {
			return dirOf(name)
		}
		n := len(prefix) + len(name)
		if cap(chunk)-len(chunk) < n {
			chunk = make([]byte, 0, max(64<<10, n))
		}
		start := len(chunk)
		chunk = append(append(chunk, prefix...), name...)
		// Nothing writes to these bytes again: later paths are appended
		// after them, or go to a new chunk.
		return unsafe.String(&chunk[start], n)
	}
}

// Workspace is the job's workspace folder.
func (s *Store) Workspace(id string) string { return filepath.Join(s.Dir, id, WorkspaceDir) }

// Entry is one job found in the folder, valid or not.
type Entry struct {
	ID       string
	Dir      string
	Manifest *manifest.Manifest
	Err      error // why the manifest is invalid
	// Unplaced is set for a bare <name>.json the daemon has not moved yet.
	Unplaced string
	// Leftover is set instead for a bare name that is the second name a
	// placement left of its job's job.json (Store.Leftover): no job of
	// its own, dropped from listings; the daemon removes it (Place).
	Leftover string
	// Partial says the entry holds only a Summary (Sum) of a valid
	// manifest, and Manifest is nil (ListSummaries): a listing of 50,000
	// finished jobs keeps ~150 bytes each, not a manifest struct each.
	Partial bool
	// sum is the Summary a Partial entry holds, or else idx and rec
	// name the index's record it is decoded from when asked (a display
	// of 50,000 jobs renders from the records it read, with no copy of
	// each summary).
	sum *Summary
	idx *indexView
	rec int
	// Unchecked says the Summary was decoded without the manifest's
	// checks (ScanSummaries: a job neither running nor a template, not
	// checked in the index): good to count and show, never a manifest to
	// run.
	// Reading the job in full (Load, a transaction's Begin) checks it.
	Unchecked bool
	// read is the read Manifest was decoded from, for a job to run
	// (Loaded); nil for any other.
	read *FileRead
}

// Loaded returns the entry's manifest with the read it was decoded from,
// for a job to run that a listing read in full (loadEntry); nil for any
// other entry.
func (e *Entry) Loaded() *Loaded {
	if e.Manifest == nil || e.read == nil || e.Err != nil {
		return nil
	}
	return &Loaded{M: e.Manifest, FileRead: *e.read}
}

// View returns the entry's manifest, or for a Partial entry a new manifest
// holding only its Summary's fields: for a caller that reads one entry at
// a time, so that no listing holds a manifest per job. Nil if invalid.
func (e *Entry) View() *manifest.Manifest {
	if e.Manifest != nil {
		return e.Manifest
	}
	sum, ok := e.summary()
	if !ok {
		return nil
	}
	return sum.manifest()
}

// Sum returns a Partial entry's Summary (a copy: changing it changes no
// entry), or nil when it holds none (a full manifest, an invalid one).
func (e *Entry) Sum() *Summary {
	sum, ok := e.summary()
	if !ok {
		return nil
	}
	return &sum
}

// summary is the entry's Summary, from the entry or from its index
// record.
func (e *Entry) summary() (Summary, bool) {
	switch {
	case e.sum != nil:
		return *e.sum, true
	case e.idx != nil:
		return e.idx.shared(e.rec).Sum, true // a display's: it holds the view
	}
	return Summary{}, false
}

// setSum makes e a Partial entry holding sum.
func (e *Entry) setSum(sum Summary, unchecked bool) {
	e.Manifest, e.sum, e.idx, e.Partial, e.Unchecked, e.read = nil, &sum, nil, true, unchecked, nil
}

// ViewInto is View that fills m rather than a new manifest, for a caller
// that goes through thousands of entries and keeps nothing of each view
// (a new manifest per finished job was most of the garbage at the end of
// the daemon's start-up scan). It returns the entry's own manifest, if it
// has one, or m; nil if invalid.
func (e *Entry) ViewInto(m *manifest.Manifest) *manifest.Manifest {
	if e.Manifest != nil {
		return e.Manifest
	}
	sum, ok := e.summary()
	if !ok {
		return nil
	}
	sum.fill(m)
	return m
}

// List returns every job folder and every bare manifest, sorted by id.
func (s *Store) List() ([]Entry, error) {
	out, err := s.scanNames()
	if err != nil {
		return nil, err
	}
	parallel(len(out), 0, func(i int) { s.loadEntry(&out[i]) })
	return dropNonJobs(out), nil
}

// EachJob calls each for every job folder a listing shows, one at a
// time in id order: not a dot-folder, nor a folder without a manifest,
// nor a bare manifest (no folder yet). The entry is loaded as List loads
// it (its Manifest, or Err: why it is invalid or could not be read) and
// only lent for the call. The folder's names are read first (what sorts
// them); each job's manifest is read at its turn and let go after it, so
// a walk of 50,000 jobs holds their names, not their manifests. An error
// from each stops the walk and is returned.
func (s *Store) EachJob(each func(*Entry) error) error {
	es, err := s.scanNames()
	if err != nil {
		return err
	}
	for i := range es {
		e := &es[i]
		if e.Dir == "" {
			continue // a bare manifest
		}
		s.loadEntry(e)
		if e.Dir == "" {
			continue // not a job folder (loadEntry)
		}
		err := each(e)
		*e = Entry{}
		if err != nil {
			return err
		}
	}
	return nil
}

func dropNonJobs(es []Entry) []Entry {
	out := es[:0]
	for _, e := range es {
		if e.Dir != "" || e.Unplaced != "" {
			out = append(out, e)
		}
	}
	return out
}

// CheckDir says whether the jobs folder is there to take a job: an error
// wrapping ErrNotFound ("jobs folder DIR: not found") when it does not
// exist. A steward's command never makes it: a mistyped --jobs-dir would
// make a folder no logistd serves (logistd makes its own when it starts).
func (s *Store) CheckDir() error {
	fi, err := os.Stat(s.Dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("jobs folder %s: %w", s.Dir, ErrNotFound)
	case err != nil:
		return fmt.Errorf("jobs folder: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("jobs folder %s is not a folder", s.Dir)
	}
	return nil
}

// scanNames lists the job folders that hold a manifest and the bare
// manifests, sorted by id, without reading them. The folder is read a
// batch of names at a time (not os.ReadDir's 50,000 entries at once), and
// a job's ID is the end of its Dir: one string per job.
func (s *Store) scanNames() ([]Entry, error) {
	f, err := os.Open(s.Dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("jobs folder %s: %w", s.Dir, ErrNotFound)
		}
		return nil, fmt.Errorf("read jobs folder: %w", err)
	}
	defer func() { _ = f.Close() }() // read only
	var out []Entry
	dirOf := s.dirOf()
	for {
		ents, err := f.ReadDir(1024)
		for _, e := range ents {
			name := e.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			if e.IsDir() {
				dir := dirOf(name)
				if strings.HasSuffix(dir, name) {
					name = dir[len(dir)-len(name):]
				}
				out = append(out, Entry{ID: name, Dir: dir})
				continue
			}
			// Not only regular files: a symlink or a pipe named so is
			// listed, and reported as not placed (readBare).
			if strings.HasSuffix(name, ".json") {
				out = append(out, Entry{ID: strings.TrimSuffix(name, ".json"), Unplaced: filepath.Join(s.Dir, name)})
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read jobs folder: %w", err)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// loadEntry reads the manifest of an entry from scanNames. A folder with
// no manifest is marked by Dir == "", a bare name that is a placement's
// leftover by Leftover (both dropped by the caller).
func (s *Store) loadEntry(e *Entry) { s.loadEntryFrom(e, nil) }

// leftoverEntry marks a bare manifest's entry that is a placement's
// leftover (Leftover), and reads no more of it.
func (s *Store) leftoverEntry(e *Entry) {
	if s.Leftover(e.Unplaced) {
		e.Leftover, e.Unplaced = e.Unplaced, ""
	}
}

// loadEntryFrom is loadEntry for a job folder's manifest already read as
// r (nil: read it now). A job to run keeps its read (Entry.Loaded).
func (s *Store) loadEntryFrom(e *Entry, r *read) {
	if e.Unplaced != "" {
		if s.Leftover(e.Unplaced) {
			e.Leftover, e.Unplaced = e.Unplaced, ""
			return
		}
		s.n.reads.Add(1)
		s.n.decodes.Add(1)
		s.n.checks.Add(1)
		// As Place reads it: a symlink is not followed.
		data, _, err := readBare(e.Unplaced)
		if err != nil {
			e.Err = err
			return
		}
		e.Manifest, e.Err = manifest.Decode(e.Unplaced, data)
		return
	}
	var l *Loaded
	l, e.Err = s.loadFile(e.ID, r)
	if e.Err == nil {
		e.Manifest = l.M
		if l.M.Status.Active() && l.M.Schedule == nil {
			e.read = &l.FileRead
		}
	}
	if e.Err != nil && errors.Is(e.Err, ErrNotFound) {
		if _, err := os.Stat(filepath.Join(e.Dir, ManifestFile)); err != nil {
			e.Dir = "" // not a job folder
		}
	}
}

// parallel runs f(0..n-1) on a few goroutines: reading thousands of
// manifests is CPU-bound (decoding) and uses every core, or at most
// workers of them (0: no bound).
func parallel(n, workers int, f func(i int)) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}

// Load reads and checks job id's manifest. The job_id inside must match the
// folder (a missing one is taken from the folder).
func (s *Store) Load(id string) (*manifest.Manifest, error) {
	m, _, err := s.LoadRaw(id)
	return m, err
}

// maxRereads bounds how often LoadRaw reads a manifest file again that it
// met half saved.
const maxRereads = 9

// LoadRaw is Load that also returns the bytes the manifest was read from.
func (s *Store) LoadRaw(id string) (*manifest.Manifest, []byte, error) {
	l, err := s.loadFile(id, nil)
	if err != nil {
		return nil, nil, err
	}
	return l.M, l.Raw, nil
}

// read is a FileRead and, if a caller has already decoded its bytes
// unchecked (peekFinished), what they decoded to.
type read struct {
	FileRead
	trusted *manifest.Manifest
}

// loadFile reads (unless r is given), decodes and checks job id's
// manifest.
func (s *Store) loadFile(id string, r *read) (*Loaded, error) {
	var err error
	if r == nil {
		r = &read{}
		r.FileRead, err = s.readManifest(id)
	}
	for try := 0; ; try++ {
		if err != nil {
			return nil, err
		}
		m, perr := s.parse(id, r.Raw, r.trusted)
		if perr == nil {
			return &Loaded{M: m, FileRead: r.FileRead}, nil
		}
		// A read that met the daemon's in-place save (Store.InPlace) can
		// mix the old and new bytes into JSON that neither is: refused
		// only if the file says the same when read again. A loaded
		// machine can meet a save again on the next read: the waits grow
		// (1, 2, 4 … 16 ms, about 100 ms in all) before the read gives up.
		if try == maxRereads || !beingWritten(filepath.Join(s.JobDir(id), ManifestFile)) {
			return nil, perr
		}
		time.Sleep(min(time.Millisecond<<try, 16*time.Millisecond))
		again, rerr := s.readManifest(id)
		if rerr == nil && bytes.Equal(again.Raw, r.Raw) {
			return nil, perr
		}
		r, err = &read{FileRead: again}, rerr
	}
}

// ReadManifest returns the bytes of job id's manifest file, unchecked.
func (s *Store) ReadManifest(id string) ([]byte, error) {
	r, err := s.readManifest(id)
	return r.Raw, err
}

// readManifest is ReadManifest with the file's identity.
func (s *Store) readManifest(id string) (FileRead, error) {
	if err := manifest.ValidID(id); err != nil {
		return FileRead{}, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	s.n.reads.Add(1)
	r, err := readManifestFile(filepath.Join(s.JobDir(id), ManifestFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return FileRead{}, fmt.Errorf("job %s: %w", id, ErrNotFound)
		}
		return FileRead{}, err
	}
	return r, nil
}

// Parse checks and decodes data, job id's manifest file as read.
func (s *Store) Parse(id string, data []byte) (*manifest.Manifest, error) {
	return s.parse(id, data, nil)
}

// parse is Parse; trusted, if not nil, is what data decodes to unchecked
// (manifest.DecodeTrusted), to check rather than decode again.
func (s *Store) parse(id string, data []byte, trusted *manifest.Manifest) (*manifest.Manifest, error) {
	p := filepath.Join(s.JobDir(id), ManifestFile)
	m, err := s.decode(id, p, data, trusted)
	if err != nil {
		return nil, err
	}
	if m.JobID == "" {
		// The folder's name is the id (the manifest's own was checked).
		if err := m.BranchableID(id); err != nil {
			return nil, &manifest.Error{File: p, Pointer: "/job_id", Reason: "the folder's name: " + err.Error()}
		}
		m.JobID = id
	} else if m.JobID != id {
		return nil, &manifest.Error{File: p, Pointer: "/job_id", Reason: fmt.Sprintf("%q does not match its folder %q", m.JobID, id)}
	}
	return m, nil
}

func readManifestFile(p string) (FileRead, error) {
	r, err := readManifestOnce(p)
	for try := 0; err == nil && try < 3 && !json.Valid(r.Raw) && beingWritten(p); try++ {
		// The daemon rewrites manifests in place (Store.InPlace): a read
		// that met a write half done is not JSON; read it again.
		time.Sleep(time.Millisecond)
		r, err = readManifestOnce(p)
	}
	return r, err
}

// beingWritten reports whether file p changed within the last second: a
// read of it that does not parse may have met a write in progress. An
// older broken file is just broken, and is not read again.
func beingWritten(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && time.Since(fi.ModTime()) < time.Second
}

func readManifestOnce(p string) (FileRead, error) {
	data, st, err := regfile.ReadLimitedStat(p, manifest.MaxSize)
	if err != nil {
		return FileRead{}, err
	}
	return FileRead{Raw: data, key: keyOfStat(&st)}, nil
}

// decode checks data fully unless these exact bytes passed before. trusted,
// if not nil, is data decoded unchecked already.
func (s *Store) decode(id, file string, data []byte, trusted *manifest.Manifest) (*manifest.Manifest, error) {
	sum := sha256.Sum256(data)
	passed := false
	if v, ok := s.checked.Load(id); ok && v.([32]byte) == sum {
		passed = true
	} else if s.Committed != nil && s.Committed(id, sum) {
		s.checked.Store(id, sum)
		passed = true
	}
	if trusted == nil {
		s.n.decodes.Add(1)
	}
	if passed {
		if trusted != nil {
			return trusted, nil
		}
		return manifest.DecodeTrusted(file, data)
	}
	s.n.checks.Add(1)
	m, err := manifest.Check(file, data, trusted)
	if err == nil {
		s.checked.Store(id, sum)
	}
	return m, err
}

// Save replaces job id's manifest atomically and durably.
func (s *Store) Save(m *manifest.Manifest) error {
	b, err := m.Encode()
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	return s.WriteManifest(m.JobID, b)
}

// WriteManifest replaces job id's manifest with b (an encoded manifest)
// atomically and durably, and remembers the file as this process's own
// write (WrittenHere) with content that needs no check when read back.
// Both are noted before the rename makes the file visible: the watcher
// hears of the rename at once, and an echo taken for a change from outside
// costs a full check of the manifest and a needless nudge of its job.
func (s *Store) WriteManifest(id string, b []byte) error {
	return s.writeManifest(id, b, atomicfile.WriteFileNoting)
}

// WriteManifestCopy is WriteManifest without making the file durable: for
// a transaction whose history already holds the manifest (jobtx). With
// InPlace the file is overwritten in place (atomicfile.WriteInPlace):
// readers retry a torn read (readManifestFile). So is a file whose other
// name is its placement's bare name, still there (placedFile): the file
// keeps its inode, so that the pair stays recognisable after a crash.
func (s *Store) WriteManifestCopy(id string, b []byte) error {
	if s.InPlace {
		// The watcher may hear of the write before its result can be
		// noted (the file keeps its inode): until then it is ours too.
		s.inflight.Store(id, true)
		defer s.inflight.Delete(id)
		return s.writeManifest(id, b, func(p string, b []byte, perm os.FileMode, after func(os.FileInfo)) error {
			return atomicfile.WriteInPlaceShared(p, b, perm, after, s.placedFile(id))
		})
	}
	return s.writeManifest(id, b, atomicfile.WriteCopy)
}

func (s *Store) writeManifest(id string, b []byte, write func(string, []byte, os.FileMode, func(os.FileInfo)) error) error {
	if err := manifest.CheckSize(id, b); err != nil {
		return err
	}
	p := filepath.Join(s.JobDir(id), ManifestFile)
	s.checked.Store(id, sha256.Sum256(b))
	err := write(p, b, 0o600, func(fi os.FileInfo) {
		if k, ok := keyOf(fi); ok {
			s.written.Store(id, k)
		}
	})
	// After the write, even a failed one (it may have changed the file):
	// a listing that read the journal before this line re-reads the job
	// at its next turn.
	s.NoteChanged(id)
	return err
}

// Lock is a held per-job or daemon lock.
type Lock struct {
	f *os.File
	// fi is f's fstat, taken at the first Relock (nil: not yet): a
	// descriptor's folder never changes, so each later Relock compares
	// the path's lstat against it without an fstat.
	fi os.FileInfo
	// manifest is job.json's stat, taken by Relock as soon as the lock
	// was (manifestOK): the transaction that holds the lock asks whether
	// the file is still its own write (WrittenHereAs) from it, rather
	// than by a stat of its own.
	manifest   syscall.Stat_t
	manifestOK bool
}

// Manifest is job.json's stat as Relock took it right after it took the
// lock (nil: not taken so, as by LockJob): no one who takes the lock (a
// steward, another transaction) can have written it since while the lock
// is held.
func (l *Lock) Manifest() *syscall.Stat_t {
	if l == nil || !l.manifestOK {
		return nil
	}
	return &l.manifest
}

// fstatLock is (*os.File).Stat for a lock's descriptor; tests count its
// calls.
var fstatLock = (*os.File).Stat

// Unlock releases the lock.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close() // a directory or lock file opened only to be locked
	l.f = nil
	return err
}

// LockJob takes job id's exclusive lock, waiting for it. Every
// read-modify-write of a job's manifest and history happens under it, so a
// steward command and the daemon never lose each other's updates. The lock
// is an flock on the job folder itself: a lock file would be one more file
// created per job, which costs more than the rest of a step on some file
// systems.
func (s *Store) LockJob(id string) (*Lock, error) {
	l, _, err := s.lockJob(id, syscall.LOCK_EX)
	return l, err
}

// TryLockJob is LockJob that does not wait: held is false (and the lock
// nil) when another holds job id's lock now.
func (s *Store) TryLockJob(id string) (l *Lock, held bool, err error) {
	l, busy, err := s.lockJob(id, syscall.LOCK_EX|syscall.LOCK_NB)
	return l, !busy && err == nil, err
}

// lockJob takes job id's lock with flock's how; busy: LOCK_NB found it
// held by another.
func (s *Store) lockJob(id string, how int) (l *Lock, busy bool, err error) {
	dir := s.JobDir(id)
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, fmt.Errorf("job %s: %w", id, ErrNotFound)
		}
		return nil, false, err
	}
	f, err := regfile.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, false, fmt.Errorf("open job lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		_ = f.Close() // a directory opened read-only
		if err == syscall.EWOULDBLOCK {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("lock job %s: %w", id, err)
	}
	return &Lock{f: f}, false, nil
}

// Release releases the lock but keeps its file open for Relock: a job's
// engine takes and releases its lock at every step.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	return syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
}

// Relock takes job id's lock again through l, kept open since Release, as
// LockJob would take it. If the job's lock file is no longer l's (the job
// folder was replaced), l is closed and a new lock taken.
func (s *Store) Relock(id string, l *Lock) (*Lock, error) {
	cur, err := os.Lstat(s.JobDir(id))
	var merr error
	if l.fi == nil {
		l.fi, merr = fstatLock(l.f)
	}
	if err != nil || merr != nil || !os.SameFile(cur, l.fi) {
		_ = l.Unlock() // not held: released at Release
		return s.LockJob(id)
	}
	for {
		err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			if err != nil {
				_ = l.Unlock() // not taken; the error is flock's
				return nil, fmt.Errorf("lock job %s: %w", id, err)
			}
			// job.json's stat under the lock: the job is still there,
			// and the transaction's WrittenHereAs needs no stat of its own.
			mf := filepath.Join(s.JobDir(id), ManifestFile)
			if err := syscall.Stat(mf, &l.manifest); err != nil {
				_ = l.Unlock() // taken for nothing
				if errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
				}
				return nil, &os.PathError{Op: "stat", Path: mf, Err: err}
			}
			l.manifestOK = true
			return l, nil
		}
	}
}

// DaemonLockedError says another daemon serves the folder.
type DaemonLockedError struct {
	Dir string
	PID int
}

func (e *DaemonLockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("another logistd (pid %d) is already running on %s", e.PID, e.Dir)
	}
	return fmt.Sprintf("another logistd is already running on %s", e.Dir)
}

// LockDaemon takes the folder's daemon lock without waiting and writes our
// pid into it. The kernel releases it when the process dies, so a crash
// never leaves a stale lock.
func (s *Store) LockDaemon() (*Lock, error) {
	p := filepath.Join(s.Dir, daemonLock)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open daemon lock: %w", err)
	}
	for start := time.Now(); ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		b, _ := os.ReadFile(p)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		// A daemon that was killed while starting an agent leaves the child
		// holding a copy of the lock's descriptor until its exec closes it:
		// if the holder is dead, wait a moment for that.
		if errors.Is(err, syscall.EWOULDBLOCK) && pid > 0 && pid != os.Getpid() &&
			syscall.Kill(pid, 0) == syscall.ESRCH && time.Since(start) < 2*time.Second {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		_ = f.Close() // nothing written; the error is flock's
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &DaemonLockedError{Dir: s.Dir, PID: pid}
		}
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	// Readers learn that a daemon runs, and then trust the pid above, from
	// this OFD lock (DaemonPID); the flock is what keeps a second daemon out.
	_ = advertise(f)
	return &Lock{f: f}, nil
}

// Create makes a new job folder with the manifest and an empty workspace.
// It fails with fs.ErrExist if the job exists.
func (s *Store) Create(m *manifest.Manifest) error {
	return s.CreateWith(m, nil)
}

// CreateWith is Create that first writes files (paths relative to the
// job folder, such as the prompt files the manifest names) into the new
// job's folder, each fsync'd with its folder: all there before the
// manifest, so no run can start without them.
func (s *Store) CreateWith(m *manifest.Manifest, files map[string][]byte) error {
	b, err := m.Encode()
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	return s.createFile(m.JobID, b, files)
}

// CreateFile is Create with the manifest file's bytes b as they are (an
// encoded manifest, not checked here: a job is checked when it is loaded).
func (s *Store) CreateFile(id string, b []byte) error {
	return s.createFile(id, b, nil)
}

func (s *Store) createFile(id string, b []byte, files map[string][]byte) error {
	dir := s.JobDir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("create job %s: %w", id, err)
	}
	if err := atomicfile.SyncDir(s.Dir); err != nil {
		return err
	}
	if err := s.EnsureWorkspace(id); err != nil {
		return err
	}
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		clean := filepath.Clean(rel)
		if !filepath.IsLocal(clean) || clean == ManifestFile {
			return fmt.Errorf("create job %s: %q is no file of its folder", id, rel)
		}
		p := filepath.Join(dir, clean)
		if err := atomicfile.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("create job %s: %w", id, err)
		}
		if err := atomicfile.WriteFile(p, files[rel], 0o600); err != nil {
			return fmt.Errorf("create job %s: %w", id, err)
		}
	}
	return s.WriteManifest(id, b)
}

// EnsureWorkspace creates the job's workspace if it is missing. The job
// folder is not fsync'd here but marked (atomicfile.MarkDirty): the next
// manifest save or history append in it fsyncs it, sharing one folder fsync
// with the job's other new entries, before anything relies on the workspace.
func (s *Store) EnsureWorkspace(id string) error {
	return atomicfile.MkdirDeferred(s.Workspace(id), 0o700)
}

// MakeWorkspace is EnsureWorkspace for a workspace its caller has just
// seen missing (atomicfile.MkdirMissingDeferred: the mkdir first).
func (s *Store) MakeWorkspace(id string) error {
	return atomicfile.MkdirMissingDeferred(s.Workspace(id), 0o700)
}
