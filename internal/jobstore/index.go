package jobstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/schemas"
)

// IndexDir, in the jobs folder, holds the manifest index (IndexFile) and
// its change journal (changes.go). The index caches what `logist list`
// and the daemon's start-up scan need of each manifest, so that a folder
// of thousands of finished jobs is listed without reading and checking
// every manifest. It is only a cache: written without fsync, ignored when
// unreadable or torn (indexfile.go), and an entry is used only while the
// manifest file is exactly the one it was taken from (same inode, size,
// mtime and ctime), or, for a display, while the change journal does not
// name the job. Its own folder, so that rewriting it does not change the
// jobs folder's mtime, which says whether the folder's names changed.
const IndexDir = ".logist-index"

// IndexFile is the index's path in the jobs folder.
const IndexFile = IndexDir + "/jobs"

// legacyIndexFile is the gob index of earlier versions, removed when an
// index is written.
const legacyIndexFile = ".manifest-index"

const indexVersion = 4

// indexStable is how long a manifest must have been unchanged (by ctime)
// before it is indexed. Timestamps have a coarse granularity (a few ms):
// a file replaced within the same tick, reusing the inode number, with
// the same size, would keep its key. A file indexed only once it is older
// than this can no longer be replaced within its own tick, so any later
// change gives it a new ctime and the entry stops matching. (git's
// "racily clean" rule.)
const indexStable = time.Second

// statKey identifies one version of a file without reading it.
type statKey struct {
	Ino, Size, Mtime, Ctime int64
}

func statKeyOf(fi os.FileInfo) (statKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return statKey{}, false
	}
	return statKey{Ino: int64(st.Ino), Size: fi.Size(), Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, true
}

// Summary is the part of a manifest list and the start-up scan use.
type Summary struct {
	JobID                string
	Status               lifecycle.Status
	Phase                string
	Metrics              manifest.Metrics
	CostThreshold        *float64
	TimeThresholdMinutes *float64
	Reason               string
	UpdatedAt            string
	Schedule             *manifest.Schedule
	// Sandbox is the containment the job ran under (run.sandbox): a
	// listing shows an opt-out.
	Sandbox string
	// EncryptHistory: Reason is sealed in the file (logist list opens it).
	EncryptHistory bool `json:",omitempty"`
}

func summaryOf(m *manifest.Manifest) Summary {
	return Summary{JobID: m.JobID, Status: m.Status, Phase: m.Phase(), Metrics: m.Metrics, CostThreshold: m.CostThreshold,
		TimeThresholdMinutes: m.TimeThresholdMinutes, Reason: m.Run.Reason, UpdatedAt: m.Run.UpdatedAt, Schedule: m.Schedule,
		Sandbox: m.Run.Sandbox, EncryptHistory: m.EncryptHistory}
}

// manifest returns a manifest holding only the summary's fields.
func (s Summary) manifest() *manifest.Manifest {
	m := &manifest.Manifest{}
	s.fill(m)
	return m
}

// fill makes m a manifest holding only the summary's fields.
func (s Summary) fill(m *manifest.Manifest) {
	*m = manifest.Manifest{SchemaVersion: manifest.CurrentVersion, JobID: s.JobID, Status: s.Status, Metrics: s.Metrics,
		CostThreshold: s.CostThreshold, TimeThresholdMinutes: s.TimeThresholdMinutes, Schedule: s.Schedule,
		History: []manifest.AuditEntry{}, EncryptHistory: s.EncryptHistory}
	m.SetPhase(s.Phase)
	m.Run.Reason, m.Run.UpdatedAt, m.Run.Sandbox = s.Reason, s.UpdatedAt, s.Sandbox
}

type indexEntry struct {
	Key statKey
	Sum Summary
	// Err is why the manifest is invalid ("" if valid).
	Err string
	// Unchecked: Sum was taken without the manifest's checks
	// (ScanSummaries); a scan that may skip them and a display
	// (ListSummaries(true)) use the entry, never the daemon's late check,
	// which replaces it with a checked one.
	Unchecked bool
}

var checker = sync.OnceValue(func() [32]byte {
	b, _ := schemas.Raw(schemas.Manifest)
	return sha256.Sum256(append(b, byte(manifest.CurrentVersion), indexVersion))
})

