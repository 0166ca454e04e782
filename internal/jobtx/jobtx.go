// Package jobtx is the one way a job changes: take the job's lock, read the
// manifest and history as they are on disk now, check each status change
// against the lifecycle table, append history records (fsync'd), log the
// change, then replace the manifest atomically and release the lock. The
// daemon's engine and the steward's CLI both use it, so neither can lose
// the other's update.
package jobtx

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/secrets"
	"github.com/logist/logist/internal/signing"
)

// Env is what transactions need from their process.
type Env struct {
	Store  *jobstore.Store
	Logger *slog.Logger
	Obs    Observer
	Now    func() time.Time
	// History says how histories are signed and rotated.
	History history.Options
	// Getenv reads the daemon's environment (secret values to redact).
	Getenv func(string) string
	// Witness, if set, hears where each job's history stands as this
	// process's transactions begin and write (Witness).
	Witness Witness

	cipherOnce sync.Once
	cipher     *secrets.Cipher
	cipherErr  error
}

// Cipher returns the jobs folder's content key (secrets.KeyPath: outside
// the folder when LOGIST_CONTENT_KEY_FILE says so), creating it on first use.
func (e *Env) Cipher() (*secrets.Cipher, error) {
	e.cipherOnce.Do(func() {
		e.cipher, e.cipherErr = secrets.LoadOrCreateCipher(secrets.KeyPath(e.Store.Dir, signing.Dir, e.getenv))
	})
	return e.cipher, e.cipherErr
}

func (e *Env) getenv(k string) string {
	if e.Getenv != nil {
		return e.Getenv(k)
	}
	return os.Getenv(k)
}

func (e *Env) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Env) obs() Observer {
	if e.Obs != nil {
		return e.Obs
	}
	return Nop{}
}

// Witness hears, under a job's lock, where the job's history stands when a
// transaction of this process begins (records up to there that it has not
// heard of were written by another process) and after each of its appends.
// The daemon tells its own records from those the steward's CLI wrote this
// way, and logs the latter (internal/daemon's relay). It runs in every
// transaction: it must be quick when nothing is new.
type Witness interface {
	Begun(t *Tx)
	Wrote(t *Tx)
	// Ended: the transaction is closing, its lock still held; nothing
	// more is written under it.
	Ended(t *Tx)
}

// Tx is an open transaction on one job.
type Tx struct {
	// afterCommit waits for the next commit (AfterCommit).
	afterCommit []func()
	env         *Env
	ID          string
	Dir         string
	M           *manifest.Manifest
	Log         *history.Log
	lock        *jobstore.Lock
	keep        *Kept
	ownLog      bool
	parked      bool // the job left the active statuses: materialise jobHistory.json
	changed     bool
	redact      *secrets.Redactor
	seal        *secrets.Cipher
	// saved is the manifest as on disk, encoded compact (json.Marshal).
	// Once M differs from it, appended
	// records wait in queue for Commit, which writes them and the manifest
	// as one unit a crash cannot split (commit.go).
	saved []byte
	queue []queued
	// base is the SHA-256 of the manifest file as on disk (a commit names
	// it: commit.go), baseStatus and baseTemplate what that file says.
	base         [32]byte
	baseStatus   lifecycle.Status
	baseTemplate bool
	// unfinished: a commit failed after its unit may have reached the
	// history; the next Begin settles it, nothing more may be written here.
	unfinished bool
}

// Kept is what a caller making many transactions on one job (the engine's
// Run) keeps open across them: the history, refreshed by each Begin, and
// the lock file, locked by each Begin and released by each Close. A step
// then costs no open of either. The zero value is ready; Close it when done.
type Kept struct {
	log  *history.Log
	lock *jobstore.Lock
	// raw is the manifest as the last transaction left it, and logSize
	// the history's size then: while nobody else wrote either, the next
	// Begin need not read the file again. m is what raw decodes to (never
	// handed out: each Begin gets a clone) and compact its encoding.
	raw     []byte
	logSize int64
	m       *manifest.Manifest
	compact []byte
	// seed is the manifest as the daemon's intake read and checked it
	// (Start), for the first Begin: taken while the file is still the
	// one read (jobstore.Store.Unchanged), under the lock.
	seed *jobstore.Loaded
}

