package jobstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/gob"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/schemas"
)

// IndexFile, in the jobs folder, caches what `logist list` and the daemon's
// start-up scan need of each manifest, so that a folder of thousands of
// finished jobs is listed without reading and checking every manifest. It
// is only a cache: written without fsync, ignored when unreadable, and an
// entry is used only while the manifest file is exactly the one it was
// taken from (same inode, size, mtime and ctime).
const IndexFile = ".manifest-index"

const indexVersion = 3

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
	m := &manifest.Manifest{SchemaVersion: manifest.CurrentVersion, JobID: s.JobID, Status: s.Status, Metrics: s.Metrics,
		CostThreshold: s.CostThreshold, TimeThresholdMinutes: s.TimeThresholdMinutes, Schedule: s.Schedule,
		History: []manifest.AuditEntry{}, EncryptHistory: s.EncryptHistory}
	m.SetPhase(s.Phase)
	m.Run.Reason, m.Run.UpdatedAt, m.Run.Sandbox = s.Reason, s.UpdatedAt, s.Sandbox
	return m
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

type indexData struct {
	Version int
	// Checker identifies the checks the entries passed or failed (the
	// manifest schema): an upgrade that changes them starts afresh.
	Checker [32]byte
	Entries map[string]indexEntry
}

var checker = sync.OnceValue(func() [32]byte {
	b, _ := schemas.Raw(schemas.Manifest)
	return sha256.Sum256(append(b, byte(manifest.CurrentVersion), indexVersion))
})

func (s *Store) indexPath() string { return filepath.Join(s.Dir, IndexFile) }

func (s *Store) readIndex() map[string]indexEntry {
	b, err := os.ReadFile(s.indexPath())
	if err != nil || len(b) < sha256.Size {
		return nil
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if h := sha256.Sum256(body); !bytes.Equal(h[:], sum) {
		return nil // torn by a crash, or not ours: a cache, so start afresh
	}
	var d indexData
	if gob.NewDecoder(bytes.NewReader(body)).Decode(&d) != nil || d.Version != indexVersion || d.Checker != checker() {
		return nil
	}
	return d.Entries
}

// writeIndex replaces the index. No fsync: after a crash the checksum
// rejects a torn file and the next listing rebuilds it.
func (s *Store) writeIndex(entries map[string]indexEntry) error {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(indexData{Version: indexVersion, Checker: checker(), Entries: entries}); err != nil {
		return err
	}
	sum := sha256.Sum256(buf.Bytes())
	buf.Write(sum[:])
	f, err := os.CreateTemp(s.Dir, IndexFile+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(buf.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), s.indexPath())
	}
	if err != nil {
		_ = os.Remove(f.Name()) // the failed write's temp file
	}
	return err
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
	// folder before its manifest is read (the daemon watches it there, so
	// that a change after the read is heard).
	Each func(id string)
	// Found, if set, is called from the scan's goroutines for each live
	// entry as soon as it is read, before the rest of the folder: a job
	// to run starts without waiting for the census of finished ones. The
	// entry is only lent for the call.
	Found func(*Entry)
}

// ScanSummariesWith is ScanSummaries with its reads bounded and its live
// entries handed over as they are found (Scan).
func (s *Store) ScanSummariesWith(sc Scan) ([]Entry, error) {
	return s.listSummaries(false, true, sc)
}

// Live reports whether e is something to act on at once: a bare manifest
// to place, or a valid job to run (Status.Active) or schedule template.
func (e *Entry) Live() bool {
	if e.Unplaced != "" {
		return true
	}
	if e.Err != nil || e.Dir == "" {
		return false
	}
	if e.Manifest != nil {
		return e.Manifest.Status.Active() || e.Manifest.Schedule != nil
	}
	return e.Sum != nil && (e.Sum.Status.Active() || e.Sum.Schedule != nil)
}