func (s *Store) indexPath() string { return filepath.Join(s.Dir, IndexFile) }

// readIndex returns the index, or nil if there is none this version can
// use.
func (s *Store) readIndex() *indexView {
	b, err := os.ReadFile(s.indexPath())
	if err != nil {
		return nil
	}
	v, err := parseIndex(b)
	if err != nil || v.mark.Checker != checker() {
		return nil
	}
	return v
}

func idxStrings(v *indexView) string {
	if v == nil {
		return ""
	}
	return v.strs
}

// writeIndex replaces the index with the entries each passes to add, in
// id order.
func (s *Store) writeIndex(mark indexMark, sizeHint int, each func(add func(*indexEntry))) error {
	t, err := s.createIndex(sizeHint)
	if err != nil {
		return err
	}
	each(t.x.add)
	return t.commit(mark)
}

// ListSummaries is List for callers that need only a Summary of most jobs
// (logist list, the daemon's start-up scan). An entry's Manifest is the
// full manifest when Partial is false; when Partial is true Manifest is
// nil and Sum holds the Summary (from the index, or read in full and cut
// down): Entry.View gives either as a manifest. Bare files are
// always read. display is for a listing shown to a person (logist list,
// the console): it trusts the index as it stands, invalid manifests (the
// cached reason) and finished jobs the daemon's scan summarised without
// their checks (Unchecked, which the daemon checks once ready: a listing
// of 50,000 jobs right after a daemon stopped early would otherwise check
// them all, a minute of CPU). Without display (the daemon's late check),
// both are read and checked again: checks other than the schema may have
// changed with an upgrade. The index is brought up to date when it was
// missing entries (best effort: a read-only folder just stays slower).
func (s *Store) ListSummaries(display bool) ([]Entry, error) {
	return s.listSummaries(display, false, Scan{})
}

// ScanSummaries is ListSummaries for the daemon's start-up scan, which
// must be quick over a folder the index does not cover yet (a first
// start): a job that is neither running nor a template and is not in the
// index is summarised from a decode without the manifest's checks
// (Unchecked; schema validation is most of a first start's CPU), and
// indexed as unchecked, which only ScanSummaries and a display trust. Such a job is not
// run, and whoever reads it in full checks it; the daemon checks them all
// once it is ready (ListSummaries, which indexes them as checked).
// Running jobs and templates are checked here, as always.
func (s *Store) ScanSummaries() ([]Entry, error) {
	return s.listSummaries(false, true, Scan{})
}

// Scan shapes a ScanSummariesWith: how many manifests are read at once,
// and who hears of the live entries (Entry.Live) as they are found.
type Scan struct {
	// Ctx, if set, stops the scan when it ends: ScanSummariesWith
	// returns its error, having written no index.
	Ctx context.Context
	// Workers bounds the goroutines reading manifests (0: one per CPU).
	// The daemon's scan runs beside its event loop and leaves it a CPU.
	Workers int
	// Each, if set, is called from the scan's goroutines for each job
	// folder (id, and its path dir) before its manifest is read (the
	// daemon watches it there, so that a change after the read is heard).
	Each func(id, dir string)
	// Found, if set, is called from the scan's goroutines for each live
	// entry as soon as it is read, before the rest of the folder: a job
	// to run starts without waiting for the census of finished ones. The
	// entry is only lent for the call. A bare manifest is handed over
	// unread (no Manifest, no Err): the finder places it, and the
	// placement reads it (Store.PlaceRead).
	Found func(*Entry)
	// Done, if set, is called for every entry listed in id order, one call at a
	// time, once it and the entries before it are read (after Found), and
	// the entry then lets go of its manifest, summary and error: the
	// listing returns entries with only their ID, Dir and Unplaced. A
	// caller that takes what it needs of each entry as it comes holds no
	// summary of 50,000 jobs, nor does the listing (the index is written
	// as the entries come). The entry is only lent for the call.
	Done func(*Entry)
}

// ScanSummariesWith is ScanSummaries with its reads bounded and its live
// entries handed over as they are found (Scan).
func (s *Store) ScanSummariesWith(sc Scan) ([]Entry, error) {
	return s.listSummaries(false, true, sc)
}

