package jobtx

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/verify"
)

const testManifest = `{"task_description": "t", "agents": {
  "worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "done"}]},
  "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type fixture struct {
	env *Env
	key *signing.Key
	dir string // the job folder
	log *syncBuf
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	jobs := t.TempDir()
	key, err := signing.LoadOrCreate(jobs)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{key: key, dir: filepath.Join(jobs, "j"), log: &syncBuf{}}
	f.env = &Env{Store: jobstore.New(jobs), Logger: slog.New(slog.NewJSONHandler(f.log, nil)),
		History: history.Options{Signer: key}}
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, jobstore.ManifestFile), []byte(testManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	// Started, with the worker's call recorded as in flight.
	tx := f.begin(t)
	if err := tx.Transition(lifecycle.EvStart, lifecycle.Running, "work", "SYSTEM", ""); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := tx.Append(&history.Record{Type: history.TypeIntent, Interaction: &n, Phase: "work", Role: "worker", Attempt: 1,
		StateBefore: "RUNNING", Request: &history.Request{Prompt: "p", FilesContext: []string{}, Metadata: map[string]any{}}}); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	return f
}

func (f *fixture) begin(t *testing.T) *Tx {
	t.Helper()
	tx, err := Begin(f.env, "j", nil)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	return tx
}

// unit makes the change a worker's COMPLETED answer makes: cost and call
// counted, response, recovery point, transition to review.
func (f *fixture) unit(t *testing.T, tx *Tx) {
	t.Helper()
	tx.M.Metrics.CumulativeCost += 3
	tx.M.Metrics.AgentCalls++
	n := 0
	if err := tx.Append(&history.Record{Type: history.TypeResponse, Interaction: &n, Phase: "work", Role: "worker", Attempt: 1,
		StateBefore: "RUNNING", Response: &history.Response{Status: history.StatusSuccess, Action: "COMPLETED", EvidenceFiles: []string{},
			Summary: "done", RawResponse: `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"done"}`, CostUSD: 0.03}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Append(&history.Record{Type: history.TypeRecoveryPoint, Phase: "work", Role: "worker",
		RecoveryPoint: &history.RecoveryPoint{CheckpointID: "cp-0000-work", ResumePhase: "review", CanResumeFrom: true, RollbackFiles: []string{}}}); err != nil {
		t.Fatal(err)
	}
	if got := tx.Checkpoint(); got != "cp-0000-work" {
		t.Errorf("Checkpoint() with a recovery point waiting = %q", got)
	}
	if err := tx.Transition(lifecycle.EvAdvance, lifecycle.Reviewing, "review", "worker", ""); err != nil {
		t.Fatal(err)
	}
}

// pendingUnit is the unit left in the pending file, nil if none.
func (f *fixture) pendingUnit(t *testing.T) *PendingUnit {
	t.Helper()
	u, err := ReadPendingUnit(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func (f *fixture) records(t *testing.T) []history.Record {
	t.Helper()
	recs, err := history.ReadAll(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func (f *fixture) manifest(t *testing.T) *manifest.Manifest {
	t.Helper()
	m, err := f.env.Store.Load("j")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// check asserts the job is exactly as after a whole unit: once each.
func (f *fixture) checkDone(t *testing.T) {
	t.Helper()
	recs := f.records(t)
	var types []string
	for _, r := range recs {
		types = append(types, r.Type)
	}
	want := "transition intent response recovery_point transition"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("history: %s\nwant:    %s", got, want)
	}
	m := f.manifest(t)
	if m.Status != lifecycle.Reviewing || m.Phase() != "review" || m.Metrics.AgentCalls != 1 || m.Metrics.CumulativeCost != 3 {
		t.Errorf("manifest: %s/%s calls %d cost %v; want REVIEWING/review, 1 call, 3 cents", m.Status, m.Phase(), m.Metrics.AgentCalls, m.Metrics.CumulativeCost)
	}
	if u := f.pendingUnit(t); u != nil {
		t.Errorf("pending commit left: %+v", u)
	}
	rep, err := verify.Job("j", f.dir, verify.Options{Public: f.key.Public(), Manifest: m})
	if err != nil || !rep.OK() {
		t.Errorf("verify: %v %v", err, rep.Problems)
	}
}

// checkUntouched asserts the unit left no trace.
func (f *fixture) checkUntouched(t *testing.T) {
	t.Helper()
	if n := len(f.records(t)); n != 2 {
		t.Errorf("history has %d records, want the 2 from before", n)
	}
	m := f.manifest(t)
	if m.Status != lifecycle.Running || m.Metrics.AgentCalls != 0 {
		t.Errorf("manifest %s, %d calls; want it untouched", m.Status, m.Metrics.AgentCalls)
	}
}

func TestCommitWritesRecordsWithTheManifest(t *testing.T) {
	f := newFixture(t)
	tx := f.begin(t)
	f.unit(t, tx)
	// Until Commit, nothing of the unit is on disk.
	if n := len(f.records(t)); n != 2 {
		t.Errorf("%d records before Commit, want 2", n)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	f.checkDone(t)
}

// A crash at every point of a commit: the next Begin finishes the unit,
// or (before anything of it was stored) it never happened.
func TestCommitInterruptedAnywhereIsFinishedOnce(t *testing.T) {
	for stage := 0; stage <= 5; stage++ {
		// 0: before the pending file; 1: pending written; 2..4: 1..3 of
		// the records written; 5: manifest saved, pending not removed.
		t.Run(strings.Repeat("I", stage+1), func(t *testing.T) {
			f := newFixture(t)
			tx := f.begin(t)
			f.unit(t, tx)
			b, err := tx.M.Encode()
			if err != nil {
				t.Fatal(err)
			}
			q := tx.queue
			if stage >= 1 {
				if err := tx.writePending(q, b); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < min(stage-1, len(q)); i++ {
				if err := tx.write(&q[i].stored, nil); err != nil {
					t.Fatal(err)
				}
			}
			if stage == 5 {
				if err := tx.saveManifest(b); err != nil {
					t.Fatal(err)
				}
			}
			tx.queue = nil
			tx.Close() // the crash

			tx = f.begin(t)
			tx.Close()
			if stage == 0 {
				f.checkUntouched(t)
				return
			}
			f.checkDone(t)
			if !strings.Contains(f.log.String(), `"error_code":"COMMIT_FINISHED"`) {
				t.Errorf("recovery not logged:\n%s", f.log.String())
			}
			// And again: nothing more happens.
			tx = f.begin(t)
			tx.Close()
			f.checkDone(t)
		})
	}
}

// A record of the unit torn by the crash is cut and written again whole.
func TestCommitInterruptedInsideARecord(t *testing.T) {
	f := newFixture(t)
	tx := f.begin(t)
	f.unit(t, tx)
	b, _ := tx.M.Encode()
	q := tx.queue
	if err := tx.writePending(q, b); err != nil {
		t.Fatal(err)
	}
	if err := tx.write(&q[0].stored, nil); err != nil {
		t.Fatal(err)
	}
	tx.queue = nil
	tx.Close()
	hf := filepath.Join(f.dir, history.FileName)
	data, _ := os.ReadFile(hf)
	whole := len(data)
	fh, err := os.OpenFile(hf, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.Write([]byte(`{"hash":"0123","rec":{"v":2,"seq":3,"ty`))
	fh.Close()

	tx = f.begin(t)
	tx.Close()
	f.checkDone(t)
	if !strings.Contains(f.log.String(), `"error_code":"HISTORY_TORN_TAIL"`) || !strings.Contains(f.log.String(), `"offset":`+strconv.Itoa(whole)) {
		t.Errorf("torn tail not logged at %d:\n%s", whole, f.log.String())
	}
}

// A pending file that does not continue the history as it is (another
// writer moved on) is discarded, never applied over newer state.
func TestStalePendingCommitIsDiscarded(t *testing.T) {
	f := newFixture(t)
	tx := f.begin(t)
	f.unit(t, tx)
	b, _ := tx.M.Encode()
	if err := tx.writePending(tx.queue, b); err != nil {
		t.Fatal(err)
	}
	tx.queue = nil
	tx.Close()
	stale, err := os.ReadFile(filepath.Join(f.dir, PendingFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(f.dir, PendingFile)); err != nil {
		t.Fatal(err)
	}
	// Something else appends meanwhile.
	tx = f.begin(t)
	if err := tx.RecordError("TEST", "SYSTEM", 0, "unrelated"); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	if err := os.WriteFile(filepath.Join(f.dir, PendingFile), stale, 0o600); err != nil {
		t.Fatal(err)
	}
	tx = f.begin(t)
	tx.Close()
	if n := len(f.records(t)); n != 3 {
		t.Errorf("%d records, want 3 (the stale unit not applied)", n)
	}
	if m := f.manifest(t); m.Status != lifecycle.Running {
		t.Errorf("stale unit applied: %s", m.Status)
	}
	if u := f.pendingUnit(t); u != nil {
		t.Errorf("stale pending commit left: %+v", u)
	}
	if !strings.Contains(f.log.String(), `"error_code":"COMMIT_STALE"`) {
		t.Error("stale commit not logged")
	}
}

// Records appended while the manifest is unchanged are durable at once
// (an intent before the call; a steward's record before its effect).
func TestAppendBeforeAnyChangeIsImmediate(t *testing.T) {
	f := newFixture(t)
	tx := f.begin(t)
	defer tx.Close()
	if err := tx.RecordError("TEST", "SYSTEM", 0, "before any change"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.records(t)); n != 3 {
		t.Errorf("%d records, want 3: the record is not on disk", n)
	}
}

// A change that is never committed leaves no record behind.
func TestUncommittedChangeLeavesNoRecords(t *testing.T) {
	f := newFixture(t)
	tx := f.begin(t)
	f.unit(t, tx)
	tx.Close()
	f.checkUntouched(t)
	if !strings.Contains(f.log.String(), "uncommitted history records dropped") {
		t.Error("dropped records not logged")
	}
}

// An intent cannot wait for a commit: the agent is called after it.
func TestIntentAfterUncommittedRecordsIsRefused(t *testing.T) {
	f := newFixture(t)
	tx := f.begin(t)
	defer tx.Close()
	f.unit(t, tx)
	n := 1
	err := tx.Append(&history.Record{Type: history.TypeIntent, Interaction: &n, Phase: "review", Role: "supervisor",
		Request: &history.Request{Prompt: "p", FilesContext: []string{}, Metadata: map[string]any{}}})
	if err == nil {
		t.Fatal("intent queued behind an uncommitted change")
	}
}

// A commit whose first record cannot be written did not happen: no
// pending unit is left to be applied later.
func TestCommitFailingAtFirstRecordLeavesNothing(t *testing.T) {
	f := newFixture(t)
	tx := f.begin(t)
	f.unit(t, tx)
	tx.Log.Close() // every write fails
	if err := tx.Commit(); err == nil {
		t.Fatal("Commit succeeded with a closed history")
	}
	tx.Close()
	if u := f.pendingUnit(t); u != nil {
		t.Errorf("pending commit left: %+v", u)
	}
	tx = f.begin(t)
	tx.Close()
	f.checkUntouched(t)
}

// Commit removes the pending file without waiting for the removal to be
// durable: a crash may bring it back after the job moved on. A manifest
// that is neither the unit's base nor its result is newer than the unit
// (here: a later commit with no records, a steward's edit): kept as is.
func TestResurrectedPendingAfterALaterChangeIsDiscarded(t *testing.T) {
	f := newFixture(t)
	tx := f.begin(t)
	f.unit(t, tx)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	tx = f.begin(t)
	tx.M.Run.Guidance = "later change, no records"
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	// A pending file from the committed unit: base = the manifest before it.
	recs := f.records(t)
	before, _ := os.ReadFile(filepath.Join(f.dir, jobstore.ManifestFile))
	p := pending{BaseSeq: recs[2].Seq, BasePrev: recs[2].PrevHash, Manifest: []byte("{}"), BaseManifest: strings.Repeat("0", 64)}
	for _, r := range recs[2:] {
		p.Records = append(p.Records, r)
	}
	b, _ := json.Marshal(p)
	if err := os.WriteFile(filepath.Join(f.dir, PendingFile), encodePending(b), 0o600); err != nil {
		t.Fatal(err)
	}
	tx = f.begin(t)
	tx.Close()
	after, _ := os.ReadFile(filepath.Join(f.dir, jobstore.ManifestFile))
	if !bytes.Equal(before, after) {
		t.Errorf("manifest replaced by a resurrected pending commit:\n%s", after)
	}
	if m := f.manifest(t); m.Run.Guidance != "later change, no records" {
		t.Errorf("later change lost: %+v", m.Run)
	}
	if n := len(f.records(t)); n != 5 {
		t.Errorf("%d records, want 5", n)
	}
	if u := f.pendingUnit(t); u != nil {
		t.Errorf("pending commit left: %+v", u)
	}
	if !strings.Contains(f.log.String(), `"error_code":"COMMIT_STALE"`) {
		t.Error("stale commit not logged")
	}
}

// The records of a unit are one write and one fsync.
func TestCommitIsOneHistoryFsync(t *testing.T) {
	f := newFixture(t)
	n := 0
	f.env.History.Observe = func(int, time.Duration) { n++ }
	tx := f.begin(t)
	f.unit(t, tx)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	if n != 1 {
		t.Errorf("%d history fsyncs for a unit of 3 records, want 1", n)
	}
	f.checkDone(t)
}

// The pending file is rewritten in place: one file per job, cleared (not
// removed) after each unit, so a commit creates, renames and removes no
// file of its own.
func TestPendingFileIsReusedInPlace(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(f.dir, PendingFile)
	fi0, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the start's unit left no pending file: %v", err)
	}
	tx := f.begin(t)
	f.unit(t, tx)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	fi1, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(fi0, fi1) {
		t.Error("pending file replaced, not rewritten in place")
	}
	if u := f.pendingUnit(t); u != nil {
		t.Errorf("pending file holds a unit after the commit: %+v", u)
	}
	f.checkDone(t)
}

// A pending file torn at any byte (cut short, the rest zeros, or the rest
// an older unit's bytes) is recognised and discarded: it was being written
// when the crash came, so nothing of its unit reached the history.
func TestTornPendingFileIsDiscardedAtEveryOffset(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(f.dir, PendingFile)
	tx := f.begin(t)
	f.unit(t, tx)
	b, _ := tx.M.Encode()
	if err := tx.writePending(tx.queue, b); err != nil {
		t.Fatal(err)
	}
	tx.queue = nil
	tx.Close()
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// An older, longer unit this one overwrites (stale: other base).
	old, _ := json.Marshal(pending{BaseSeq: 1, BasePrev: "0000", Manifest: bytes.Repeat([]byte("x"), len(whole))})
	old = encodePending(old)
	if _, ok := decodePending(whole); !ok {
		t.Fatal("whole pending file not recognised")
	}
	for k := 0; k < len(whole); k++ {
		for _, v := range []struct {
			name string
			data []byte
		}{
			{"short", whole[:k]},
			{"zeros", append(append([]byte{}, whole[:k]...), make([]byte, len(whole)-k)...)},
			{"old", append(append([]byte{}, whole[:k]...), old[k:]...)},
		} {
			if err := os.WriteFile(path, v.data, 0o600); err != nil {
				t.Fatal(err)
			}
			tx = f.begin(t)
			next := tx.Log.State().NextSeq
			status := tx.M.Status
			tx.Close()
			if next != 2 || status != lifecycle.Running {
				t.Fatalf("torn at %d (%s): unit applied: next seq %d, status %s", k, v.name, next, status)
			}
			if u := f.pendingUnit(t); u != nil {
				t.Fatalf("torn at %d (%s): pending file left: %+v", k, v.name, u)
			}
		}
	}
	if !strings.Contains(f.log.String(), `"error_code":"COMMIT_TORN"`) {
		t.Error("torn pending commit not logged")
	}
	f.checkUntouched(t)
	// The whole file followed by an older unit's tail is the unit.
	if err := os.WriteFile(path, append(append([]byte{}, whole...), old[len(whole):]...), 0o600); err != nil {
		t.Fatal(err)
	}
	tx = f.begin(t)
	tx.Close()
	f.checkDone(t)
}

// A pending file from before the header (plain JSON, always replaced
// atomically) is still finished after an upgrade.
func TestPendingFileWithoutHeaderIsFinished(t *testing.T) {
	f := newFixture(t)
	tx := f.begin(t)
	f.unit(t, tx)
	b, _ := tx.M.Encode()
	if err := tx.writePending(tx.queue, b); err != nil {
		t.Fatal(err)
	}
	tx.queue = nil
	tx.Close()
	path := filepath.Join(f.dir, PendingFile)
	data, _ := os.ReadFile(path)
	body, ok := decodePending(data)
	if !ok {
		t.Fatal("pending file not recognised")
	}
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	tx = f.begin(t)
	tx.Close()
	f.checkDone(t)
}

// A whole pending file (checksum right) whose unit does not parse is
// damage, not a crash: reported, never silently dropped.
func TestCorruptWholePendingFileIsAnError(t *testing.T) {
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.dir, PendingFile), encodePending([]byte("not json")), 0o600); err != nil {
		t.Fatal(err)
	}
	if tx, err := Begin(f.env, "j", nil); err == nil {
		tx.Close()
		t.Fatal("Begin accepted a corrupt pending commit")
	}
}

