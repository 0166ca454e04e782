package jobtx

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
)

// PendingFile, in a job folder, is a commit in progress: the manifest a
// transaction is saving and the history records that change depends on.
//
// Why: a change is several history records (a response, a recovery point,
// a transition) and then the manifest. Written one after the other, a
// crash in between leaves a history that is ahead of its manifest: the
// response recorded, its cost, call count and transition not. The next
// start then asks the agent again in a phase the history says the job has
// left, pays for it twice, and records the transition twice. So Commit
// first writes the whole unit to this file (fsync'd), then the records,
// then the manifest, then clears the file; Begin finishes a unit a crash
// cut short before anything reads the job.
//
// The file is one per job, rewritten in place (pendingMagic): creating,
// renaming and removing a file per commit cost more kernel time than the
// rest of the commit. Missing, empty or cleared (pendingCleared) means
// nothing is pending.
const PendingFile = ".commit-pending.json"

// pendingMagic starts the header line of a pending file: "logist-commit-1
// <body length> <body SHA-256 hex>\n", then the body (the JSON unit).
// Written in place, a crash during the write can leave a torn file: old
// and new bytes mixed, a short body, zeros. The length and checksum tell a
// whole unit from a torn one, and a torn one never had any effect: the
// file is fsync'd before the first record of its unit is written, so a
// crash that tore it came before the unit touched the history or the
// manifest. Recovery discards it.
const pendingMagic = "logist-commit-1"

// encodePending frames body for the pending file.
func encodePending(body []byte) []byte {
	sum := sha256.Sum256(body)
	out := make([]byte, 0, len(pendingMagic)+len(body)+96)
	out = fmt.Appendf(out, "%s %d %x\n", pendingMagic, len(body), sum)
	return append(out, body...)
}

// decodePending returns the unit's body, or ok false for a file that does
// not hold a whole unit (torn). Bytes after the body are a longer earlier
// unit's tail (the file is not truncated before a write) and are ignored.
// A file that starts with '{' is the format before the header (always
// replaced atomically, so whole): its body is the file.
func decodePending(data []byte) (body []byte, ok bool) {
	if len(data) > 0 && data[0] == '{' {
		return data, true
	}
	hdr, rest, found := bytes.Cut(data, []byte{'\n'})
	if !found || len(hdr) > 128 {
		return nil, false
	}
	var n int
	var sum string
	if k, err := fmt.Sscanf(string(hdr), pendingMagic+" %d %64s", &n, &sum); err != nil || k != 2 || n < 0 || n > len(rest) {
		return nil, false
	}
	got := sha256.Sum256(rest[:n])
	if hex.EncodeToString(got[:]) != sum {
		return nil, false
	}
	return rest[:n], true
}

type pending struct {
	// BaseSeq and BasePrev are where the history stood: the first record
	// of the unit gets sequence BaseSeq and names BasePrev.
	BaseSeq  int64            `json:"base_seq"`
	BasePrev string           `json:"base_prev_hash"`
	Records  []history.Record `json:"records"`
	Manifest []byte           `json:"manifest"`
	Parked   bool             `json:"parked,omitempty"`
	// BaseManifest is the SHA-256 (hex) of the manifest file the unit
	// replaces. Commit removes this file without waiting for the removal
	// to be durable; a crash may bring it back after the unit completed.
	// Recovery then tells a manifest that is still the unit's base (roll
	// forward) from one already newer (discard).
	BaseManifest string `json:"base_manifest_sha256,omitempty"`
}

// queued is a record waiting for Commit: as it will be stored, and the
// caller's copy that gets the fields the log assigns.
type queued struct {
	stored history.Record
	rec    *history.Record
}

func (t *Tx) manifestChanged() bool {
	b, err := t.M.Encode()
	return err != nil || !bytes.Equal(b, t.saved)
}