// ListSummariesWith is ListSummaries(false) (the daemon's late check)
// shaped by a Scan.
func (s *Store) ListSummariesWith(sc Scan) ([]Entry, error) {
	return s.listSummaries(false, false, sc)
}

// Live reports whether e is something to act on at once: a bare manifest
// to place (or a placement's leftover name to remove), or a valid job to run (Status.Active) or schedule template.
func (e *Entry) Live() bool {
	if e.Unplaced != "" || e.Leftover != "" {
		return true
	}
	if e.Err != nil || e.Dir == "" {
		return false
	}
	if e.Manifest != nil {
		return e.Manifest.Status.Active() || e.Manifest.Schedule != nil
	}
	sum, ok := e.summary()
	return ok && (sum.Status.Active() || sum.Schedule != nil)
}

// What a listing did with each entry, for the index it writes.
const (
	notIndexed = iota
	kept       // the old index's record, as it was
	freshEntry // read now: indexed from the entry
)

func (s *Store) listSummaries(trustInvalid, lazy bool, sc Scan) ([]Entry, error) {
	start := time.Now()
	// The journal first, the names next, the manifests last: a change
	// after any of these reads is in the journal past the size noted.
	j := s.openJournal()
	defer j.close()
	boot := bootID()
	dirKey := statKey{}
	if fi, err := os.Stat(s.Dir); err == nil {
		dirKey, _ = statKeyOf(fi)
	}
	idx := s.readIndex()
	// A display (logist list, the console) trusts an entry without a stat
	// of its manifest while the journal, as the index took it in, does
	// not name the job since: a change through Logist is journaled, and
	// so is a hand edit the daemon hears of. The daemon's scan and its
	// late check stat every manifest (a hand edit made while no daemon
	// ran is seen at its next start).
	var journaled map[string]bool
	trust, covered := false, uint64(0)
	// The reason an index gives for an invalid manifest is its checks'
	// (checks beside the schema may change with an upgrade): the daemon
	// takes it as it stands if this very program found it (checkedBy),
	// and otherwise checks the manifest again.
	me := checkedBy()
	sameChecks := idx != nil && me != ([16]byte{}) && idx.mark.CheckedBy == me
	if trustInvalid && idx != nil && j != nil && idx.mark.Gen == j.gen && idx.mark.Boot == boot && boot != ([16]byte{}) {
		journaled, covered, trust = j.changed(idx.mark.Off)
	}
	if j != nil && !trust {
		covered = j.size
	}
	var out []Entry
	// byRecord: out[i] is the job of the index's record i.
	byRecord := false
	if trust && idx.mark.Dir != (statKey{}) && idx.mark.Dir == dirKey {
		// The folder's names are the index's: no listing of 50,000.
		byRecord = true
		out = make([]Entry, idx.n)
		dirOf := s.dirOfShared() // a display holds the listing whole
		for i := range out {
			id := idx.str(i, sID)
			out[i] = Entry{ID: id, Dir: dirOf(id)}
		}
	} else {
		var err error
		if out, err = s.scanNames(); err != nil {
			return nil, err
		}
	}
	keys := make([]statKey, len(out))
	state := make([]uint8, len(out))
	// recs[i] is the old index's record of a kept entry (no second
	// binary search per job to write or keep it).
	recs := make([]int32, len(out))
	// loaded marks the entries read here that keep only their summary:
	// read in full (summarise), or decoded unchecked (peekFinished).
	loaded := make([]bool, len(out))
	// A display renders each summary from the index's record (the
	// entry names it: no copy per job of 50,000); the daemon's scan keeps
	// a few entries and lets the others go, and the index with them, so
	// each of its summaries is a copy of its own.
	fromIndex := func(e *Entry, r int, ie *indexEntry) {
		if trustInvalid {
			e.idx, e.rec, e.Partial, e.Unchecked = idx, r, true, ie.Unchecked
			return
		}
		e.setSum(ie.Sum, ie.Unchecked)
	}
	mark := indexMark{Checker: checker(), Boot: boot}
	// Who checked the invalid manifests it names: a listing that checks
	// them (not a display) checked every one; a display keeps the old
	// index's, unless it read an invalid one itself (commit).
	if !trustInvalid {
		mark.CheckedBy = me
	} else if idx != nil {
		mark.CheckedBy = idx.mark.CheckedBy
	}
	if j != nil {
		mark.Gen, mark.Off = j.gen, covered
	}
	read := func(i int) {
		if sc.Ctx != nil && sc.Ctx.Err() != nil {
			return
		}
		e := &out[i]
		if sc.Each != nil && e.Unplaced == "" {
			sc.Each(e.ID, e.Dir)
		}
		if sc.Found != nil {
			defer func() {
				if e.Live() {
					sc.Found(e)
				}
			}()
		}
		if e.Unplaced != "" {
			if sc.Found != nil {
				// Placed by whoever hears of it, and read then.
				s.leftoverEntry(e)
				return
			}
			s.loadEntry(e)
			return
		}
		r := i
		if !byRecord {
			r = idx.find(e.ID)
		}
		var ie indexEntry
		switch {
		case r >= 0 && trustInvalid:
			ie = idx.head(r) // the summary is decoded when rendered
		case r >= 0:
			ie = idx.entry(r)
		}
		if r >= 0 {
			recs[i] = int32(r)
		}
		if trust && r >= 0 && !journaled[e.ID] && ie.Key != (statKey{}) {
			keys[i], state[i] = ie.Key, kept
			if ie.Err != "" {
				e.Err, e.Partial = errors.New(ie.Err), true
				return
			}
			fromIndex(e, r, &ie)
			return
		}
		now := time.Now()
		fi, err := os.Stat(filepath.Join(e.Dir, ManifestFile))
		if err != nil {
			s.loadEntry(e)
			return
		}
		k, ok := statKeyOf(fi)
		hit := ok && r >= 0 && ie.Key == k
		if hit && (ie.Err == "" || trustInvalid || sameChecks) && (lazy || trustInvalid || !ie.Unchecked) {
			keys[i], state[i] = k, kept
			if ie.Err != "" {
				e.Err, e.Partial = errors.New(ie.Err), true
				return
			}
			fromIndex(e, r, &ie)
			return
		}
		// A manifest the index says is invalid is checked again in full
		// (checks may have changed with an upgrade), never peeked.
		var peeked *read
		if lazy && !(hit && ie.Err != "") {
			var finished bool
			if finished, peeked = s.peekFinished(e); finished {
				// Indexed as unchecked: a later scan need not decode it
				// again, a listing that checks does not trust it.
				loaded[i] = true
				if ok && k.Ctime < now.Add(-indexStable).UnixNano() {
					keys[i], state[i] = k, freshEntry
				}
				return
			}
		}
		s.loadEntryFrom(e, peeked) // what the peek read is checked, not read again
		if ok && r >= 0 && ie.Err != "" && !trustInvalid && e.Err != nil && e.Err.Error() == ie.Err {
			keys[i], state[i] = ie.Key, kept // still invalid, for the same reason
		}
		if !ok || e.Dir == "" || errors.Is(e.Err, ErrNotFound) || k.Ctime >= now.Add(-indexStable).UnixNano() {
			return
		}
		// Stat before read: if the file changed in between, its new ctime
		// no longer matches k and the entry is never used.
		if e.Err != nil || e.Manifest != nil {
			keys[i], state[i] = k, freshEntry
		}
		// Past indexStable only, like the index: a file changed just now
		// stays whole for a caller that may be about to act on it.
		if loaded[i] = summarise(e); loaded[i] && e.Err == nil {
			// Checked once for this listing: a finished job's manifest
			// is not read again soon, and 50,000 remembered sums would
			// stay for the daemon's life.
			s.checked.Delete(e.ID)
		}
	}
	// The index to write, entry by entry in id order, and whether it says
	// anything the old one does not.
	entryOf := func(i int) (indexEntry, bool) {
		e := &out[i]
		switch {
		case state[i] == kept:
			ie := idx.entry(int(recs[i]))
			ie.Key = keys[i]
			return ie, true
		case state[i] != freshEntry:
			return indexEntry{}, false
		case e.Err != nil:
			return indexEntry{Key: keys[i], Sum: Summary{JobID: e.ID}, Err: e.Err.Error()}, true
		case e.Manifest != nil:
			return indexEntry{Key: keys[i], Sum: summaryOf(e.Manifest)}, true
		case e.sum != nil:
			return indexEntry{Key: keys[i], Sum: *e.sum, Unchecked: e.Unchecked}, true
		}
		return indexEntry{}, false
	}
	// Entries are committed in id order as they are read: added to the
	// index being written, then handed to sc.Done.
	sink := &indexSink{s: s, old: idx}
	complete := dirKey.Ctime < start.Add(-indexStable).UnixNano()
	var cmu sync.Mutex
	done, next := make([]bool, len(out)), 0
	commit := func(i int) {
		cmu.Lock()
		defer cmu.Unlock()
		done[i] = true
		for ; next < len(out) && done[next]; next++ {
			e := &out[next]
			if e.Unplaced != "" || e.Leftover != "" || (e.Dir != "" && state[next] == notIndexed) {
				complete = false // a name the index would not give
			}
			switch state[next] {
			case kept:
				sink.keep(int(recs[next]))
			case freshEntry:
				ie, _ := entryOf(next)
				if ie.Err != "" && trustInvalid {
					mark.CheckedBy = [16]byte{}
				}
				sink.add(&ie)
			}
			if sc.Done != nil && (e.Dir != "" || e.Unplaced != "") {
				sc.Done(e)
				*e = Entry{ID: e.ID, Dir: e.Dir, Unplaced: e.Unplaced}
			}
		}
	}
	parallel(len(out), sc.Workers, func(i int) {
		read(i)
		if sc.Ctx == nil || sc.Ctx.Err() == nil {
			commit(i)
		}
	})
	if sc.Ctx != nil && sc.Ctx.Err() != nil {
		sink.abort()
		return nil, sc.Ctx.Err()
	}
	if complete {
		mark.Dir = dirKey
	}
	if sink.needed(mark) {
		if j != nil && j.size > journalMax {
			// Grown: a new journal, if no writer is at it and nothing
			// was written past what this listing took in.
			if unlock := s.renewJournal(j, covered, &mark); unlock != nil {
				defer unlock()
			}
		}
		sink.finish(mark)
	}
	return dropNonJobs(out), nil
}