func (s *Store) listSummaries(trustInvalid, lazy bool, sc Scan) ([]Entry, error) {
	out, err := s.scanNames()
	if err != nil {
		return nil, err
	}
	idx := s.readIndex()
	fresh := make([]*indexEntry, len(out))
	// loaded marks the entries read here that keep only their summary:
	// read in full (summarise), or decoded unchecked (peekFinished).
	loaded := make([]bool, len(out))
	parallel(len(out), sc.Workers, func(i int) {
		if sc.Ctx != nil && sc.Ctx.Err() != nil {
			return
		}
		e := &out[i]
		if sc.Each != nil && e.Unplaced == "" {
			sc.Each(e.ID)
		}
		if sc.Found != nil {
			defer func() {
				if e.Live() {
					sc.Found(e)
				}
			}()
		}
		if e.Unplaced != "" {
			s.loadEntry(e)
			return
		}
		now := time.Now()
		fi, err := os.Stat(filepath.Join(e.Dir, ManifestFile))
		if err != nil {
			s.loadEntry(e)
			return
		}
		k, ok := statKeyOf(fi)
		if ie, hit := idx[e.ID]; ok && hit && ie.Key == k && (ie.Err == "" || trustInvalid) && (lazy || trustInvalid || !ie.Unchecked) {
			if ie.Err != "" {
				e.Err, e.Partial = errors.New(ie.Err), true
				return
			}
			e.Sum, e.Partial, e.Unchecked = &ie.Sum, true, ie.Unchecked
			return
		}
		// A manifest the index says is invalid is checked again in full
		// (checks may have changed with an upgrade), never peeked.
		if ie, hit := idx[e.ID]; lazy && !(ok && hit && ie.Key == k && ie.Err != "") && s.peekFinished(e) {
			// Indexed as unchecked: a later scan need not decode it
			// again, a listing that checks does not trust it.
			loaded[i] = true
			if ok && k.Ctime < now.Add(-indexStable).UnixNano() {
				fresh[i] = &indexEntry{Key: k, Sum: *e.Sum, Unchecked: true}
			}
			return
		}
		s.loadEntry(e)
		if !ok || e.Dir == "" || errors.Is(e.Err, ErrNotFound) || k.Ctime >= now.Add(-indexStable).UnixNano() {
			return
		}
		// Stat before read: if the file changed in between, its new ctime
		// no longer matches k and the entry is never used.
		switch {
		case e.Err != nil:
			fresh[i] = &indexEntry{Key: k, Sum: Summary{JobID: e.ID}, Err: e.Err.Error()}
		case e.Manifest != nil:
			fresh[i] = &indexEntry{Key: k, Sum: summaryOf(e.Manifest)}
		}
		// Past indexStable only, like the index: a file changed just now
		// stays whole for a caller that may be about to act on it.
		loaded[i] = summarise(e)
	})
	if sc.Ctx != nil && sc.Ctx.Err() != nil {
		return nil, sc.Ctx.Err()
	}
	changed := false
	next := make(map[string]indexEntry, len(out))
	for i, e := range out {
		if e.Dir == "" && e.Unplaced == "" {
			continue // dropped below (dropNonJobs)
		}
		if ie, ok := idx[e.ID]; ok && e.Partial && !loaded[i] {
			next[e.ID] = ie
		} else if ok && ie.Err != "" && !trustInvalid && e.Err != nil && e.Err.Error() == ie.Err {
			next[e.ID] = ie // still invalid, for the same reason
		}
	}
	for _, f := range fresh {
		if f == nil {
			continue
		}
		// An invalid manifest read again for the same reason (the daemon
		// checks them at every start) is no change: no rewrite for it.
		if old, ok := idx[f.Sum.JobID]; !ok || old != *f {
			changed = true
		}
		next[f.Sum.JobID] = *f
	}
	if changed || len(next) != len(idx) {
		_ = s.writeIndex(next) // a cache: a read-only folder just lists slower
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
	e.Manifest, e.Sum, e.Partial = nil, &sum, true
	return true
}

// peekFinished summarises e from its manifest decoded without the checks
// (manifest.DecodeTrusted) when that says the job is neither running nor
// a template, and reports whether it did (Unchecked). Anything else (a
// file that does not decode, a job_id that is not its folder's, a job to
// run) is left to loadEntry, which checks it in full and says why it is
// invalid.
func (s *Store) peekFinished(e *Entry) bool {
	data, err := s.ReadManifest(e.ID)
	if err != nil || len(data) > manifest.MaxSize {
		return false
	}
	m, err := manifest.DecodeTrusted(filepath.Join(e.Dir, ManifestFile), data)
	if err != nil || (m.JobID != "" && m.JobID != e.ID) || m.Status.Active() || m.Schedule != nil {
		return false
	}
	m.JobID = e.ID
	sum := summaryOf(m)
	e.Sum, e.Partial, e.Unchecked = &sum, true, true
	return true
}
