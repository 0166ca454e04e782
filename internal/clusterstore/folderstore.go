package clusterstore

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/signing"
)

// FolderStore is the Store over a jobs folder in file mode's format: each
// job is the folder the daemon runs and the CLI reads — <id>/job.json
// written by jobstore's manifest writer (jobstore.CreateFile,
// WriteManifest), <id>/history.jsonl appended by history.Log's unit write
// (AppendSealed: the write, fsync, head, mark and rotation the engine's
// own appends go through), a unit's files at their paths in the folder —
// under the job's flock (jobstore.LockJob), the lock every jobtx
// transaction of the daemon and the steward's CLI takes. What file mode
// has no place for — the lease, the epoch that fences, the spending the
// budget is checked against, recovery points' listings, the files the
// store wrote — is the job's row, rowFile in its folder; nodes, keys and
// content-addressed objects are under clusterDir. An exclusive flock of
// clusterDir/lock serialises the store's transactions (a claim scans
// every job), like a database's row locks. A job folder file mode made
// (no row) is a job too, and records file mode's writers append are a
// steward's change to the store (read, adopt). A unit's history is
// appended before its row is replaced: a crash between the two is read
// as such a change (the lease holder fenced, the job claimed again).
type FolderStore struct {
	dir  string
	jobs *jobstore.Store
	now  func() time.Time
	// made: clusterDir's folders exist (OpenFolder makes them; the
	// owner's store, OwnFolder, when a method first needs them).
	made atomic.Bool
	// own is the owner's view of its jobs (own.go); nil unless OwnFolder.
	own *owner
}

// Names in the jobs folder and a job's folder.
const (
	// clusterDir holds what is not any one job's; a dot name, so file
	// mode's listing (jobstore) skips it.
	clusterDir = ".cluster"
	// rowFile is a job's row.
	rowFile = ".cluster-row.json"
)

// folderRow is a job's row: the Job's fields file mode does not hold
// (the manifest is job.json, the history history.jsonl; NextSeq and
// LastHash are kept to read a job without scanning its history, and
// brought up to it when it moved on: adopt).
type folderRow struct {
	Job    Job             `json:"job"`
	Points []RecoveryPoint `json:"points,omitempty"`
	// Files are the paths, in the job's folder, of the files units and
	// steerings wrote.
	Files []string `json:"files,omitempty"`
	// Ticks are a template's fired ticks (RFC 3339, UTC) and their runs.
	Ticks map[string]string `json:"ticks,omitempty"`
	// HistorySize is the size of history.jsonl as the store last left
	// it (-1: never read): another size means file mode wrote it (adopt).
	HistorySize int64 `json:"history_size"`
}

// errAhead: a job's history, under the job's lock, is not where its row
// (adopted at the read) says: a writer that took no lock moved it.
var errAhead = errors.New("the job's history moved on while the store wrote it")

// OpenFolder opens (creating) a store in the jobs folder dir.
func OpenFolder(dir string) (*FolderStore, error) {
	s := newFolder(dir)
	return s, s.mkdirs()
}

// newFolder is the store of dir, making nothing yet.
func newFolder(dir string) *FolderStore {
	return &FolderStore{dir: dir, jobs: jobstore.New(dir), now: time.Now}
}

// mkdirs makes clusterDir's folders, once.
func (s *FolderStore) mkdirs() error {
	if s.made.Load() {
		return nil
	}
	for _, sub := range []string{"nodes", "keys", "objects"} {
		if err := atomicfile.MkdirAll(filepath.Join(s.dir, clusterDir, sub), 0o700); err != nil {
			return err
		}
	}
	s.made.Store(true)
	return nil
}

