package jobtx

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jsonindent"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/secrets"
)

// A change to a job is a unit: the history records it depends on (a
// response, a recovery point, a transition) and the manifest it leaves.
//
// Why a unit: written one after the other, a crash in between leaves a
// history ahead of its manifest: the response recorded, its cost, call
// count and transition not. The next start then asks the agent again in a
// phase the history says the job has left, pays for it twice, and records
// the transition twice.
//
// How: Commit appends the unit's records to the history with the manifest
// itself on the last one (history.Commit), in one write and one fsync
// (history.AppendBatch keeps all of a unit or none of it across a crash).
// Only then is the manifest file replaced, and without an fsync of its own
// when the daemon comes back to the job after a crash anyway: the history
// is the durable copy. A crash that loses the file's replacement leaves it
// at the unit's base (or, on some file systems, torn); the next Begin puts
// the committed manifest back (restoreManifest) before anything reads the
// job. One fsync per change instead of four (a separate pending file, the
// records, the manifest and its folder).

// queued is a record waiting for Commit: as it will be stored, and the
// caller's copy that gets the fields the log assigns.
type queued struct {
	stored history.Record
	rec    *history.Record
}

func (t *Tx) manifestChanged() bool {
	b, err := json.Marshal(t.M)
	return err != nil || !bytes.Equal(b, t.saved)
}

func (t *Tx) enqueue(stored history.Record, rec *history.Record) {
	if stored.Time == "" {
		// When it happened, not when it was written.
		stored.Time = time.Now().UTC().Format(time.RFC3339Nano)
	}
	t.queue = append(t.queue, queued{stored: stored, rec: rec})
}

// encodeManifest is the manifest compact (for the history) and as its file
// holds it (manifest.Encode: the same, indented).
func (t *Tx) encodeManifest() (compact, file []byte, err error) {
	m := t.M
	if t.seal != nil {
		// encrypt_history: the agents' and stewards' text is sealed in
		// the file too, not only in the history (manifest.MapAgentText).
		m = t.M.Clone()
		m.MapAgentText(func(s string) string { return t.seal.Seal(s, t.ID) })
	}
	compact, err = json.Marshal(m)
	if err != nil {
		return nil, nil, err
	}
	return compact, indentManifest(compact), nil
}

// said is what m's encoding says of the job to the store that checks
// the unit (history.Said): encodeManifest's copy of m differs from m in
// the agents' text alone.
func said(m *manifest.Manifest) *history.Said {
	s := &history.Said{Status: string(m.Status), Cost: m.Metrics.CumulativeCost}
	if m.CostThreshold != nil {
		b := *m.CostThreshold
		s.Budget = &b
	}
	return s
}

func indentManifest(compact []byte) []byte {
	b, err := jsonindent.Append(make([]byte, 0, len(compact)*3/2), compact, "  ")
	if err != nil {
		return nil
	}
	return append(b, '\n')
}

// durableFile says whether the manifest file must be fsync'd itself: when
// the daemon would not come back to the job after a crash (its status as on
// disk is not one the daemon runs, or it is a template), nothing would
// restore the file from the history before a steward reads it.
func (t *Tx) durableFile() bool {
	return !t.baseStatus.Active() || t.baseTemplate
}