func (t *Tx) enqueue(stored history.Record, rec *history.Record) {
	if stored.Time == "" {
		// When it happened, not when it was written.
		stored.Time = time.Now().UTC().Format(time.RFC3339Nano)
	}
	t.queue = append(t.queue, queued{stored: stored, rec: rec})
}

func (t *Tx) pendingPath() string { return filepath.Join(t.Dir, PendingFile) }

// commit writes the queued records and the manifest as one unit: the
// pending file (fsync'd; a new file's folder entry is made durable by the
// history append before the first record), then all records with one write
// and one fsync, then the manifest (fsync'd, with its folder entry), then
// the pending file is cleared. The manifest is never on disk before the
// records it depends on, and once the pending file is durable the unit is
// finished by the next Begin whatever else a crash cuts short.
func (t *Tx) commit() error {
	b, err := t.M.Encode()
	if err != nil {
		t.LogError("MANIFEST_WRITE", "SYSTEM", 0, err.Error())
		return fmt.Errorf("save manifest: encode: %w", err)
	}
	if t.unfinished {
		return errUnfinished(t.ID)
	}
	q := t.queue
	t.queue = nil
	if len(q) > 0 {
		if err := t.writePending(q, b); err != nil {
			// A torn unit means nothing (pendingMagic); a whole one has no
			// records yet and is either finished or found stale later.
			t.closePending()
			return err
		}
		if err := t.writeBatch(q); err != nil {
			if !t.Log.Intact() || t.clearPending(true) != nil {
				// The next Begin finishes (or drops) the unit.
				t.unfinished = true
			}
			// Otherwise nothing of the unit reached the history: the
			// change did not happen.
			t.closePending()
			return err
		}
	}
	if err := t.saveManifest(b); err != nil {
		if len(q) > 0 {
			t.unfinished = true
		}
		t.closePending()
		return err
	}
	if len(q) > 0 {
		// Not made durable: if a crash undoes the clearing, recovery
		// finds the manifest already past the unit's base (BaseManifest).
		err := t.clearPending(false)
		t.closePending()
		if err != nil {
			return err
		}
	}
	t.saved = b
	t.base = sha256.Sum256(b)
	return nil
}

// errUnfinished refuses to go on in a transaction whose commit failed
// after its unit was in the pending file: another unit there would
// overwrite the one the next Begin must finish, and records appended now
// would follow a unit the history holds only in part.
func errUnfinished(id string) error {
	return fmt.Errorf("job %s: an earlier commit of this transaction did not finish; begin a new one", id)
}

// writeBatch appends the queued records with one fsync; each caller's copy
// gets the fields the log assigned.
func (t *Tx) writeBatch(q []queued) error {
	recs := make([]*history.Record, len(q))
	for i := range q {
		recs[i] = &q[i].stored
	}
	start := time.Now()
	err := t.Log.AppendBatch(recs)
	t.env.obs().HistoryAppend(time.Since(start), err)
	if err != nil {
		t.LogError("HISTORY_WRITE", "SYSTEM", 0, err.Error())
		return err
	}
	for _, e := range q {
		if e.rec != nil {
			e.rec.V, e.rec.Seq, e.rec.PrevHash, e.rec.Time = e.stored.V, e.stored.Seq, e.stored.PrevHash, e.stored.Time
		}
	}
	return nil
}

func (t *Tx) writePending(q []queued, manifest []byte) error {
	p := pending{BaseSeq: t.Log.State().NextSeq, BasePrev: t.Log.LastHash(), Manifest: manifest, Parked: t.parked,
		BaseManifest: hex.EncodeToString(t.base[:])}
	for _, e := range q {
		p.Records = append(p.Records, e.stored)
	}
	b, err := json.Marshal(p)
	if err == nil {
		err = t.writePendingFile(encodePending(b))
	}
	if err != nil {
		t.LogError("MANIFEST_WRITE", "SYSTEM", 0, err.Error())
		return fmt.Errorf("save manifest: %w", err)
	}
	return nil
}