// Start hands the next Begin the manifest l as the caller read and checked
// it (the daemon's intake), so that a pickup reads, decodes and checks
// job.json once. Begin takes it only if, under the job's lock, the file is
// still the one read; else it reads the file as usual. l.M is not changed:
// the transaction works on a copy.
func (k *Kept) Start(l *jobstore.Loaded) {
	if k.raw == nil {
		k.seed = l
	}
}

// Close closes what k keeps.
func (k *Kept) Close() {
	if k.log != nil {
		_ = k.log.Close() // each record was fsync'd as appended
		k.log = nil
	}
	if k.lock != nil {
		_ = k.lock.Unlock() // closing the descriptor releases it anyway
		k.lock = nil
	}
}

// Begin locks job id and loads it. keep, if not nil, holds the history
// and lock file to reuse, and gets them for the next Begin; nil opens
// them for this transaction only.
func Begin(env *Env, id string, keep *Kept) (*Tx, error) {
	var lk *jobstore.Lock
	var log *history.Log
	var err error
	if keep != nil && keep.lock != nil {
		log = keep.log
		lk, err = env.Store.Relock(id, keep.lock)
		if err != nil {
			keep.lock = nil // closed by Relock, or kept by nothing
		}
	} else {
		lk, err = env.Store.LockJob(id)
	}
	if err != nil {
		return nil, err
	}
	t := &Tx{env: env, ID: id, Dir: env.Store.JobDir(id), lock: lk, keep: keep}
	if keep != nil {
		keep.lock = lk
	}
	// The history first: its last unit holds the manifest a crash may
	// have kept from reaching the file (commit.go).
	var torn *history.TornTail
	if log == nil {
		l, tt, err := history.OpenWith(t.Dir, env.History)
		if err != nil {
			t.dropLock()
			return nil, err
		}
		t.Log, t.ownLog, torn = l, true, tt
		if keep != nil {
			keep.log, t.ownLog = l, false
		}
	} else {
		if err := log.Refresh(); err != nil {
			t.dropLock()
			return nil, err
		}
		t.Log = log
	}
	var raw []byte
	var seed *jobstore.Loaded
	if keep != nil && keep.raw != nil && keep.logSize == t.Log.Size() && env.Store.WrittenHereAs(id, lk) {
		// Still the file this Run saved (same inode, size and time), and
		// the history says no other transaction came between.
		raw = keep.raw
	} else if keep != nil && keep.seed != nil && env.Store.Unchanged(id, &keep.seed.FileRead) {
		// Still the file the intake read (Start): its bytes and the
		// manifest they decoded to, checked then.
		seed, raw = keep.seed, keep.seed.Raw
	}
	if keep != nil {
		keep.seed = nil // for the first Begin only
	}
	kept := raw
	raw, err = t.restoreManifest(raw)
	var m *manifest.Manifest
	switch {
	case err != nil:
	case seed != nil && sameArray(raw, seed.Raw):
		// The history had nothing to put back: start from a copy of what
		// the intake decoded (it may still read its own), and keep that
		// for the next Begin, as a decode here would.
		m = seed.M.Clone()
		if t.saved, err = json.Marshal(m); err == nil {
			keep.m, keep.compact = seed.M, t.saved
		}
	case kept != nil && keep.m != nil && sameArray(raw, kept):
		// The file is as the last transaction left it: start from a copy
		// of the manifest it decoded to, not from a new decode.
		m, t.saved = keep.m.Clone(), keep.compact
	default:
		if m, err = env.Store.Parse(id, raw); err == nil {
			t.saved, err = json.Marshal(m)
		}
		if err == nil && keep != nil {
			keep.m, keep.compact = m.Clone(), t.saved
		}
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	if err == nil && t.Log.Size() == 0 {
		err = HistoryGone(t.Dir, m)
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	t.M, t.base = m, sha256.Sum256(raw)
	t.remember(raw)
	t.baseStatus, t.baseTemplate = m.Status, m.Schedule != nil
	if torn != nil {
		joblog.Log(env.Logger, "history torn tail cut", joblog.Problem{Job: id, Status: string(m.Status),
			Code: codes.HistoryTornTail, Checkpoint: t.Log.State().LastCheckpoint}, "offset", torn.Offset, "bytes", torn.Bytes)
		env.obs().TornTail()
	}
	t.redact = secrets.JobRedactor(m.SecretEnv, m.EnvAllowNames(), m.KeyEnvNames(), env.getenv)
	if m.EncryptHistory {
		c, err := env.Cipher()
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("job %s asks for encrypted history: %w", id, err)
		}
		t.seal = c
		// The file holds the agents' text sealed (encodeManifest): the
		// transaction works on it open. A field that does not open stays
		// as it is.
		t.M.MapAgentText(func(s string) string {
			if p, err := c.Open(s, id); err == nil {
				return p
			}
			return s
		})
	}
	if env.Witness != nil {
		env.Witness.Begun(t)
	}
	return t, nil
}

// sameArray says whether a and b are the same bytes in memory, not merely
// equal ones.
func sameArray(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// dropLock releases and closes the lock of a Begin that failed; a keep
// takes a new one next time.
func (t *Tx) dropLock() {
	_ = t.lock.Unlock() // closing the descriptor releases it anyway
	if t.keep != nil {
		t.keep.lock = nil
	}
}

// remember tells keep what the job's files hold now.
func (t *Tx) remember(raw []byte) {
	if t.keep != nil {
		t.keep.raw, t.keep.logSize = raw, t.Log.Size()
	}
}

// AfterCommit calls f once what the transaction holds so far is durable:
// at once when nothing waits for a commit, else after the next commit
// succeeds; never if the transaction ends first (a commit the storage
// refused: the step is taken again). For what is counted once per thing
// recorded (the daemon's metrics of calls).
func (t *Tx) AfterCommit(f func()) {
	if len(t.queue) == 0 && !t.manifestChanged() {
		f()
		return
	}
	t.afterCommit = append(t.afterCommit, f)
}

// Close releases the lock (and the history if the transaction opened it).
// Uncommitted manifest changes, and the records waiting for them, are
// dropped.
func (t *Tx) Close() {
	if len(t.queue) > 0 {
		t.env.Logger.Warn("uncommitted history records dropped", "job_id", t.ID, "records", len(t.queue))
		t.queue = nil
	}
	t.afterCommit = nil // what they waited for was never recorded
	if t.env.Witness != nil {
		t.env.Witness.Ended(t)
	}
	if t.ownLog && t.Log != nil {
		_ = t.Log.Close() // each record was fsync'd as appended
	}
	if t.keep != nil {
		if t.lock.Release() == nil {
			return
		}
		// Still held: closing the file releases it, and the next Begin
		// takes a new one.
		t.keep.lock = nil
	}
	_ = t.lock.Unlock() // closing the descriptor releases it anyway
}

// Now is the transaction's clock.
func (t *Tx) Now() time.Time { return t.env.now() }

// Append writes a history record durably: a copy with secret values
// redacted and, for jobs that ask for it, content encrypted. rec itself is
// left as it was (the agent still gets the real request) except for the
// fields the log assigns (seq, time, links).
//
// Once the transaction has changed the manifest, a record belongs to that
// change: it is written by Commit, with the manifest, so that a crash
// leaves both or neither (commit.go). An intent is always written at once,
// since the agent is called after it.
func (t *Tx) Append(rec *history.Record) error {
	return t.add(rec, false)
}

// AppendChange is Append for a record of a manifest change the caller has
// already made (the engine counts a response in the manifest before it
// records it): the record waits for Commit, as Append would find, without
// encoding the whole manifest to learn that it changed. An intent is never
// a change's record.
func (t *Tx) AppendChange(rec *history.Record) error {
	return t.add(rec, true)
}

// storedCopy is rec as the history keeps it: secrets redacted, content
// sealed for jobs that ask for it.
func (t *Tx) storedCopy(rec *history.Record) history.Record {
	stored := rec.Clone()
	stored.Text(t.Redact)
	if t.seal != nil {
		stored.Content(func(s string) string { return t.seal.Seal(s, t.ID) })
	}
	return stored
}

// CommitWithIntent commits the manifest change in progress with the intent
// rec as the unit's last record, so that the change's records, the intent
// and the manifest cost one history fsync rather than two (the intent's own
// append after the commit). As after Append, the intent is durable when it
// returns nil and the call may start; a crash before that leaves the whole
// unit, intent included, or none of it (commit.go). With no change in
// progress it is Append.
func (t *Tx) CommitWithIntent(rec *history.Record) error {
	if rec.Type != history.TypeIntent {
		return fmt.Errorf("job %s: CommitWithIntent takes an intent, not %s", t.ID, rec.Type)
	}
	if len(t.queue) == 0 && !t.manifestChanged() {
		return t.Append(rec)
	}
	t.enqueue(t.storedCopy(rec), rec)
	return t.Commit()
}

func (t *Tx) add(rec *history.Record, change bool) error {
	stored := t.storedCopy(rec)
	if change || len(t.queue) > 0 || (rec.Type != history.TypeIntent && t.manifestChanged()) {
		if rec.Type == history.TypeIntent {
			return fmt.Errorf("job %s: an intent cannot wait for a manifest change to be committed; commit first", t.ID)
		}
		t.enqueue(stored, rec)
		return nil
	}
	return t.write(&stored, rec)
}

// write appends one record now (fsync'd); rec, if not nil, gets the fields
// the log assigned.
func (t *Tx) write(stored, rec *history.Record) error {
	if t.unfinished {
		return errUnfinished(t.ID)
	}
	start := time.Now()
	err := t.Log.Append(stored)
	t.wrote()
	if rec != nil {
		rec.V, rec.Seq, rec.PrevHash, rec.Time = stored.V, stored.Seq, stored.PrevHash, stored.Time
	}
	t.env.obs().HistoryAppend(time.Since(start), err)
	if err != nil {
		t.LogCode(codes.HistoryWrite, "SYSTEM", 0, err.Error())
	} else if t.keep != nil && t.keep.raw != nil {
		// Written with the manifest unchanged: the file is as remembered.
		t.keep.logSize = t.Log.Size()
	}
	return err
}

// wrote tells the witness how far the history now goes (after a failed
// append too: a failed rotation leaves the records stored).
func (t *Tx) wrote() {
	if t.env.Witness != nil {
		t.env.Witness.Wrote(t)
	}
}

// Redact replaces the job's secret values in s.
func (t *Tx) Redact(s string) string { return t.redact.Redact(s) }

// Reveal returns a stored record as it was before sealing (for the engine's
// re-attempt of an interrupted call).
func (t *Tx) Reveal(rec *history.Record) (*history.Record, error) {
	c := rec.Clone()
	var err error
	c.Content(func(s string) string {
		if !secrets.Sealed(s) {
			return s
		}
		ciph, cerr := t.env.Cipher()
		if cerr != nil {
			err = cerr
			return s
		}
		out, oerr := ciph.Open(s, t.ID)
		if oerr != nil {
			err = oerr
			return s
		}
		return out
	})
	return &c, err
}

// State is the history's state as the transaction will leave it: the
// log's, with the records waiting for Commit applied (a response held for
// the next call's intent closes the intent it answers, and the next
// interaction is counted past it).
func (t *Tx) State() history.State {
	if len(t.queue) == 0 {
		return t.Log.State()
	}
	recs := make([]*history.Record, len(t.queue))
	for i := range t.queue {
		recs[i] = &t.queue[i].stored
	}
	return t.Log.State().With(recs...)
}

// Holding says whether records wait for Commit.
func (t *Tx) Holding() bool { return len(t.queue) > 0 }

// Checkpoint is the job's current checkpoint id (history.Record.Checkpoint:
// the newest recovery point, or the one a later rollback returned to),
// records waiting for Commit included.
func (t *Tx) Checkpoint() string {
	id, _ := t.CheckpointRef()
	return id
}

// CheckpointRef is Checkpoint with that checkpoint's workspace snapshot
// (nil if it has none or it is not known).
func (t *Tx) CheckpointRef() (string, *history.SnapshotRef) {
	for i := len(t.queue) - 1; i >= 0; i-- {
		if id, snap, ok := t.queue[i].stored.Checkpoint(); ok {
			return id, snap
		}
	}
	st := t.Log.State()
	return st.LastCheckpoint, st.CheckpointSnapshot
}

// Transition moves the job to status `to` (and phase toPhase; "" keeps the
// phase) for event ev, if the lifecycle table allows it. The transition is
// recorded in history and logged; an illegal one is refused, logged as a
// bug, and recorded as an ILLEGAL_TRANSITION error at once (not with the
// change it belonged to, which is dropped): whoever attempted it, the
// history keeps it, and the daemon logs it when another process did.
func (t *Tx) Transition(ev lifecycle.Event, to lifecycle.Status, toPhase, actor, reason string) error {
	from := t.M.Status
	fromPhase := t.M.Phase()
	if err := lifecycle.Check(from, ev, to); err != nil {
		t.LogCode(codes.IllegalTransition, actor, 0, err.Error())
		stored := t.storedCopy(t.errorRecord(codes.IllegalTransition, actor, 0, err.Error()))
		if werr := t.write(&stored, nil); werr != nil {
			return fmt.Errorf("job %s: %w (not recorded in its history: %v)", t.ID, err, werr)
		}
		return fmt.Errorf("job %s: %w (refused, and recorded in its history as %s)", t.ID, err, codes.IllegalTransition)
	}
	if toPhase == "" {
		toPhase = fromPhase
	}
	tr := &history.Transition{From: string(from), To: string(to), FromPhase: fromPhase, ToPhase: toPhase,
		Event: string(ev), Actor: actor, CheckpointID: t.Checkpoint(), Reason: reason}
	// A transition is a manifest change: written by Commit.
	if err := t.add(&history.Record{Type: history.TypeTransition, Phase: toPhase, Transition: tr}, true); err != nil {
		return err
	}
	t.M.Status = to
	t.M.SetPhase(toPhase)
	now := t.Now().UTC().Format(time.RFC3339Nano)
	switch {
	case to.Waiting():
		t.M.Run.Reason = reason
	case to.Terminal():
		t.M.Run.FinishedAt = now
		if to == lifecycle.Canceled {
			t.M.Run.Reason = reason
		}
	case to.Active():
		t.M.Run.Reason, t.M.Run.ErrorCode = "", ""
	}
	if !to.Active() {
		t.parked = true
	}
	t.changed = true
	// Said once recorded: a commit the storage refuses leaves the job as
	// it was, and a line or a metric for it would tell otherwise.
	line := TransitionLine(t.ID, tr, t.Redact(reason))
	t.AfterCommit(func() {
		joblog.LogTransition(t.env.Logger, line)
		t.env.obs().JobStatus(t.ID, from, to)
	})
	return nil
}

// LogCode logs code's line (seed 004 §7.2: an error, or a warning or info
// as the code's kind says, joblog) with the job's status, checkpoint and
// phase, msg redacted.
func (t *Tx) LogCode(code, actor string, attempt int, msg string) {
	joblog.Log(t.env.Logger, t.Redact(msg), joblog.Problem{Job: t.ID, Status: string(t.M.Status), Actor: actor, Code: code,
		Attempt: attempt, Checkpoint: t.Checkpoint(), Phase: t.M.Phase()})
}

// RecordError appends an error event to history and logs it.
func (t *Tx) RecordError(code, actor string, attempt int, msg string) error {
	t.LogCode(code, actor, attempt, msg)
	return t.Append(t.errorRecord(code, actor, attempt, msg))
}

// errorRecord is an error event as history records it; state_before is
// the job's status when it happened (a reader of the record alone, such as
// the daemon logging another process's errors, has no other way to know).
func (t *Tx) errorRecord(code, actor string, attempt int, msg string) *history.Record {
	return &history.Record{Type: history.TypeError, Phase: t.M.Phase(), Role: actor, Attempt: attempt, StateBefore: string(t.M.Status),
		Error: &history.ErrorInfo{Code: code, Message: msg, CheckpointID: t.Checkpoint()}}
}

// MarkParked asks Commit to refresh jobHistory.json (a safe boundary).
func (t *Tx) MarkParked() { t.parked = true }

// Commit saves the manifest atomically, after the history records it
// depends on are fsync'd, so the manifest never runs ahead of them. The
// records that waited for it and the manifest are one unit: a crash
// between them is finished by the next Begin (commit.go).
func (t *Tx) Commit() error {
	if len(t.queue) == 0 && !t.manifestChanged() {
		// Nothing to save: no record, no new updated_at.
		if t.parked {
			t.writeJobHistory()
		}
		return nil
	}
	r := &t.M.Run
	r.Reason, r.LastSummary, r.Feedback, r.PreviousSummary = t.Redact(r.Reason), t.Redact(r.LastSummary), t.Redact(r.Feedback), t.Redact(r.PreviousSummary)
	for i := range t.M.History {
		t.M.History[i].Note = t.Redact(t.M.History[i].Note)
	}
	// The manifest names the current checkpoint as the history has it:
	// one rule (Checkpoint), whoever moved it.
	t.M.Run.CheckpointID = t.Checkpoint()
	t.M.Run.UpdatedAt = t.Now().UTC().Format(time.RFC3339Nano)
	if t.M.CreatedAt == "" {
		t.M.CreatedAt = t.M.Run.UpdatedAt
	}
	if err := t.commit(); err != nil {
		return err
	}
	if t.parked {
		t.writeJobHistory()
	}
	return nil
}

func (t *Tx) writeJobHistory() {
	var err error
	if recs, ok := t.Log.Records(); ok {
		err = history.WriteJobHistoryOf(t.Dir, t.ID, t.M.CreatedAt, t.env.Store.Workspace(t.ID), recs, t.Log.LastHash())
	} else {
		err = history.WriteJobHistory(t.Dir, t.ID, t.M.CreatedAt, t.env.Store.Workspace(t.ID))
	}
	if err != nil {
		// jobHistory.json is derived; the durable record is intact.
		t.LogCode(codes.JobHistoryWrite, "SYSTEM", 0, err.Error())
	}
}

// OutOfOrderError says a command does not apply to the job's status.
type OutOfOrderError struct {
	ID     string
	Status lifecycle.Status
	Want   string
	Hint   string
}

func (e *OutOfOrderError) Error() string {
	s := fmt.Sprintf("job %s is %s; %s", e.ID, e.Status, e.Want)
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// IsOutOfOrder reports whether err is an OutOfOrderError.
func IsOutOfOrder(err error) bool {
	var e *OutOfOrderError
	return errors.As(err, &e)
}

// Store is the jobs folder.
func (t *Tx) Store() *jobstore.Store { return t.env.Store }