// locked runs f under the store's exclusive lock.
func (s *FolderStore) locked(f func() error) error {
	if err := s.mkdirs(); err != nil {
		return err
	}
	lf, err := os.OpenFile(filepath.Join(s.dir, clusterDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = lf.Close() }() // also releases the lock
	for {
		err = unix.Flock(int(lf.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", s.dir, err)
	}
	return f()
}

// jobLocked runs f under job id's own lock too (jobstore.LockJob), which
// file mode's transactions (jobtx) take: a steward's CLI and the store
// never interleave their writes to one job.
func (s *FolderStore) jobLocked(id string, f func() error) error {
	if err := validID(id); err != nil {
		return err
	}
	lk, err := s.jobs.LockJob(id)
	if errors.Is(err, jobstore.ErrNotFound) {
		return fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return err
	}
	defer func() { _ = lk.Unlock() }()
	return f()
}

func (s *FolderStore) rowPath(id string) string { return filepath.Join(s.jobs.JobDir(id), rowFile) }

func validID(id string) error {
	if id == "" || strings.ContainsAny(id, "/\\\x00") || id[0] == '.' {
		return fmt.Errorf("invalid job id %q", id)
	}
	return nil
}

// read reads job id: its manifest (job.json), its row, and where its
// history stands. A job folder without a row is a job file mode made
// (placed by the daemon's intake, or logist submit): its row is what its
// files say (fileModeRow). A history that moved on since the store last
// wrote it was written by file mode's own writers (jobtx: a steward's
// CLI, a daemon), which the store takes as a steward's change (adopt).
func (s *FolderStore) read(id string) (*folderRow, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	m, err := s.jobs.ReadManifest(id)
	if errors.Is(err, jobstore.ErrNotFound) {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var fr folderRow
	b, err := os.ReadFile(s.rowPath(id))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fr = folderRow{Job: fileModeJob(id, m), HistorySize: -1}
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(b, &fr); err != nil {
			return nil, fmt.Errorf("job %s: %w", id, err)
		}
		if fr.Job.ID != id {
			// Another job's row, copied with its folder (file mode
			// makes a schedule's run from its template's files).
			fr = folderRow{Job: fileModeJob(id, m), HistorySize: -1}
		}
	}
	fr.Job.Manifest = m
	return &fr, s.adopt(&fr)
}

// fileModeJob is the row of a job file mode made, as its manifest says:
// its status, budget and spending; no lease, epoch 0.
func fileModeJob(id string, m []byte) Job {
	h := readHead(m) // a manifest file mode cannot read has no status
	return Job{ID: id, Status: h.Status, BudgetMicros: h.budget(), SpentMicros: h.cost(), Template: h.template()}
}

// adopt brings fr up to its history when the history is not as the
// store left it (its size says so: one stat): file mode wrote it, so the
// row takes its sequence and last hash, the manifest's status, budget
// and spending (never less than the row's), and the epoch moves on with the lease released — what a steward's change does
// (Steered), so whoever held the lease is fenced out.
func (s *FolderStore) adopt(fr *folderRow) error {
	dir := s.jobs.JobDir(fr.Job.ID)
	size := int64(0)
	switch fi, err := os.Stat(history.Path(dir)); {
	case err == nil:
		size = fi.Size()
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if size == fr.HistorySize {
		return nil
	}
	es, err := history.ReadEntries(dir)
	if err != nil {
		return fmt.Errorf("job %s: %w", fr.Job.ID, err)
	}
	next, last := int64(0), ""
	if len(es) > 0 {
		next, last = es[len(es)-1].Seq+1, es[len(es)-1].Hash
	}
	fromFileMode := fr.HistorySize < 0
	fr.HistorySize = size
	if next == fr.Job.NextSeq && last == fr.Job.LastHash {
		return nil // the same records (a torn tail cut, a rotation)
	}
	fr.Job.NextSeq, fr.Job.LastHash = next, last
	if fromFileMode {
		return nil
	}
	fm := fileModeJob(fr.Job.ID, fr.Job.Manifest)
	if fm.Status.Valid() {
		fr.Job.Status = fm.Status
	}
	fr.Job.BudgetMicros = fm.BudgetMicros
	fr.Job.SpentMicros = max(fr.Job.SpentMicros, fm.SpentMicros)
	fr.Job.Epoch++
	fr.Job.Owner, fr.Job.LeaseUntil = "", time.Time{}
	return nil
}

// writeRow replaces fr's row (durably: atomicfile).
func (s *FolderStore) writeRow(fr *folderRow) error {
	row := *fr
	row.Job.Manifest = nil // job.json holds it
	b, err := json.Marshal(row)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(s.rowPath(fr.Job.ID), b, 0o600)
}

// create makes a new job folder (jobstore.CreateFile, as logist submit
// does) and its row. A folder holding a manifest is a job (ErrExists),
// whether or not it has a row; one without (a crash before the manifest
// was placed) is taken.
func (s *FolderStore) create(j Job, files map[string][]byte) error {
	if err := validID(j.ID); err != nil {
		return err
	}
	if err := checkOwnFiles(j.ID, files); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(s.jobs.JobDir(j.ID), jobstore.ManifestFile)); err == nil {
		return fmt.Errorf("job %s: %w", j.ID, ErrExists)
	}
	err := s.jobs.CreateFile(j.ID, j.Manifest)
	if errors.Is(err, fs.ErrExist) {
		err = s.jobs.WriteManifest(j.ID, j.Manifest)
	}
	if err != nil {
		return err
	}
	fr := &folderRow{Job: j}
	if err := s.writeFiles(fr, files); err != nil {
		return err
	}
	return s.writeRow(fr)
}

// appendLines appends a unit's lines to job id's history.jsonl through
// history.Log (AppendSealed), after checking that the history is where
// the row says: the history in the folder is the record.
func (s *FolderStore) appendLines(fr *folderRow, lines [][]byte) error {
	if len(lines) == 0 {
		return nil
	}
	dir := s.jobs.JobDir(fr.Job.ID)
	lg, _, err := history.OpenWith(dir, history.Options{})
	if err != nil {
		return fmt.Errorf("job %s: %w", fr.Job.ID, err)
	}
	defer func() { _ = lg.Close() }() // each unit was fsync'd as appended
	if lg.State().NextSeq != fr.Job.NextSeq {
		return fmt.Errorf("job %s: history at record %d, row at %d: %w", fr.Job.ID, lg.State().NextSeq, fr.Job.NextSeq, errAhead)
	}
	if err := lg.AppendSealed(lines); err != nil {
		return err
	}
	fr.HistorySize = lg.Size()
	return nil
}

// writeFiles writes files into job id's folder and names them in fr.
func (s *FolderStore) writeFiles(fr *folderRow, files map[string][]byte) error {
	dir := s.jobs.JobDir(fr.Job.ID)
	for p, b := range files {
		if err := ownFile(fr.Job.ID, p); err != nil {
			return err
		}
		full := filepath.Join(dir, p)
		if err := atomicfile.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			return err
		}
		if err := atomicfile.WriteFile(full, b, 0o600); err != nil {
			return err
		}
		if !slices.Contains(fr.Files, p) {
			fr.Files = append(fr.Files, p)
		}
	}
	slices.Sort(fr.Files)
	return nil
}

// checkOwnFiles is CheckFiles and ownFile for each of files.
func checkOwnFiles(id string, files map[string][]byte) error {
	if err := CheckFiles(id, files); err != nil {
		return err
	}
	for p := range files {
		if err := ownFile(id, p); err != nil {
			return err
		}
	}
	return nil
}

// ownFile refuses a file that would replace one of the job folder's own
// (its manifest, history or row).
func ownFile(id, p string) error {
	first := strings.SplitN(filepath.ToSlash(filepath.Clean(p)), "/", 2)[0]
	if first == jobstore.ManifestFile || first == rowFile || history.IsFile(first) {
		return fmt.Errorf("job %s: file %q would replace the job folder's own %s", id, p, first)
	}
	return nil
}

// RegisterNode implements Store.
func (s *FolderStore) RegisterNode(_ context.Context, node string, pub ed25519.PublicKey) error {
	return s.register(node, pub, false)
}

// RegisterSteward implements Store.
func (s *FolderStore) RegisterSteward(_ context.Context, id string, pub ed25519.PublicKey) error {
	return s.register(id, pub, true)
}

func (s *FolderStore) register(node string, pub ed25519.PublicKey, steward bool) error {
	if err := validID(node); err != nil {
		return err
	}
	return s.locked(func() error {
		path := filepath.Join(s.dir, clusterDir, "nodes", node+".json")
		var n Node
		if b, err := os.ReadFile(path); err == nil {
			if err := json.Unmarshal(b, &n); err != nil {
				return err
			}
			if n.KeyID != signing.KeyID(pub) {
				return fmt.Errorf("node %s is registered with key %s, not %s", node, n.KeyID, signing.KeyID(pub))
			}
		}
		n = Node{ID: node, KeyID: signing.KeyID(pub), Public: pub, HeartbeatAt: s.now().UTC(), Steward: steward}
		b, err := json.Marshal(n)
		if err != nil {
			return err
		}
		return atomicfile.WriteFile(path, b, 0o600)
	})
}

// Nodes implements Store.
func (s *FolderStore) Nodes(context.Context) ([]Node, error) {
	var out []Node
	err := s.locked(func() error {
		names, err := filepath.Glob(filepath.Join(s.dir, clusterDir, "nodes", "*.json"))
		if err != nil {
			return err
		}
		slices.Sort(names)
		for _, name := range names {
			b, err := os.ReadFile(name)
			if err != nil {
				return err
			}
			var n Node
			if err := json.Unmarshal(b, &n); err != nil {
				return err
			}
			out = append(out, n)
		}
		return nil
	})
	return out, err
}

// Submit implements Store.
func (s *FolderStore) Submit(_ context.Context, id string, status lifecycle.Status, m []byte, budget int64) error {
	return s.locked(func() error {
		return s.create(Job{ID: id, Status: status, Manifest: m, BudgetMicros: budget, Template: IsTemplate(m)}, nil)
	})
}

// all reads every job of the store (under the lock): the folders of the
// jobs folder that hold a manifest, by id (jobstore's listing; dot names
// are not jobs).
func (s *FolderStore) all() ([]*folderRow, error) {
	names, err := filepath.Glob(filepath.Join(s.dir, "*", jobstore.ManifestFile))
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var out []*folderRow
	for _, name := range names {
		id := filepath.Base(filepath.Dir(name))
		if strings.HasPrefix(id, ".") {
			continue
		}
		fr, err := s.read(id)
		if err != nil {
			return nil, err
		}
		out = append(out, fr)
	}
	return out, nil
}

// Claim implements Store.
func (s *FolderStore) Claim(_ context.Context, node string, ttl time.Duration) (*Lease, error) {
	ls, err := s.claimWhere(node, ttl, 1, func(j *Job, now time.Time) bool { return Claimable(j, now) })
	if len(ls) == 0 {
		return nil, err
	}
	return ls[0], err
}

// TakeBack implements Store.
func (s *FolderStore) TakeBack(_ context.Context, node string, ttl time.Duration) ([]*Lease, error) {
	return s.claimWhere(node, ttl, -1, func(j *Job, _ time.Time) bool { return OwnLease(j, node) })
}

// claimWhere claims for node, under the store's lock, the jobs take
// accepts, at most limit of them (all when limit < 0).
func (s *FolderStore) claimWhere(node string, ttl time.Duration, limit int, take func(*Job, time.Time) bool) ([]*Lease, error) {
	var out []*Lease
	err := s.locked(func() error {
		all, err := s.all()
		if err != nil {
			return err
		}
		now := s.now()
		for _, fr := range all {
			if limit >= 0 && len(out) >= limit {
				return nil
			}
			if !take(&fr.Job, now) {
				continue
			}
			j, l := Claimed(fr.Job, node, now, ttl)
			fr.Job = j
			if err := s.writeRow(fr); err != nil {
				return err
			}
			out = append(out, &l)
		}
		return nil
	})
	return out, err
}

// Heartbeat implements Store.
func (s *FolderStore) Heartbeat(_ context.Context, l *Lease, ttl time.Duration) error {
	return s.locked(func() error {
		fr, err := s.read(l.Job)
		if err != nil {
			return err
		}
		if err := Fence(&fr.Job, l); err != nil {
			return err
		}
		fr.Job.LeaseUntil = s.now().Add(ttl)
		if err := s.writeRow(fr); err != nil {
			return err
		}
		l.Until = fr.Job.LeaseUntil
		return nil
	})
}

// Commit implements Store: the fence and the unit's rule (Apply) on the
// row, the objects, the records into history.jsonl, the files into the
// folder, the manifest into job.json, then the row; then the caller's
// own copy of the records (Unit.Write). A unit of the folder's owner
// under its lease (Own) is committed as own.go says.
func (s *FolderStore) Commit(_ context.Context, l *Lease, u Unit) error {
	if s.owns(l, &u) {
		return s.commitOwn(l, u)
	}
	err := s.locked(func() error {
		return s.jobLocked(l.Job, func() error {
			fr, err := s.read(l.Job)
			if err != nil {
				return err
			}
			j, err := Apply(fr.Job, l, &u, s.now())
			if err != nil {
				return err
			}
			for p := range u.Files {
				if err := ownFile(j.ID, p); err != nil {
					return err
				}
			}
			if err := s.heldObjects(j.ID, u.Point, u.Files, u.Objects); err != nil {
				return err
			}
			var dropped []string
			if u.Point != nil {
				for _, p := range fr.Points {
					if p.ID == u.Point.ID {
						dropped = Dropped(p.Snapshot, u.Point.Snapshot)
					}
				}
			}
			if err := s.writeObjects(u.Objects); err != nil {
				return err
			}
			if err := s.appendLines(fr, u.Lines); err != nil {
				return err
			}
			if err := s.writeFiles(fr, u.Files); err != nil {
				return err
			}
			if u.Manifest != nil {
				if err := s.jobs.WriteManifest(j.ID, u.Manifest); err != nil {
					return err
				}
			}
			fr.Job = j
			if u.Point != nil {
				fr.Points = slices.DeleteFunc(fr.Points, func(p RecoveryPoint) bool { return p.ID == u.Point.ID })
				fr.Points = append(fr.Points, *u.Point)
			}
			if err := s.writeRow(fr); err != nil {
				return err
			}
			if len(dropped) > 0 {
				_, err = s.collect(dropped)
			}
			return err
		})
	})
	if err == nil && u.Write != nil {
		err = u.Write()
	}
	return err
}

// writeObjects stores objects, those the store lacks, before the row
// that names them: a row never names content the store lacks. An object
// a failed commit leaves is content no point names, as harmless as a
// copy of it (collected).
func (s *FolderStore) writeObjects(objects map[string][]byte) error {
	for sum, b := range objects {
		p := filepath.Join(s.dir, clusterDir, "objects", sum)
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if err := atomicfile.WriteFile(p, b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// heldObjects checks that every object a change names (NamedObjects:
// its point's, its files') is in objects, which it carries, or stored
// (ErrMissingObject). Under the store's lock: no sweep runs beside it.
func (s *FolderStore) heldObjects(job string, p *RecoveryPoint, files map[string][]byte, objects map[string][]byte) error {
	sums, err := NamedObjects(p, files)
	if err != nil {
		return fmt.Errorf("job %s: %w", job, err)
	}
	for _, sum := range sums {
		if objects[sum] != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(s.dir, clusterDir, "objects", sum)); err != nil {
			return fmt.Errorf("job %s: object %s: %w", job, short(sum), ErrMissingObject)
		}
	}
	return nil
}

func (s *FolderStore) keyPath(key string) string {
	return filepath.Join(s.dir, clusterDir, "keys", fmt.Sprintf("%x.json", key))
}

// SubmitKeyed implements Store.
func (s *FolderStore) SubmitKeyed(_ context.Context, sub Submission) (bool, error) {
	if err := validID(sub.ID); err != nil {
		return false, err
	}
	if err := checkOwnFiles(sub.ID, sub.Files); err != nil {
		return false, err
	}
	repeat := false
	err := s.locked(func() error {
		keyPath := s.keyPath(sub.Key)
		if sub.Key != "" { // without a key, a job of the id is ErrExists below
			if use, err := s.keyUse(keyPath); err != nil {
				return err
			} else if use != nil {
				repeat = true
				return KeyReuse(use, &Steering{Job: sub.ID, Key: sub.Key, Command: sub.Command})
			}
		}
		if err := s.create(Job{ID: sub.ID, Status: sub.Status, Manifest: sub.Manifest, BudgetMicros: sub.BudgetMicros, Template: IsTemplate(sub.Manifest)}, sub.Files); err != nil {
			return err
		}
		if sub.Key == "" {
			return nil
		}
		b, err := json.Marshal(KeyUse{Command: sub.Command, Job: sub.ID, Status: sub.Status})
		if err != nil {
			return err
		}
		return atomicfile.WriteFile(keyPath, b, 0o600)
	})
	return repeat && err == nil, err
}

// CollectObjects implements Store: under the store's lock, which every
// commit holds too.
func (s *FolderStore) CollectObjects(_ context.Context, sums []string) (int, error) {
	var n int
	err := s.locked(func() (err error) {
		n, err = s.collect(sums)
		return err
	})
	return n, err
}

// collect deletes, of sums (nil: all), the objects no point and no job's
// file names (under the lock).
func (s *FolderStore) collect(sums []string) (int, error) {
	jobs, err := s.all()
	if err != nil {
		return 0, err
	}
	named := map[string]bool{}
	for _, fr := range jobs {
		for _, f := range BundleFiles {
			if !slices.Contains(fr.Files, f) {
				continue
			}
			b, err := os.ReadFile(filepath.Join(s.dir, fr.Job.ID, f))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return 0, err
			}
			if sum, ok := FileObject(f, b); ok {
				named[sum] = true
			}
		}
		for _, p := range fr.Points {
			ls, err := ListingSums(p.Snapshot)
			if err != nil {
				return 0, fmt.Errorf("job %s: point %s: %w", fr.Job.ID, p.ID, err)
			}
			for _, sum := range ls {
				named[sum] = true
			}
		}
	}
	objects := filepath.Join(s.dir, clusterDir, "objects")
	if sums == nil {
		ents, err := os.ReadDir(objects)
		if err != nil {
			return 0, err
		}
		for _, e := range ents {
			sums = append(sums, e.Name())
		}
	}
	n := 0
	for _, sum := range sums {
		if named[sum] || !ValidSum(sum) {
			continue
		}
		err := os.Remove(filepath.Join(objects, sum))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return n, err
		}
		n++
	}
	if n > 0 {
		return n, atomicfile.SyncDir(objects)
	}
	return n, nil
}

// Steer implements Store.
func (s *FolderStore) Steer(_ context.Context, st Steering) (*Job, error) {
	var out *Job
	err := s.locked(func() error {
		return s.jobLocked(st.Job, func() error {
			fr, err := s.read(st.Job)
			if err != nil {
				return err
			}
			keyPath := s.keyPath(st.Key)
			if use, err := s.keyUse(keyPath); err != nil {
				return err
			} else if use != nil {
				if err := KeyReuse(use, &st); err != nil {
					return err
				}
				out = &fr.Job
				return nil
			}
			j, err := Steered(fr.Job, &st)
			if err != nil {
				return err
			}
			for p := range st.Files {
				if err := ownFile(j.ID, p); err != nil {
					return err
				}
			}
			if st.Point != nil {
				had := make([]string, 0, len(fr.Points))
				for _, p := range fr.Points {
					had = append(had, p.ID)
				}
				if err := NewPoint(j.ID, st.Point, had); err != nil {
					return err
				}
			}
			if err := s.heldObjects(j.ID, st.Point, st.Files, st.Objects); err != nil {
				return err
			}
			if err := s.writeObjects(st.Objects); err != nil {
				return err
			}
			if err := s.appendLines(fr, st.Lines); err != nil {
				return err
			}
			if err := s.writeFiles(fr, st.Files); err != nil {
				return err
			}
			if st.Manifest != nil {
				if err := s.jobs.WriteManifest(j.ID, st.Manifest); err != nil {
					return err
				}
			}
			fr.Job = j
			if st.Point != nil {
				fr.Points = append(fr.Points, *st.Point)
			}
			if err := s.writeRow(fr); err != nil {
				return err
			}
			b, err := json.Marshal(KeyUse{Command: SteerCommand(&st), Job: st.Job, Status: j.Status, Epoch: j.Epoch})
			if err != nil {
				return err
			}
			out = &fr.Job
			return atomicfile.WriteFile(keyPath, b, 0o600)
		})
	})
	return out, err
}

func (s *FolderStore) keyUse(path string) (*KeyUse, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var k KeyUse
	return &k, json.Unmarshal(b, &k)
}

// SteerKey implements Store.
func (s *FolderStore) SteerKey(_ context.Context, key string) (*KeyUse, error) {
	var out *KeyUse
	err := s.locked(func() (err error) {
		out, err = s.keyUse(s.keyPath(key))
		return err
	})
	return out, err
}

// Files implements Store: the files units and steerings wrote, read from
// the job's folder.
func (s *FolderStore) Files(_ context.Context, id string) (map[string][]byte, error) {
	var out map[string][]byte
	err := s.locked(func() error {
		fr, err := s.read(id)
		if err != nil {
			return err
		}
		for _, p := range fr.Files {
			b, err := os.ReadFile(filepath.Join(s.jobs.JobDir(id), p))
			if err != nil {
				return err
			}
			if out == nil {
				out = map[string][]byte{}
			}
			out[p] = b
		}
		return nil
	})
	return out, err
}

// Fire implements Store.
func (s *FolderStore) Fire(_ context.Context, t Tick) (bool, error) {
	fired := false
	err := s.locked(func() error {
		fr, err := s.read(t.Template)
		if err != nil {
			return err
		}
		at := t.At.UTC().Format(time.RFC3339Nano)
		if _, ok := fr.Ticks[at]; ok {
			return nil
		}
		if t.Run != "" {
			if err := s.create(Job{ID: t.Run, Status: lifecycle.Pending, Manifest: t.Manifest}, t.Files); err != nil {
				return fmt.Errorf("run %s: %w", t.Run, err)
			}
		}
		if fr.Ticks == nil {
			fr.Ticks = map[string]string{}
		}
		fr.Ticks[at] = t.Run
		fired = true
		return s.writeRow(fr)
	})
	return fired, err
}

// LastTick implements Store.
func (s *FolderStore) LastTick(_ context.Context, template string) (time.Time, error) {
	var last time.Time
	err := s.locked(func() error {
		fr, err := s.read(template)
		if err != nil {
			return err
		}
		for at := range fr.Ticks {
			if t, err := time.Parse(time.RFC3339Nano, at); err == nil && t.After(last) {
				last = t
			}
		}
		return nil
	})
	return last, err
}

// Job implements Store.
func (s *FolderStore) Job(_ context.Context, id string) (*Job, error) {
	var out *Job
	err := s.locked(func() error {
		fr, err := s.read(id)
		if err == nil {
			out = &fr.Job
		}
		return err
	})
	return out, err
}

// Jobs implements Store.
func (s *FolderStore) Jobs(context.Context) ([]Job, error) {
	var out []Job
	err := s.locked(func() error {
		all, err := s.all()
		for _, fr := range all {
			out = append(out, fr.Job)
		}
		return err
	})
	return out, err
}

// History implements Store: the envelopes of the job's history.jsonl
// (archives first), as file mode's readers read them.
func (s *FolderStore) History(_ context.Context, id string) ([][]byte, error) {
	var out [][]byte
	err := s.locked(func() error {
		if _, err := s.read(id); err != nil {
			return err
		}
		es, err := history.ReadEntries(s.jobs.JobDir(id))
		if err != nil {
			return err
		}
		for _, e := range es {
			out = append(out, e.Line())
		}
		return nil
	})
	return out, err
}

// Points implements Store.
func (s *FolderStore) Points(_ context.Context, id string) ([]RecoveryPoint, error) {
	var out []RecoveryPoint
	err := s.locked(func() error {
		fr, err := s.read(id)
		if err == nil {
			out = fr.Points
		}
		return err
	})
	return out, err
}

// Objects implements Store.
func (s *FolderStore) Objects(_ context.Context, sums []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, sum := range sums {
		if !ValidSum(sum) {
			return nil, fmt.Errorf("object %q: %w", short(sum), ErrNotFound)
		}
		b, err := os.ReadFile(filepath.Join(s.dir, clusterDir, "objects", sum))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("object %s: %w", short(sum), ErrNotFound)
		}
		if err != nil {
			return nil, err
		}
		out[sum] = b
	}
	return out, nil
}

// Close implements Store.
func (s *FolderStore) Close() {}