// commit writes the queued records and the manifest as one unit (see the
// top of this file).
func (t *Tx) commit() error {
	compact, b, err := t.encodeManifest()
	if err == nil && b == nil {
		err = errors.New("indent failed")
	}
	if err == nil {
		// Before the unit is stored: a manifest Logist could not read
		// back is never committed.
		if err = manifest.CheckSize(t.ID, b); err != nil {
			t.LogCode(codes.ManifestTooLarge, "SYSTEM", 0, err.Error())
			return fmt.Errorf("save manifest: %w", err)
		}
	}
	if err != nil {
		t.LogCode(codes.ManifestWrite, "SYSTEM", 0, err.Error())
		return fmt.Errorf("save manifest: encode: %w", err)
	}
	if t.unfinished {
		return errUnfinished(t.ID)
	}
	q := t.queue
	t.queue = nil
	if len(q) == 0 {
		// A change with no record of its own still needs the history to
		// hold the manifest it leaves.
		t.enqueue(history.Record{Type: history.TypeCommit, Phase: t.M.Phase(), Role: "SYSTEM"}, nil)
		q, t.queue = t.queue, nil
	}
	sum := sha256.Sum256(b)
	c := &history.Commit{Base: hex.EncodeToString(t.base[:]), Sum: hex.EncodeToString(sum[:]), Plain: compact, Said: said(t.M)}
	if c.Manifest, err = t.storedManifest(compact); err != nil {
		return fmt.Errorf("save manifest: %w", err)
	}
	q[len(q)-1].stored.Commit = c
	if err := t.writeBatch(q); err != nil {
		if !t.Log.Intact() {
			// Part of the unit may be in the file: the next open cuts it.
			t.unfinished = true
		}
		return err
	}
	write := t.env.Store.WriteManifestCopy
	if t.durableFile() {
		write = t.env.Store.WriteManifest
	}
	if err := write(t.ID, b); err != nil {
		// The unit is in the history; the next Begin restores the file.
		t.unfinished = true
		t.LogCode(codes.ManifestWrite, "SYSTEM", 0, err.Error())
		return fmt.Errorf("save manifest: %w", err)
	}
	t.saved, t.base = compact, sum
	t.remember(b)
	if t.keep != nil {
		t.keep.m, t.keep.compact = t.M.Clone(), compact
	}
	t.baseStatus, t.baseTemplate = t.M.Status, t.M.Schedule != nil
	after := t.afterCommit
	t.afterCommit = nil
	for _, f := range after {
		f()
	}
	return nil
}

// errUnfinished refuses to go on in a transaction whose commit failed
// after its unit may have reached the history: the next Begin settles it.
func errUnfinished(id string) error {
	return fmt.Errorf("job %s: an earlier commit of this transaction did not finish; begin a new one", id)
}

// writeBatch appends the queued records as one unit with one fsync; each
// caller's copy gets the fields the log assigned.
func (t *Tx) writeBatch(q []queued) error {
	recs := make([]*history.Record, len(q))
	for i := range q {
		recs[i] = &q[i].stored
	}
	start := time.Now()
	err := t.Log.AppendBatch(recs)
	t.wrote()
	t.env.obs().HistoryAppend(time.Since(start), err)
	if err != nil {
		t.LogCode(codes.HistoryWrite, "SYSTEM", 0, err.Error())
		return err
	}
	for _, e := range q {
		if e.rec != nil {
			e.rec.V, e.rec.Seq, e.rec.PrevHash, e.rec.Time = e.stored.V, e.stored.Seq, e.stored.PrevHash, e.stored.Time
		}
	}
	return nil
}

// restoreManifest returns the manifest file's content (raw, if the caller
// knows it, else read), first putting back
// the one the history's last unit committed when a crash lost the file's
// replacement: the file is still at that unit's base, or is no longer
// JSON. A file that is neither the unit's manifest nor its base was
// changed by someone else since (a steward's hand edit) and is kept.
func (t *Tx) restoreManifest(raw []byte) ([]byte, error) {
	path := filepath.Join(t.Dir, jobstore.ManifestFile)
	if raw == nil {
		var err error
		if raw, err = t.env.Store.ReadManifest(t.ID); err != nil {
			return nil, err
		}
	}
	lc := t.Log.State().LastCommit
	if lc == nil {
		return raw, nil
	}
	sum := sha256.Sum256(raw)
	cur := hex.EncodeToString(sum[:])
	if cur == lc.Sum {
		return raw, nil
	}
	compact, err := t.committedManifest(lc)
	if err != nil {
		return nil, err
	}
	if cur != lc.Base && json.Valid(raw) && !sameDefinition(raw, compact) {
		// Changed by someone else since (a steward's hand edit): kept,
		// but never what governs a job while it runs.
		return t.governedBack(raw, compact)
	}
	b := indentManifest(compact)
	if b == nil {
		return nil, fmt.Errorf("job %s: committed manifest in %s is not JSON", t.ID, t.Log.Path())
	}
	if err := t.env.Store.WriteManifest(t.ID, b); err != nil {
		return nil, fmt.Errorf("job %s: restore %s: %w", t.ID, path, err)
	}
	var head struct {
		CreatedAt string           `json:"created_at"`
		Status    lifecycle.Status `json:"status"`
	}
	_ = json.Unmarshal(compact, &head)
	if !head.Status.Active() {
		if err := history.WriteJobHistory(t.Dir, t.ID, head.CreatedAt, t.env.Store.Workspace(t.ID)); err != nil {
			joblog.Log(t.env.Logger, "jobHistory.json not written", joblog.Problem{Job: t.ID, Status: string(head.Status),
				Code: codes.JobHistoryWrite, Checkpoint: t.Log.State().LastCheckpoint}, "error", err.Error())
		}
	}
	was := "at the change's base"
	switch {
	case !json.Valid(raw):
		was = "not JSON"
	case cur != lc.Base:
		was = "a mix of saves (only run state differs)"
	}
	joblog.Log(t.env.Logger, "finished a commit a crash interrupted: manifest restored from history", joblog.Problem{Job: t.ID,
		Status: string(head.Status), Code: codes.CommitFinished, Checkpoint: t.Log.State().LastCheckpoint}, "manifest_was", was)
	return b, nil
}