// The pending file is never written through a link planted in the job
// folder.
func TestPendingFileIsNotWrittenThroughALink(t *testing.T) {
	f := newFixture(t)
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.dir, PendingFile)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if tx, err := Begin(f.env, "j", nil); err == nil {
		f.unit(t, tx)
		if err := tx.Commit(); err == nil {
			t.Error("commit wrote its pending unit through a symlink")
		}
		tx.Close()
	}
	if b, _ := os.ReadFile(target); len(b) != 0 {
		t.Errorf("link target written: %d bytes", len(b))
	}
}

// A commit that fails with part of its unit in the history leaves the unit
// to the next Begin, and the transaction writes nothing more: another unit
// would overwrite the pending one in place, another record would follow a
// unit the history holds only in part.
func TestTransactionStopsAfterAnUnfinishedCommit(t *testing.T) {
	f := newFixture(t)
	f.env.History.Write = func(fl *os.File, line []byte) (int, error) {
		fl.Write(line) // stored, but reported as failed: the log is not intact
		return 0, errors.New("injected write failure")
	}
	tx := f.begin(t)
	f.unit(t, tx)
	if err := tx.Commit(); err == nil {
		t.Fatal("Commit succeeded with a failing history")
	}
	f.env.History.Write = nil
	tx.M.Run.Guidance = "another change"
	if err := tx.Commit(); err == nil {
		t.Error("a second commit was allowed after an unfinished one")
	}
	// Queued behind the change or refused: either way never stored
	// (checkDone below sees the exact history).
	_ = tx.RecordError("TEST", "SYSTEM", 0, "more")
	tx.Close()
	if u := f.pendingUnit(t); u == nil || u.Records != 3 {
		t.Fatalf("pending unit %+v, want the 3-record unit kept for recovery", u)
	}
	tx = f.begin(t)
	tx.Close()
	f.checkDone(t)
}
