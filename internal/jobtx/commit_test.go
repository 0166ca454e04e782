package jobtx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/atomicfile"
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
func (s *syncBuf) Reset()                      { s.mu.Lock(); defer s.mu.Unlock(); s.b.Reset() }

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
	t.Parallel()
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

// A crash at every point of a commit: the history holds none of the unit,
// part of it (cut at the next open: it never happened), or all of it, and
// the manifest file is at the unit's base, torn, or replaced. The next
// Begin leaves the job exactly as before the unit or exactly as after it.
func TestCommitInterruptedAnywhereIsFinishedOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hf := history.Path(f.dir)
	mf := filepath.Join(f.dir, jobstore.ManifestFile)
	histBefore, _ := os.ReadFile(hf)
	// The history's signed head is written only after the unit is
	// durable: a crash inside the unit leaves the head from before it.
	headFile := filepath.Join(f.dir, history.HeadFile)
	headBefore, _ := os.ReadFile(headFile)
	base, _ := os.ReadFile(mf)
	tx := f.begin(t)
	f.unit(t, tx)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	histAfter, _ := os.ReadFile(hf)
	headAfter, _ := os.ReadFile(headFile)
	done, _ := os.ReadFile(mf)
	if !bytes.HasPrefix(histAfter, histBefore) || len(histAfter) == len(histBefore) {
		t.Fatal("the unit is not an append")
	}
	// Cut points: every line boundary of the unit and a few bytes into
	// each line.
	cuts := []int{len(histBefore)}
	for i := len(histBefore); i < len(histAfter); i++ {
		if histAfter[i-1] == '\n' || (i-len(histBefore))%97 == 5 {
			cuts = append(cuts, i)
		}
	}
	cuts = append(cuts, len(histAfter))
	// A mix of the two saves that is still JSON (the daemon saves in
	// place): only run state differs from the committed manifest.
	mixed := bytes.Replace(done, []byte(`"agent_calls": 1`), []byte(`"agent_calls": 0`), 1)
	if bytes.Equal(mixed, done) {
		t.Fatal("no agent_calls in the manifest to mix")
	}
	files := map[string][]byte{"base": base, "torn": done[:len(done)/2], "empty": {}, "mixed": mixed, "replaced": done}
	for _, cut := range cuts {
		for name, file := range files {
			whole := cut == len(histAfter)
			if !whole && name != "base" {
				continue // the file is replaced only after the unit is whole
			}
			t.Run(fmt.Sprintf("history %d of %d bytes, manifest %s", cut-len(histBefore), len(histAfter)-len(histBefore), name), func(t *testing.T) {
				f.log.Reset()
				if err := os.WriteFile(hf, histAfter[:cut], 0o600); err != nil {
					t.Fatal(err)
				}
				head := headBefore
				if whole {
					head = headAfter
				}
				if err := os.WriteFile(headFile, head, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(mf, file, 0o600); err != nil {
					t.Fatal(err)
				}
				tx := f.begin(t)
				tx.Close()
				if !whole {
					f.checkUntouched(t)
					if cut > len(histBefore) && !strings.Contains(f.log.String(), `"error_code":"HISTORY_TORN_TAIL"`) {
						t.Errorf("cut unit not logged:\n%s", f.log.String())
					}
					return
				}
				f.checkDone(t)
				if got, _ := os.ReadFile(mf); !bytes.Equal(got, done) {
					t.Errorf("manifest restored as\n%s\nwant\n%s", got, done)
				}
				if restored := strings.Contains(f.log.String(), `"error_code":"COMMIT_FINISHED"`); restored != (name != "replaced") {
					t.Errorf("restore logged %v for a manifest file %s:\n%s", restored, name, f.log.String())
				}
				// And again: nothing more happens.
				f.log.Reset()
				tx = f.begin(t)
				tx.Close()
				f.checkDone(t)
				if strings.Contains(f.log.String(), "COMMIT_FINISHED") {
					t.Error("restored twice")
				}
			})
		}
	}
}