// governed are the fields that govern a job and change only through a
// signed steward command (logist set, resume's budgets): its budgets, its
// agents, its workflow, its containment; and, while it runs, Logist's own
// record of the run, which only its transactions write (status, phase,
// run state, metrics, history notes): an edit that zeroed the metrics got
// past the budgets (their spending is counted there), one that set status
// SUCCESS ended the job with no supervisor asked.
var governed = []string{"cost_threshold", "time_threshold_minutes", "limits", "agents", "workflow", "prompts",
	"secret_env", "sandbox", "sandbox_network", "sandbox_network_allow", "protocol", "game",
	"status", "current_phase", "run", "metrics", "history"}

// governedBack puts back the committed values of the governed fields of a
// manifest changed by hand while its job runs (RUNNING, REVIEWING: an
// agent's call may be in flight, and an agent must never raise its own
// budget or swap its own program). The rest of the edit is
// kept, as for a stopped job's. The restore is logged (MANIFEST_EDITED);
// the history never held the edit, so verify sees no unrecorded change.
func (t *Tx) governedBack(raw, compact []byte) ([]byte, error) {
	var file, committed map[string]json.RawMessage
	var head struct {
		Status lifecycle.Status `json:"status"`
	}
	if json.Unmarshal(raw, &file) != nil || json.Unmarshal(compact, &committed) != nil || json.Unmarshal(compact, &head) != nil {
		return raw, nil
	}
	if head.Status != lifecycle.Running && head.Status != lifecycle.Reviewing {
		return raw, nil
	}
	var changed []string
	for _, k := range governed {
		a, inFile := file[k]
		b, inCommit := committed[k]
		if inFile == inCommit && (!inFile || sameJSON(a, b)) {
			continue
		}
		changed = append(changed, k)
		if inCommit {
			file[k] = b
		} else {
			delete(file, k)
		}
	}
	if len(changed) == 0 {
		return raw, nil
	}
	flat, err := json.Marshal(file)
	if err != nil {
		return nil, err
	}
	b := indentManifest(flat)
	if err := t.env.Store.WriteManifest(t.ID, b); err != nil {
		return nil, fmt.Errorf("job %s: restore the governed fields of %s: %w", t.ID, jobstore.ManifestFile, err)
	}
	joblog.Log(t.env.Logger, "job.json was edited while the job runs, not by a steward command: the committed "+
		strings.Join(changed, ", ")+" restored (a steward changes them with logist's commands: set, resume, halt)",
		joblog.Problem{Job: t.ID, Status: string(head.Status), Code: codes.ManifestEdited, Checkpoint: t.Log.State().LastCheckpoint})
	return b, nil
}

// sameJSON reports whether two JSON values are equal as values.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// packedPrefix starts a committed manifest stored compressed (raw deflate,
// then base64). A job's history holds one manifest per change, and a
// manifest carries up to 50 audit entries: stored plain, a job that
// retries often would grow its history several times over.
const packedPrefix = history.PackedPrefix

// plainMax is the largest compact manifest a commit stores as its JSON
// object rather than packed. Deflate's cost hardly depends on the size (a
// pooled writer at BestSpeed: 13-17 µs a commit for 0.6-1.9 KB on a quiet
// core, about 40 µs in a busy daemon), while what it saves grows with it:
// measured on the manifests of a job that retries (its audit growing by
// one entry a call), the plain form is 1.3 times the packed one at 600
// bytes, 1.5 at 1 KB, 2.0 at 1.5 KB, 4 at 4 KB and 5.3 at 6.4 KB (50
// entries). Up to 1.5 KiB a record is thus at most about twice what it
// would be packed, 750 bytes more; above, packed, as before.
const plainMax = 1536