// writePendingFile writes data at the start of the job's pending file and
// fsyncs it, keeping the file open (t.pendingF) for clearPending.
func (t *Tx) writePendingFile(data []byte) error {
	path := t.pendingPath()
	// O_NOFOLLOW: written in place, so never through a link planted in
	// the job folder.
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
		if err == nil {
			// The new entry must be durable before the unit's first
			// record: the history append fsyncs a dirty folder before
			// it writes (history.Log.Append), so no fsync of its own.
			atomicfile.MarkDirty(t.Dir)
		}
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	t.pendingF = f
	if _, err := f.WriteAt(data, 0); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return datasync(f)
}

func (t *Tx) saveManifest(b []byte) error {
	if err := t.env.Store.WriteManifest(t.ID, b); err != nil {
		t.LogError("MANIFEST_WRITE", "SYSTEM", 0, err.Error())
		return fmt.Errorf("save manifest: %w", err)
	}
	return nil
}

// pendingCleared, as a pending file's first byte, says nothing is pending:
// clearing overwrites one byte in place (a write of one byte cannot be
// torn) rather than truncating, which would free the file's blocks and
// make the next unit allocate them again (journalled metadata both times).
const pendingCleared = '-'

// clearPending marks the pending file as holding no unit; durably when a
// later Begin must not find the unit (one that did not happen, or one
// recovery just finished or discarded).
func (t *Tx) clearPending(durable bool) error {
	f := t.pendingF
	if f == nil {
		var err error
		f, err = os.OpenFile(t.pendingPath(), os.O_RDWR|syscall.O_NOFOLLOW, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("open %s: %w", t.pendingPath(), err)
		}
		defer f.Close()
	}
	if _, err := f.WriteAt([]byte{pendingCleared}, 0); err != nil {
		return fmt.Errorf("clear %s: %w", t.pendingPath(), err)
	}
	if !durable {
		return nil
	}
	return datasync(f)
}

// datasync flushes f's content and what is needed to read it back (its
// size when it grew). The pending file is only ever read for its content,
// so its timestamps need no journal commit.
func datasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("fdatasync %s: %w", f.Name(), serr)
	}
	atomicfile.FileSyncs.Add(1)
	return nil
}

func (t *Tx) closePending() {
	if t.pendingF != nil {
		t.pendingF.Close()
		t.pendingF = nil
	}
}

// readPending returns the unit in dir's pending file: nil when there is
// none (no file, empty), torn true when the file does not hold a whole
// unit.
func readPending(dir string) (p *pending, torn bool, err error) {
	path := filepath.Join(dir, PendingFile)
	// O_NONBLOCK: a fifo planted here must not hang the daemon.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, false, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, false, err
	}
	if len(data) == 0 || data[0] == pendingCleared {
		return nil, false, nil
	}
	body, ok := decodePending(data)
	if !ok {
		return nil, true, nil
	}
	p = &pending{}
	if err := json.Unmarshal(body, p); err != nil {
		// The checksum matched: this is damage, not a crash.
		return nil, false, fmt.Errorf("%s is corrupt: %w", path, err)
	}
	return p, false, nil
}

// PendingUnit describes the unit in a job folder's pending file (for
// checks from outside the package): nil when nothing is pending.
type PendingUnit struct {
	BaseSeq  int64
	Records  int
	Manifest []byte
	Torn     bool
}

// ReadPendingUnit reads the pending file of job folder dir.
func ReadPendingUnit(dir string) (*PendingUnit, error) {
	p, torn, err := readPending(dir)
	if err != nil || (p == nil && !torn) {
		return nil, err
	}
	if torn {
		return &PendingUnit{Torn: true}, nil
	}
	return &PendingUnit{BaseSeq: p.BaseSeq, Records: len(p.Records), Manifest: p.Manifest}, nil
}

