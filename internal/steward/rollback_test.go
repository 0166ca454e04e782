package steward_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/snapshot"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
)

// writing is a scripted step that writes files into the workspace.
func writing(action, summary string, files map[string]string, evidence ...string) map[string]any {
	s := testkit.Step(action, summary)
	s["files"] = files
	if len(evidence) > 0 {
		s["evidence_files"] = evidence
	}
	return s
}

// logLines are the JSON log lines in b.
func logLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// Issue 17 item 4: after a rollback, the log, the history's records and the
// manifest name the checkpoint rolled back to, not the newest one the
// rollback undid; and so does everything the job records after it.
func TestRollbackMovesTheCurrentCheckpoint(t *testing.T) {
	f := newFixture(t)
	var logs bytes.Buffer
	f.Env.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	f.WriteJob("j", map[string]any{"agents": map[string]any{
		"worker":     testkit.Script(writing("COMPLETED", "wrote it", map[string]string{"a.txt": "A"}, "a.txt")),
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "fine")),
	}})
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success || m.Run.CheckpointID != "cp-0001-review" {
		t.Fatalf("first run: %s at %s", m.Status, m.Run.CheckpointID)
	}
	logs.Reset()
	m, _, err := f.St.Rollback("j", "cp-0000-work", steward.RollbackOptions{Reason: "again"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Run.CheckpointID != "cp-0000-work" {
		t.Errorf("manifest run.checkpoint_id = %q", m.Run.CheckpointID)
	}
	trs := testkit.OfType(f.Records("j"), history.TypeTransition)
	if tr := trs[len(trs)-1].Transition; tr.Event != string(lifecycle.EvRollback) || tr.CheckpointID != "cp-0000-work" {
		t.Errorf("rollback transition %+v names checkpoint %q, want cp-0000-work", tr, tr.CheckpointID)
	}
	var seen bool
	for _, l := range logLines(t, &logs) {
		if l["type"] == "transition" && l["event"] == string(lifecycle.EvRollback) {
			seen = true
			if l["checkpoint_id"] != "cp-0000-work" {
				t.Errorf("rollback logged with checkpoint_id %v", l["checkpoint_id"])
			}
		}
	}
	if !seen {
		t.Errorf("rollback transition not logged:\n%s", logs.String())
	}

	// A later transaction, a reopened history and the next run agree.
	tx, err := jobtx.Begin(f.Env, "j", nil)
	if err != nil {
		t.Fatal(err)
	}
	if id, snap := tx.CheckpointRef(); id != "cp-0000-work" || snap == nil || snap.Files != 1 {
		t.Errorf("tx.CheckpointRef() = %q, %+v", id, snap)
	}
	tx.Close()
	logs.Reset()
	f.Run("j")
	recs := f.Records("j")
	var start *history.Transition
	for _, r := range recs {
		if r.Type == history.TypeTransition && r.Transition.Event == string(lifecycle.EvStart) {
			start = r.Transition
		}
	}
	if start == nil || start.CheckpointID != "cp-0000-work" {
		t.Errorf("the restart after the rollback names checkpoint %+v, want cp-0000-work", start)
	}
	for _, l := range logLines(t, &logs) {
		if l["type"] == "transition" && l["event"] == string(lifecycle.EvStart) && l["checkpoint_id"] != "cp-0000-work" {
			t.Errorf("restart logged with checkpoint_id %v", l["checkpoint_id"])
		}
	}
	if m := f.Load("j"); m.Status != lifecycle.Success || m.Run.CheckpointID == "cp-0000-work" {
		t.Errorf("after the second run: %s at %s (a new final checkpoint is current)", m.Status, m.Run.CheckpointID)
	}
}

// providerFunc is a fake agent.
type providerFunc func(ctx context.Context, req *agent.Request) (*agent.Result, error)

func (p providerFunc) Call(ctx context.Context, req *agent.Request) (*agent.Result, error) {
	return p(ctx, req)
}

func answerOf(action, summary string, evidence ...string) *agent.Result {
	if evidence == nil {
		evidence = []string{}
	}
	b, _ := json.Marshal(map[string]any{"action": action, "evidence_files": evidence, "summary_for_supervisor": summary})
	return &agent.Result{Raw: b}
}

// workspaceState is every file of a workspace and its content.
func workspaceState(t *testing.T, ws string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(ws, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Issue 17 item 7: a recovery point's rollback_files are the files its
// phase changed, exactly those a rollback to the checkpoint before it
// restores or removes (not the answer's evidence, which the rollback hands
// the next agent as context). After a rollback, the next point counts its
// changes from the checkpoint rolled back to.
func TestRollbackFilesAreWhatARollbackRestores(t *testing.T) {
	f := newFixture(t)
	var mu sync.Mutex
	n := map[string]int{}
	f.Engine.NewProvider = func(manifest.AgentConfig) (agent.Provider, error) {
		return providerFunc(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			n[req.Role]++
			if req.Role == "supervisor" {
				return answerOf("COMPLETED", "fine"), nil
			}
			ws := req.Workspace
			switch n[req.Role] {
			case 1:
				// The engine's goroutine: an error fails the call, which the test sees.
				if err := os.WriteFile(filepath.Join(ws, "keep.txt"), []byte("kept"), 0o600); err != nil {
					return nil, err
				}
				if err := os.WriteFile(filepath.Join(ws, "old.txt"), []byte("old"), 0o600); err != nil {
					return nil, err
				}
				return answerOf("COMPLETED", "first", "keep.txt", "old.txt"), nil
			default:
				if err := os.WriteFile(filepath.Join(ws, "new.txt"), []byte("new"), 0o600); err != nil {
					return nil, err
				}
				_ = os.Remove(filepath.Join(ws, "old.txt")) // gone already from the third call on
				return answerOf("COMPLETED", "again", "new.txt"), nil
			}
		}), nil
	}
	f.WriteJob("j", map[string]any{})
	f.Run("j")
	points := testkit.OfType(f.Records("j"), history.TypeRecoveryPoint)
	if len(points) != 3 {
		t.Fatalf("%d recovery points", len(points))
	}
	first := points[1].RecoveryPoint // cp-0000-work: base cp-start
	if first.BaseCheckpoint != "cp-start" || fmt.Sprint(first.RollbackFiles) != "[keep.txt old.txt]" {
		t.Fatalf("first point: base %s, rollback_files %v", first.BaseCheckpoint, first.RollbackFiles)
	}
	// The job ended where cp-0000-work left the workspace (the review
	// changed nothing): rolling back to that point's base changes exactly
	// its rollback_files.
	ws := filepath.Join(f.Dir, "j", "workspace")
	before := workspaceState(t, ws)
	if _, _, err := f.St.Rollback("j", "cp-start", steward.RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	after := workspaceState(t, ws)
	var restored []string
	for p := range before {
		if before[p] != after[p] {
			restored = append(restored, p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			restored = append(restored, p)
		}
	}
	sort.Strings(restored)
	if fmt.Sprint(restored) != fmt.Sprint(first.RollbackFiles) {
		t.Errorf("the rollback changed %v; the point's rollback_files are %v", restored, first.RollbackFiles)
	}

	// Forward again, then back to cp-0000-work: its evidence (not its
	// rollback_files) is the next agent's context, and the next point
	// counts from cp-0000-work.
	f.Run("j")
	if _, _, err := f.St.Rollback("j", "cp-0000-work", steward.RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := f.Load("j"); fmt.Sprint(m.Run.Evidence) != "[keep.txt old.txt]" {
		t.Errorf("context after rollback %v, want cp-0000-work's evidence", m.Run.Evidence)
	}
	f.Run("j")
	points = testkit.OfType(f.Records("j"), history.TypeRecoveryPoint)
	// The review after the rollback: it changed nothing since cp-0000-work
	// (counted from the newest point, cp-0003-review, it would list the
	// files the rollback put back).
	last := points[len(points)-1].RecoveryPoint
	if last.BaseCheckpoint != "cp-0000-work" || len(last.RollbackFiles) != 0 {
		t.Errorf("after the rollback the next point %s counts from %q (rollback_files %v), want cp-0000-work and none",
			last.CheckpointID, last.BaseCheckpoint, last.RollbackFiles)
	}
}

// A rollback keeps what it discards that no recovery point holds: the
// work an answer that stopped the job left (here a STUCK worker's file),
// snapshotted before the files move, the record naming the files and the
// snapshot, whose objects hold their content. A rollback that discards
// nothing keeps no listing.
func TestRollbackKeepsTheWorkItDiscards(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", map[string]any{"agents": map[string]any{
		"worker": testkit.Script(
			writing("COMPLETED", "first", map[string]string{"a.txt": "A"}, "a.txt"),
			writing("STUCK", "half done", map[string]string{"important.txt": "PARTIAL", "a.txt": "A2"})),
		"supervisor": testkit.Script(testkit.Step("RETRY", "again"), testkit.Step("COMPLETED", "fine")),
	}})
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.InterventionRequired {
		t.Fatalf("run: %s %s", m.Status, m.Run.Reason)
	}
	if _, _, err := f.St.Rollback("j", "cp-start", steward.RollbackOptions{Reason: "start over"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.Dir, "j", "workspace", "important.txt")); !os.IsNotExist(err) {
		t.Fatalf("important.txt after the rollback: %v", err)
	}
	rb := testkit.OfType(f.Records("j"), history.TypeSteward)
	ch := rb[len(rb)-1].Steward.Changes
	files, _ := ch["discarded_files"].([]any)
	got := fmt.Sprint(files)
	if got != "[a.txt important.txt]" {
		t.Errorf("discarded_files %v, want a.txt and important.txt (changed since cp-0001-work)", ch["discarded_files"])
	}
	snap, _ := ch["discarded_snapshot"].(string)
	l, err := snapshot.Load(filepath.Join(f.Dir, "j"), snap)
	if err != nil {
		t.Fatalf("the discarded work's snapshot %q: %v", snap, err)
	}
	found := false
	for _, e := range l.Entries {
		if e.Path == "important.txt" {
			b, err := os.ReadFile(filepath.Join(snapshot.ObjectDir(filepath.Join(f.Dir, "j")), e.SHA256))
			found = err == nil && string(b) == "PARTIAL"
		}
	}
	if !found {
		t.Errorf("important.txt's content is not in snapshot %s: %+v", snap, l.Entries)
	}

	// A job that ended at its last point: nothing to discard, no listing.
	f.WriteJob("k", map[string]any{"agents": map[string]any{
		"worker":     testkit.Script(writing("COMPLETED", "first", map[string]string{"a.txt": "A"}, "a.txt")),
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "fine")),
	}})
	f.Run("k")
	before, _ := os.ReadDir(filepath.Join(f.Dir, "k", snapshot.Dir))
	if _, _, err := f.St.Rollback("k", "cp-start", steward.RollbackOptions{Reason: "again"}); err != nil {
		t.Fatal(err)
	}
	rb = testkit.OfType(f.Records("k"), history.TypeSteward)
	if ch := rb[len(rb)-1].Steward.Changes; ch["discarded_files"] != nil || ch["discarded_snapshot"] != nil || ch["discarded_not_kept"] != nil {
		t.Errorf("a rollback that discards nothing recorded %v", ch)
	}
	if after, _ := os.ReadDir(filepath.Join(f.Dir, "k", snapshot.Dir)); len(after) != len(before) {
		t.Errorf("snapshots/ went from %d to %d entries", len(before), len(after))
	}
}