// A manifest that is neither the last unit's base nor its result was
// changed by someone else since (a steward's hand edit): kept as is.
func TestManifestEditedAfterACommitIsKept(t *testing.T) {
	t.Parallel()
	f, mf, b := committedOnce(t)
	edited := bytes.Replace(b, []byte(`"task_description": "t"`), []byte(`"task_description": "edited by hand"`), 1)
	if bytes.Equal(edited, b) {
		t.Fatal("edit did not apply")
	}
	if err := os.WriteFile(mf, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	tx := f.begin(t)
	tx.Close()
	if got, _ := os.ReadFile(mf); !bytes.Equal(got, edited) {
		t.Errorf("hand edit replaced:\n%s", got)
	}
	if strings.Contains(f.log.String(), "COMMIT_FINISHED") {
		t.Error("a hand edit was taken for a lost commit")
	}
}

// The history keeps the manifest sealed for a job with encrypted history,
// and a lost file is restored from the sealed copy.
func TestEncryptedHistorySealsTheCommittedManifest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	mf := filepath.Join(f.dir, jobstore.ManifestFile)
	tx := f.begin(t)
	tx.M.EncryptHistory = true
	tx.M.TaskDescription = "the secret plan of the quarter"
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	base, _ := os.ReadFile(mf)
	tx.Close()
	tx = f.begin(t)
	f.unit(t, tx)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	done, _ := os.ReadFile(mf)
	hist, _ := os.ReadFile(history.Path(f.dir))
	last := hist[bytes.LastIndexByte(hist[:len(hist)-1], '\n')+1:]
	if bytes.Contains(last, []byte("secret plan")) || !bytes.Contains(last, []byte(`"manifest":"`)) {
		t.Errorf("committed manifest not sealed:\n%s", last)
	}
	if err := os.WriteFile(mf, base, 0o600); err != nil {
		t.Fatal(err)
	}
	tx = f.begin(t)
	tx.Close()
	if got, _ := os.ReadFile(mf); !bytes.Equal(got, done) {
		t.Errorf("sealed manifest restored as\n%s\nwant\n%s", got, done)
	}
}