// finishPending completes a commit a crash interrupted: the records not yet
// in the history are appended (a torn one was cut when the history was
// opened), then the manifest is saved. It reports whether it saved one.
func (t *Tx) finishPending() (bool, error) {
	p, torn, err := readPending(t.Dir)
	if err != nil {
		return false, fmt.Errorf("job %s: read pending commit: %w", t.ID, err)
	}
	if torn {
		// Cut short while it was written, so before any record of its
		// unit: the change did not happen (pendingMagic).
		t.env.Logger.Warn("torn pending commit discarded", "type", "error", "job_id", t.ID, "actor", "SYSTEM",
			"error_code", "COMMIT_TORN")
		return false, t.clearPending(true)
	}
	if p == nil {
		return false, nil
	}
	written := t.Log.State().NextSeq - p.BaseSeq
	if written < 0 || written > int64(len(p.Records)) || !t.unitStartsAt(p, written) {
		// The history is not where this unit left it (something that does
		// not know pending commits changed it since): the manifest on disk
		// is newer than the unit's. Keep nothing.
		return false, t.discardPending(p)
	}
	if written == int64(len(p.Records)) && p.BaseManifest != "" {
		// Every record is stored: the manifest decides whether the unit
		// was finished (or overtaken) before the crash.
		cur, err := os.ReadFile(filepath.Join(t.Dir, jobstore.ManifestFile))
		if err == nil && bytes.Equal(cur, p.Manifest) {
			t.env.Logger.Warn("finished a commit a crash interrupted", "type", "error", "job_id", t.ID, "actor", "SYSTEM",
				"error_code", "COMMIT_FINISHED", "records", len(p.Records), "records_written_now", 0)
			return false, t.clearPending(true)
		}
		if sum := sha256.Sum256(cur); err == nil && hex.EncodeToString(sum[:]) != p.BaseManifest {
			return false, t.discardPending(p)
		}
	}
	for i := written; i < int64(len(p.Records)); i++ {
		rec := p.Records[i]
		if err := t.write(&rec, nil); err != nil {
			return false, err
		}
	}
	if err := t.saveManifest(p.Manifest); err != nil {
		return false, err
	}
	if p.Parked {
		var head struct {
			CreatedAt string `json:"created_at"`
		}
		_ = json.Unmarshal(p.Manifest, &head)
		if err := history.WriteJobHistory(t.Dir, t.ID, head.CreatedAt, t.env.Store.Workspace(t.ID)); err != nil {
			t.LogError("JOBHISTORY_WRITE", "SYSTEM", 0, err.Error())
		}
	}
	if err := t.clearPending(true); err != nil {
		return false, err
	}
	t.env.Logger.Warn("finished a commit a crash interrupted", "type", "error", "job_id", t.ID, "actor", "SYSTEM",
		"error_code", "COMMIT_FINISHED", "records", len(p.Records), "records_written_now", int64(len(p.Records))-written)
	return true, nil
}

// discardPending drops a unit the job has moved past.
func (t *Tx) discardPending(p *pending) error {
	t.env.Logger.Warn("stale pending commit discarded", "type", "error", "job_id", t.ID, "actor", "SYSTEM",
		"error_code", "COMMIT_STALE", "base_seq", p.BaseSeq, "next_seq", t.Log.State().NextSeq)
	return t.clearPending(true)
}

// unitStartsAt checks that the history's records from BaseSeq on are this
// unit's: the first is the unit's first record (same type and time, stamped
// when it was queued) and names the predecessor the unit was built on.
func (t *Tx) unitStartsAt(p *pending, written int64) bool {
	if written == 0 {
		return t.Log.LastHash() == p.BasePrev
	}
	e, err := history.ReadSeq(t.Dir, p.BaseSeq)
	return err == nil && e.PrevHash == p.BasePrev && e.Type == p.Records[0].Type && e.Time == p.Records[0].Time
}