// summarise replaces the full manifest of a job folder's entry that is
// neither running nor a template with its summary (Partial), as the index
// would have given it; it reports whether it did. A first listing of a
// large folder then holds the summaries of finished jobs, not their whole
// manifests (audit trail, agents, prompts) for the length of the listing.
func summarise(e *Entry) bool {
	m := e.Manifest
	if m == nil || e.Err != nil || e.Partial || e.Unplaced != "" || e.Dir == "" || m.Status.Active() || m.Schedule != nil {
		return false
	}
	sum := summaryOf(m)
	e.setSum(sum, e.Unchecked)
	return true
}

// peekFinished summarises e from its manifest decoded without the checks
// (manifest.DecodeTrusted) when that says the job is neither running nor
// a template, and reports whether it did (Unchecked). Anything else (a
// file that does not decode, a job_id that is not its folder's, a status
// that is none of the nine, which a listing would otherwise show as if it
// were one until the daemon's late check, a job to run) is left to loadEntry, which checks it in full and says why it is
// invalid: it is handed what was read (and decoded, if it did) for that,
// or nil if the read failed.
func (s *Store) peekFinished(e *Entry) (bool, *read) {
	r, err := s.readManifest(e.ID)
	if err != nil || len(r.Raw) > manifest.MaxSize {
		return false, nil
	}
	s.n.decodes.Add(1)
	m, err := manifest.DecodeTrusted(filepath.Join(e.Dir, ManifestFile), r.Raw)
	if err != nil {
		return false, &read{FileRead: r}
	}
	if (m.JobID != "" && m.JobID != e.ID) || !m.Status.Valid() || m.Status.Active() || m.Schedule != nil {
		return false, &read{FileRead: r, trusted: m}
	}
	m.JobID = e.ID
	sum := summaryOf(m)
	e.setSum(sum, true)
	return true, nil
}

// checkedBy identifies this program's build by its executable file (zero
// if unknown): a new build, whose checks may differ, is another file.
var checkedBy = sync.OnceValue(func() [16]byte {
	var id [16]byte
	exe, err := os.Executable()
	if err != nil {
		return id
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return id
	}
	k, ok := statKeyOf(fi)
	if !ok {
		return id
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s %+v", exe, k))
	copy(id[:], sum[:])
	return id
})