// A commit is one history fsync, with the manifest in it: the manifest file
// is not fsync'd while the daemon would come back to the job after a crash
// (active status), and is (with its folder) when nothing would.
func TestCommitIsOneHistoryFsync(t *testing.T) {
	f := newFixture(t)
	n := 0
	f.env.History.Observe = func(int, time.Duration) { n++ }
	files, dirs := atomicfile.FileSyncs.Load(), atomicfile.DirSyncs.Load()
	tx := f.begin(t)
	f.unit(t, tx)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	if n != 1 {
		t.Errorf("%d history fsyncs for a unit of 3 records, want 1", n)
	}
	if df, dd := atomicfile.FileSyncs.Load()-files, atomicfile.DirSyncs.Load()-dirs; df != 0 || dd != 0 {
		t.Errorf("manifest of a RUNNING job: %d file and %d folder fsyncs, want none", df, dd)
	}
	f.checkDone(t)

	// From a waiting status nothing comes back to the job by itself.
	tx = f.begin(t)
	if err := tx.Transition(lifecycle.EvAgentFailed, lifecycle.InterventionRequired, "", "SYSTEM", "stuck"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	files, dirs = atomicfile.FileSyncs.Load(), atomicfile.DirSyncs.Load()
	tx = f.begin(t)
	if err := tx.Transition(lifecycle.EvResume, lifecycle.Pending, "", "STEWARD", "go on"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	if df, dd := atomicfile.FileSyncs.Load()-files, atomicfile.DirSyncs.Load()-dirs; df != 1 || dd != 1 {
		t.Errorf("manifest leaving INTERVENTION_REQUIRED: %d file and %d folder fsyncs, want 1 and 1", df, dd)
	}
}

// A change with no record of its own is a commit record.
func TestManifestOnlyChangeIsCommitted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tx := f.begin(t)
	tx.M.Run.Guidance = "later change, no records"
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	recs := f.records(t)
	last := recs[len(recs)-1]
	if last.Type != history.TypeCommit || last.Commit == nil {
		t.Fatalf("last record %+v, want a commit record", last)
	}
	tx = f.begin(t)
	defer tx.Close()
	m, err := tx.committedManifest(last.Commit)
	if err != nil || !bytes.Contains(m, []byte("later change, no records")) {
		t.Errorf("committed manifest %s (%v), want the change", m, err)
	}
	if len(m) <= plainMax && !bytes.Equal(last.Commit.Manifest, m) {
		t.Errorf("committed manifest of %d bytes stored as %.40s…, want its JSON object", len(m), last.Commit.Manifest)
	}
}

// A commit stores a manifest of at most plainMax bytes as its JSON object
// and a larger one packed, and a lost file is restored from either.
func TestCommittedManifestPlainUpToPlainMax(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	mf := filepath.Join(f.dir, jobstore.ManifestFile)
	for _, size := range []string{"small", "large"} {
		base, _ := os.ReadFile(mf)
		tx := f.begin(t)
		f.unit(t, tx)
		if size == "large" {
			// Text that deflate shrinks, as audit entries do.
			tx.M.Run.Guidance = strings.Repeat("check the tests again. ", plainMax/20)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		compact := tx.saved
		tx.Close()
		done, _ := os.ReadFile(mf)
		recs := f.records(t)
		stored := recs[len(recs)-1].Commit.Manifest
		switch {
		case size == "small" && (len(compact) > plainMax || !bytes.Equal(stored, compact)):
			t.Errorf("%s manifest (%d bytes) stored as %.40s…, want its JSON object", size, len(compact), stored)
		case size == "large" && (len(compact) <= plainMax || !bytes.HasPrefix(stored, []byte(`"`+packedPrefix)) || len(stored) >= len(compact)):
			t.Errorf("%s manifest (%d bytes) stored as %.40s… (%d bytes), want it packed", size, len(compact), stored, len(stored))
		}
		if got, err := f.env.CommittedManifest("j", recs[len(recs)-1].Commit); err != nil || !bytes.Equal(got, compact) {
			t.Errorf("%s manifest read back as %.60s… (%v), want what was committed", size, got, err)
		}
		// A crash lost the file's replacement: restored from the history.
		if err := os.WriteFile(mf, base, 0o600); err != nil {
			t.Fatal(err)
		}
		tx = f.begin(t)
		if got, _ := os.ReadFile(mf); !bytes.Equal(got, done) {
			t.Errorf("%s manifest restored as\n%s\nwant\n%s", size, got, done)
		}
		// Back to the worker's phase for the next unit.
		if err := tx.Transition(lifecycle.EvAdvance, lifecycle.Running, "work", "supervisor", ""); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		tx.Close()
	}
}

// Records appended while the manifest is unchanged are durable at once
// (an intent before the call; a steward's record before its effect).
func TestAppendBeforeAnyChangeIsImmediate(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// A commit whose first record cannot be written did not happen.
func TestCommitFailingAtFirstRecordLeavesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tx := f.begin(t)
	f.unit(t, tx)
	tx.Log.Close() // every write fails
	if err := tx.Commit(); err == nil {
		t.Fatal("Commit succeeded with a closed history")
	}
	tx.Close()
	tx = f.begin(t)
	tx.Close()
	f.checkUntouched(t)
}

// A commit whose write failed after storing its unit leaves it to the next
// Begin, and the transaction writes nothing more: another record would
// follow a unit the log does not know it holds.
func TestTransactionStopsAfterAnUnfinishedCommit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.env.History.Write = func(fl *os.File, line []byte) (int, error) {
		_, _ = fl.Write(line) // stored, but reported as failed: the log is not intact
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
	tx = f.begin(t)
	tx.Close()
	f.checkDone(t)
}

// A Run's transactions reuse the manifest they saved, and see every change
// made by anyone else in between: another transaction, or a new file put
// in its place by hand.
func TestKeptManifestSeesChangesFromOutside(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var keep Kept
	defer keep.Close()
	tx, err := Begin(f.env, "j", &keep)
	if err != nil {
		t.Fatal(err)
	}
	tx.M.Run.Guidance = "mine"
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()

	other := f.begin(t) // a steward, no keep
	other.M.Run.Guidance = "steward's"
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	other.Close()
	tx, err = Begin(f.env, "j", &keep)
	if err != nil {
		t.Fatal(err)
	}
	if tx.M.Run.Guidance != "steward's" {
		t.Errorf("kept manifest hid another transaction's change: %q", tx.M.Run.Guidance)
	}
	tx.Close()

	mf := filepath.Join(f.dir, jobstore.ManifestFile)
	b, _ := os.ReadFile(mf)
	edited := bytes.Replace(b, []byte(`"task_description": "t"`), []byte(`"task_description": "by hand!"`), 1)
	tmp := mf + ".new"
	if err := os.WriteFile(tmp, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, mf); err != nil {
		t.Fatal(err)
	}
	tx, err = Begin(f.env, "j", &keep)
	if err != nil {
		t.Fatal(err)
	}
	if tx.M.TaskDescription != "by hand!" {
		t.Errorf("kept manifest hid a hand edit: %q", tx.M.TaskDescription)
	}
	tx.Close()
}

// A Begin that starts from the manifest the previous transaction left gets
// the same manifest a fresh decode of the file gives, and never one a
// transaction changed without committing.
func TestKeptManifestIsTheFilesAndPristine(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var keep Kept
	defer keep.Close()
	fresh := func() []byte {
		t.Helper()
		other := f.begin(t)
		defer other.Close()
		b, err := json.Marshal(other.M)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i := range 3 {
		want := fresh() // before Begin: the job's lock is not shared
		tx, err := Begin(f.env, "j", &keep)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(tx.M); !bytes.Equal(got, want) {
			t.Fatalf("step %d: kept manifest\n%s\nfile decodes to\n%s", i, got, want)
		}
		// Committed: the next Begin must see it.
		tx.M.Run.Guidance = fmt.Sprintf("step %d", i)
		tx.M.History = append(tx.M.History, manifest.AuditEntry{Role: "Steward", Action: "NOTE", Note: tx.M.Run.Guidance})
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		// Changed after the commit and dropped: the next Begin must not.
		tx.M.Run.Guidance = "never committed"
		tx.M.History[0].Note = "never committed"
		tx.M.Agents["worker"].Script[0].Summary = "never committed"
		tx.Close()
	}
	// Changed and never committed at all.
	tx, err := Begin(f.env, "j", &keep)
	if err != nil {
		t.Fatal(err)
	}
	tx.M.Run.Guidance = "never committed"
	tx.M.Agents["worker"].Script[0].Summary = "never committed"
	tx.Close()
	tx, err = Begin(f.env, "j", &keep)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if g := tx.M.Run.Guidance; g != "step 2" || len(tx.M.History) != 3 || tx.M.History[0].Note != "step 0" ||
		tx.M.Agents["worker"].Script[0].Summary != "done" {
		t.Errorf("kept manifest: guidance %q, history %+v, worker script %+v", g, tx.M.History, tx.M.Agents["worker"].Script)
	}
	if tx.manifestChanged() {
		t.Error("a manifest just begun counts as changed")
	}
}

// An edit of a running job's manifest by no steward command never changes
// what governs it (issue 19 item 3: an agent raised its own budget from
// its call): the committed budget is put back and the restore logged;
// the rest of the edit is kept, as for a stopped job.
func TestRunningJobsBudgetEditedByHandIsPutBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	mf := filepath.Join(f.dir, jobstore.ManifestFile)
	b, _ := os.ReadFile(mf)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	before := m["cost_threshold"]
	m["cost_threshold"] = 1000000.0
	m["sandbox"] = "none"
	m["task_description"] = "edited by hand"
	edited, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(mf, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	tx := f.begin(t)
	got := tx.M
	tx.Close()
	if got.Status != lifecycle.Running {
		t.Fatalf("fixture job is %s, want RUNNING", got.Status)
	}
	if (before == nil) != (got.CostThreshold == nil) || (got.CostThreshold != nil && *got.CostThreshold == 1000000) {
		t.Errorf("cost_threshold %v after the edit, want the committed %v", got.CostThreshold, before)
	}
	if got.Sandbox != "" {
		t.Errorf("sandbox %q after the edit, want the committed one (none)", got.Sandbox)
	}
	if got.TaskDescription != "edited by hand" {
		t.Errorf("task_description %q: the rest of the edit must be kept", got.TaskDescription)
	}
	if !strings.Contains(f.log.String(), "MANIFEST_EDITED") || !strings.Contains(f.log.String(), "cost_threshold, sandbox") {
		t.Errorf("log does not report the restore: %s", f.log.String())
	}
	file, _ := os.ReadFile(mf)
	if bytes.Contains(file, []byte("1000000")) {
		t.Error("the file still holds the raised budget")
	}
}

// A change that would make the manifest larger than Logist reads back
// (hostile input H101's backstop) is not committed: no record of it is
// stored and the manifest file is untouched; MANIFEST_TOO_LARGE is logged.
func TestCommitRefusesManifestLogistCouldNotRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tx := f.begin(t)
	f.unit(t, tx)
	tx.M.Run.Feedback = strings.Repeat("x", manifest.MaxSize)
	err := tx.Commit()
	tx.Close()
	if !errors.Is(err, manifest.ErrTooLarge) {
		t.Fatalf("Commit: %v, want ErrTooLarge", err)
	}
	if !strings.Contains(f.log.String(), `"error_code":"MANIFEST_TOO_LARGE"`) {
		t.Errorf("not logged:\n%s", f.log.String())
	}
	f.checkUntouched(t)
}

// A job with encrypted history keeps the agents' text sealed in job.json
// too (issue 18 item 7: the last summary, feedback, reason, audit notes
// were plaintext there); a transaction works on it opened.
func TestEncryptedHistorySealsTheManifestsAgentText(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	mf := filepath.Join(f.dir, jobstore.ManifestFile)
	tx := f.begin(t)
	tx.M.EncryptHistory = true // as a manifest asks for it from the start
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	tx = f.begin(t)
	tx.M.Run.LastSummary, tx.M.Run.Feedback, tx.M.Run.Reason = "secret summary", "secret feedback", "secret reason"
	tx.M.Audit(time.Now(), "worker", "COMPLETED", "secret note", nil)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	if b, _ := os.ReadFile(mf); bytes.Contains(b, []byte("secret")) || !bytes.Contains(b, []byte(`"last_summary": "enc:v1:`)) {
		t.Errorf("job.json holds the agents' text in the clear:\n%s", b)
	}
	tx = f.begin(t)
	defer tx.Close()
	m := tx.M
	if m.Run.LastSummary != "secret summary" || m.Run.Feedback != "secret feedback" || m.Run.Reason != "secret reason" || m.History[len(m.History)-1].Note != "secret note" {
		t.Errorf("the transaction sees %+v, notes %+v", m.Run, m.History)
	}
}

// The manifest a Run keeps for its next Begin is a copy of the committed
// one: a change made after a commit does not reach it, and neither does a
// failed commit's, which the caller may change again at once (a copy made
// beside the unit's fsync and not waited for on failure is a race that
// -race reports; docs/performance.md "Per call: the timeline").
func TestKeptManifestIsTheCommittedCopy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var fail sync.Mutex // held: every history write fails, storing nothing
	f.env.History.Write = func(fl *os.File, line []byte) (int, error) {
		if !fail.TryLock() {
			return 0, errors.New("injected write failure")
		}
		defer fail.Unlock()
		return fl.Write(line)
	}
	var keep Kept
	defer keep.Close()
	begin := func() *Tx {
		t.Helper()
		tx, err := Begin(f.env, "j", &keep)
		if err != nil {
			t.Fatalf("Begin: %v", err)
		}
		return tx
	}
	tx := begin()
	tx.M.Run.Guidance = "committed"
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	tx.M.Run.Guidance = "changed after the commit"
	tx.Close()

	tx = begin()
	if got := tx.M.Run.Guidance; got != "committed" {
		t.Fatalf("next Begin saw guidance %q, want the committed one", got)
	}
	fail.Lock()
	tx.M.Run.Guidance = "in a failed commit"
	if err := tx.Commit(); err == nil {
		t.Fatal("Commit succeeded with a failing history")
	}
	tx.M.Run.Guidance = "changed after the failure"
	tx.Close()
	fail.Unlock()

	tx = begin()
	defer tx.Close()
	if got := tx.M.Run.Guidance; got != "committed" {
		t.Fatalf("Begin after a failed commit saw guidance %q, want the committed one", got)
	}
}

// A commit this process encoded is read from what it encoded (Plain), not
// unsealed and inflated again; one read from the history is decoded.
func TestCommittedFileOfOwnCommitUsesItsPlainForm(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	own := &history.Commit{Manifest: json.RawMessage(`"deflate:not base64!"`), Plain: []byte(`{"job_id":"j","status":"RUNNING"}`)}
	got, err := f.env.CommittedFile("j", own)
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"job_id\": \"j\",\n  \"status\": \"RUNNING\"\n}\n"; string(got) != want {
		t.Errorf("file %q, want %q", got, want)
	}
	read := &history.Commit{Manifest: own.Manifest} // as parsed from a history: no Plain
	if _, err := f.env.CommittedFile("j", read); err == nil {
		t.Error("a damaged stored manifest read from the history gave no error")
	}
}

// An edit of a running job's manifest by no steward command never changes
// Logist's record of the run either: an uncontained agent that zeroed the
// metrics (and touched the description, so that the edit was kept as a
// hand edit) made call after call past its cost budget; one that set
// status SUCCESS ended its job with no supervisor asked. The committed
// status, phase, run state and metrics are put back; the rest is kept.
func TestRunningJobsRecordEditedByHandIsPutBack(t *testing.T) {
	t.Parallel()
	f, mf, b := committedOnce(t)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["status"], m["current_phase"] = "SUCCESS", "work"
	m["metrics"] = map[string]any{"cumulative_cost": 0, "cumulative_time_seconds": 0, "agent_calls": 0}
	m["run"] = map[string]any{"guidance": "approve everything"}
	m["description"] = "edited by hand"
	edited, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(mf, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	tx := f.begin(t)
	got := tx.M
	tx.Close()
	if got.Status != lifecycle.Reviewing || got.Phase() != "review" {
		t.Errorf("status %s phase %q after the edit, want the committed REVIEWING, review", got.Status, got.Phase())
	}
	if got.Metrics.CumulativeCost != 3 || got.Metrics.AgentCalls != 1 {
		t.Errorf("metrics %+v after the edit, want the committed cost 3 and 1 call", got.Metrics)
	}
	if got.Run.Guidance != "" {
		t.Errorf("guidance %q: the run state is Logist's", got.Run.Guidance)
	}
	if got.Description != "edited by hand" {
		t.Errorf("description %q: the rest of the edit must be kept", got.Description)
	}
	if !strings.Contains(f.log.String(), "MANIFEST_EDITED") || !strings.Contains(f.log.String(), "status, current_phase, run, metrics") {
		t.Errorf("log does not report the restore: %s", f.log.String())
	}
}

// H155: a transition whose commit the storage (or the manifest's size)
// refuses is not logged, nor counted in the status metrics: it never
// happened. It used to be logged as it was staged ("transition RUNNING →
// REVIEWING" in the daemon's log each time a full disk made the job's
// commit fail, the job still RUNNING); once the commit succeeds it is.
func TestTransitionLoggedOnlyOnceCommitted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tx := f.begin(t)
	f.unit(t, tx)
	if strings.Contains(f.log.String(), `"event":"phase_advance"`) {
		t.Errorf("a transition was logged before its commit:\n%s", f.log.String())
	}
	tx.M.Run.Feedback = strings.Repeat("x", manifest.MaxSize)
	if err := tx.Commit(); !errors.Is(err, manifest.ErrTooLarge) {
		t.Fatalf("Commit: %v, want ErrTooLarge", err)
	}
	tx.Close()
	if strings.Contains(f.log.String(), `"event":"phase_advance"`) {
		t.Errorf("a transition whose commit failed was logged:\n%s", f.log.String())
	}
	tx = f.begin(t)
	f.unit(t, tx)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	if n := strings.Count(f.log.String(), `"event":"phase_advance"`); n != 1 {
		t.Errorf("%d transition lines once committed, want 1:\n%s", n, f.log.String())
	}
}

// committedOnce is a fixture whose job committed one unit, with its
// manifest file and that file's bytes as the commit left them.
func committedOnce(t *testing.T) (f *fixture, mf string, b []byte) {
	t.Helper()
	f = newFixture(t)
	tx := f.begin(t)
	f.unit(t, tx)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	mf = filepath.Join(f.dir, jobstore.ManifestFile)
	b, err := os.ReadFile(mf)
	if err != nil {
		t.Fatal(err)
	}
	return f, mf, b
}
