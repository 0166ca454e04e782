package jobtx

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
// first writes the whole unit to this file (atomically), then the records,
// then the manifest, then removes the file; Begin finishes a unit a crash
// cut short before anything reads the job.
const PendingFile = ".commit-pending.json"

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
// pending file (fsync'd, with its folder entry), then all records with one
// write and one fsync, then the manifest (fsync'd, with its folder entry).
// The manifest is never on disk before the records it depends on, and
// once the pending file is durable the unit is finished by the next Begin
// whatever else a crash cuts short.
func (t *Tx) commit() error {
	b, err := t.M.Encode()
	if err != nil {
		t.LogError("MANIFEST_WRITE", "SYSTEM", 0, err.Error())
		return fmt.Errorf("save manifest: encode: %w", err)
	}
	q := t.queue
	t.queue = nil
	if len(q) > 0 {
		if err := t.writePending(q, b); err != nil {
			return err
		}
		if err := t.writeBatch(q); err != nil {
			if t.Log.Intact() {
				// Nothing of the unit reached the history: the change did
				// not happen.
				t.removePending(true)
			}
			// Otherwise the next Begin finishes the unit.
			return err
		}
	}
	if err := t.saveManifest(b); err != nil {
		return err
	}
	if len(q) > 0 {
		// Not made durable: if a crash brings the file back, recovery
		// finds the manifest already past the unit's base (BaseManifest).
		if err := t.removePending(false); err != nil {
			return err
		}
	}
	t.saved = b
	t.base = sha256.Sum256(b)
	return nil
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
		err = atomicfile.WriteFile(t.pendingPath(), b, 0o600)
	}
	if err != nil {
		t.LogError("MANIFEST_WRITE", "SYSTEM", 0, err.Error())
		return fmt.Errorf("save manifest: %w", err)
	}
	return nil
}

func (t *Tx) saveManifest(b []byte) error {
	if err := t.env.Store.WriteManifest(t.ID, b); err != nil {
		t.LogError("MANIFEST_WRITE", "SYSTEM", 0, err.Error())
		return fmt.Errorf("save manifest: %w", err)
	}
	return nil
}

// removePending deletes the pending file; durably when a later Begin must
// not find it (a unit that did not happen).
func (t *Tx) removePending(durable bool) error {
	if err := os.Remove(t.pendingPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", t.pendingPath(), err)
	}
	if !durable {
		return nil
	}
	return atomicfile.SyncDir(t.Dir)
}

// finishPending completes a commit a crash interrupted: the records not yet
// in the history are appended (a torn one was cut when the history was
// opened), then the manifest is saved. It reports whether it saved one.
func (t *Tx) finishPending() (bool, error) {
	data, err := os.ReadFile(t.pendingPath())
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("job %s: read pending commit: %w", t.ID, err)
	}
	var p pending
	if err := json.Unmarshal(data, &p); err != nil {
		// Written atomically, so never torn: this is damage, not a crash.
		return false, fmt.Errorf("job %s: pending commit %s is corrupt: %w", t.ID, t.pendingPath(), err)
	}
	written := t.Log.State().NextSeq - p.BaseSeq
	if written < 0 || written > int64(len(p.Records)) || !t.unitStartsAt(&p, written) {
		// The history is not where this unit left it (something that does
		// not know pending commits changed it since): the manifest on disk
		// is newer than the unit's. Keep nothing.
		return false, t.discardPending(&p)
	}
	if written == int64(len(p.Records)) && p.BaseManifest != "" {
		// Every record is stored: the manifest decides whether the unit
		// was finished (or overtaken) before the crash.
		cur, err := os.ReadFile(filepath.Join(t.Dir, jobstore.ManifestFile))
		if err == nil && bytes.Equal(cur, p.Manifest) {
			t.env.Logger.Warn("finished a commit a crash interrupted", "type", "error", "job_id", t.ID, "actor", "SYSTEM",
				"error_code", "COMMIT_FINISHED", "records", len(p.Records), "records_written_now", 0)
			return false, t.removePending(true)
		}
		if sum := sha256.Sum256(cur); err == nil && hex.EncodeToString(sum[:]) != p.BaseManifest {
			return false, t.discardPending(&p)
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
	if err := t.removePending(true); err != nil {
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
	return t.removePending(true)
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
