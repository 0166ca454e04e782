package jobtx

import (
	"bytes"
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

// commit writes the queued records and the manifest as one unit.
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
		for i := range q {
			if err := t.write(&q[i].stored, q[i].rec); err != nil {
				if i == 0 {
					// Nothing of the unit reached the history: the change
					// did not happen.
					t.removePending()
				}
				// Otherwise the next Begin finishes the unit.
				return err
			}
		}
	}
	if err := t.saveManifest(b); err != nil {
		return err
	}
	if len(q) > 0 {
		if err := t.removePending(); err != nil {
			return err
		}
	}
	t.saved = b
	return nil
}

func (t *Tx) writePending(q []queued, manifest []byte) error {
	p := pending{BaseSeq: t.Log.State().NextSeq, BasePrev: t.Log.LastHash(), Manifest: manifest, Parked: t.parked}
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
	if err := atomicfile.WriteFile(filepath.Join(t.Dir, jobstore.ManifestFile), b, 0o600); err != nil {
		t.LogError("MANIFEST_WRITE", "SYSTEM", 0, err.Error())
		return fmt.Errorf("save manifest: %w", err)
	}
	return nil
}

// removePending deletes the pending file durably: once Commit returns, no
// later Begin may take the unit for unfinished.
func (t *Tx) removePending() error {
	if err := os.Remove(t.pendingPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", t.pendingPath(), err)
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
		t.env.Logger.Warn("stale pending commit discarded", "type", "error", "job_id", t.ID, "actor", "SYSTEM",
			"error_code", "COMMIT_STALE", "base_seq", p.BaseSeq, "next_seq", t.Log.State().NextSeq)
		return false, t.removePending()
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
	if err := t.removePending(); err != nil {
		return false, err
	}
	t.env.Logger.Warn("finished a commit a crash interrupted", "type", "error", "job_id", t.ID, "actor", "SYSTEM",
		"error_code", "COMMIT_FINISHED", "records", len(p.Records), "records_written_now", int64(len(p.Records))-written)
	return true, nil
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