// H152: a rollback to a checkpoint whose snapshot object was damaged (a
// byte flipped) is refused before anything is recorded but its
// ROLLBACK_FAILED error, which names the file and the object: the job
// keeps its status and its checkpoint, the workspace is untouched, no
// discarded work is claimed, and a later rollback to a sound checkpoint
// works. It used to record the rollback command first: the job's
// checkpoint became the damaged one although its files never came back,
// and a second attempt listed the current files as discarded.
func TestRollbackToADamagedSnapshotIsRefusedBeforeItIsRecorded(t *testing.T) {
	f := newFixture(t)
	f.WriteJob("j", map[string]any{"agents": map[string]any{
		"worker": testkit.Script(
			writing("COMPLETED", "one", map[string]string{"a.txt": "one"}, "a.txt"),
			writing("COMPLETED", "two", map[string]string{"a.txt": "two", "c.txt": "c"}, "a.txt", "c.txt")),
		"supervisor": testkit.Script(testkit.Step("RETRY", "again"), testkit.Step("COMPLETED", "fine")),
	}})
	f.Run("j")
	before := f.Load("j")
	if before.Status != lifecycle.Success {
		t.Fatalf("run: %s", before.Status)
	}
	obj := filepath.Join(snapshot.ObjectDir(f.Env.Store.JobDir("j")), fmt.Sprintf("%x", sha256.Sum256([]byte("one"))))
	if err := os.WriteFile(obj, []byte("onX"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := f.Env.Store.Workspace("j")
	wsBefore := workspaceState(t, ws)
	nrecs := len(f.Records("j"))

	for range 2 {
		_, _, err := f.St.Rollback("j", "cp-0000-work", steward.RollbackOptions{Reason: "back"})
		if err == nil || !strings.Contains(err.Error(), "does not match its hash") || !strings.Contains(err.Error(), filepath.Base(obj)) || !strings.Contains(err.Error(), `"a.txt"`) {
			t.Fatalf("rollback to a damaged snapshot: %v (want a refusal naming a.txt and the object)", err)
		}
	}
	recs := f.Records("j")
	for _, r := range recs[nrecs:] {
		if r.Type != history.TypeError || r.Error.Code != "ROLLBACK_FAILED" {
			t.Errorf("recorded %s after the refused rollbacks, want only ROLLBACK_FAILED errors", r.Type)
		}
	}
	if len(recs) != nrecs+2 {
		t.Errorf("%d records after two refused rollbacks, want %d", len(recs), nrecs+2)
	}
	after := f.Load("j")
	if after.Status != before.Status || after.Run.CheckpointID != before.Run.CheckpointID {
		t.Errorf("job now %s at %s, was %s at %s", after.Status, after.Run.CheckpointID, before.Status, before.Run.CheckpointID)
	}
	if got := workspaceState(t, ws); fmt.Sprint(got) != fmt.Sprint(wsBefore) {
		t.Errorf("workspace changed: %v, was %v", got, wsBefore)
	}
	tx, err := jobtx.Begin(f.Env, "j", nil)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := tx.CheckpointRef(); id != before.Run.CheckpointID {
		t.Errorf("the history's current checkpoint is %q, want %q", id, before.Run.CheckpointID)
	}
	tx.Close()

	if _, _, err := f.St.Rollback("j", "cp-start", steward.RollbackOptions{Reason: "from the start"}); err != nil {
		t.Fatalf("rollback to a sound checkpoint: %v", err)
	}
	if got := workspaceState(t, ws); len(got) != 0 {
		t.Errorf("workspace after the rollback to cp-start: %v", got)
	}
}