// storedManifest is compact as a commit record stores it (Commit.Manifest):
// as it is, a JSON object, when small (plainMax); else packed; sealed for
// a job with encrypted history, whatever its size. Readers take each form
// (committedManifest, verify).
func (t *Tx) storedManifest(compact []byte) (json.RawMessage, error) {
	if t.seal == nil && len(compact) <= plainMax {
		return compact, nil
	}
	packed := packManifest(compact)
	if t.seal == nil {
		// Base64 and the prefix need no escaping: the string as JSON.
		return append(append(append(make([]byte, 0, len(packed)+2), '"'), packed...), '"'), nil
	}
	return json.Marshal(t.seal.Seal(packed, t.ID))
}

// deflaters are reused: a new flate.Writer allocates about a megabyte of
// tables, which cost more than the compression itself.
var deflaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed)
	return w
}}

// Warm does once what the first commit would otherwise do for the first
// time in the middle of a job's pickup: a deflate writer's tables, and the
// encoding of history records.
func Warm(signer history.Signer) {
	packManifest([]byte(`{"job_id":"warm"}`))
	history.Warm(signer)
}

func packManifest(compact []byte) string {
	var b bytes.Buffer
	w := deflaters.Get().(*flate.Writer)
	w.Reset(&b)
	// Into a bytes.Buffer: neither can fail.
	_, _ = w.Write(compact)
	_ = w.Close()
	deflaters.Put(w)
	return packedPrefix + base64.StdEncoding.EncodeToString(b.Bytes())
}

// committedManifest is the compact manifest a commit holds: stored as a
// JSON object, or as a string that is packed (packManifest), sealed for a
// job with encrypted history, or both.
func (t *Tx) committedManifest(lc *history.Commit) ([]byte, error) {
	return t.env.committedManifest(t.ID, lc)
}

// CommittedFile is the manifest file a commit record wrote, byte for byte
// (cluster mode keeps it beside the history it belongs to).
func (e *Env) CommittedFile(id string, lc *history.Commit) ([]byte, error) {
	compact, err := e.committedManifest(id, lc)
	if err != nil {
		return nil, err
	}
	b := indentManifest(compact)
	if b == nil {
		return nil, fmt.Errorf("job %s: committed manifest is not JSON", id)
	}
	return b, nil
}

// CommittedManifest is the manifest a commit record holds, compact (as
// the transaction encoded it; CommittedFile is it as its file holds it).
func (e *Env) CommittedManifest(id string, lc *history.Commit) ([]byte, error) {
	return e.committedManifest(id, lc)
}

func (e *Env) committedManifest(id string, lc *history.Commit) ([]byte, error) {
	if lc.Plain != nil {
		// This process encoded it (read only): not unsealed and
		// inflated again.
		return lc.Plain, nil
	}
	stored := []byte(lc.Manifest)
	if len(stored) == 0 || stored[0] != '"' {
		return stored, nil
	}
	var s string
	if err := json.Unmarshal(stored, &s); err != nil {
		return nil, fmt.Errorf("job %s: committed manifest: %w", id, err)
	}
	if secrets.Sealed(s) {
		c, err := e.Cipher()
		if err != nil {
			return nil, fmt.Errorf("job %s: committed manifest is sealed: %w", id, err)
		}
		if s, err = c.Open(s, id); err != nil {
			return nil, fmt.Errorf("job %s: committed manifest: %w", id, err)
		}
	}
	out, err := history.UnpackManifest(s, manifest.MaxSize+1)
	if err != nil {
		return nil, fmt.Errorf("job %s: committed manifest: %w", id, err)
	}
	return out, nil
}

// runState are the manifest fields Logist itself writes as a job runs.
var runState = []string{"status", "current_phase", "created_at", "metrics", "history", "run"}

// sameDefinition reports whether manifests a and b differ at most in run
// state: the file is then not a steward's edit but Logist's own save that a
// crash left mixed with an older one (the daemon saves in place).
func sameDefinition(a, b []byte) bool {
	var ma, mb map[string]any
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		return false
	}
	for _, k := range runState {
		delete(ma, k)
		delete(mb, k)
	}
	return reflect.DeepEqual(ma, mb)
}
