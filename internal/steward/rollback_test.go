package steward_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/steward"
)

// writing is a scripted step that writes files into the workspace.
func writing(action, summary string, files map[string]string, evidence ...string) map[string]any {
	s := step(action, summary)
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
	f.writeJob("j", map[string]any{"agents": map[string]any{
		"worker":     script(writing("COMPLETED", "wrote it", map[string]string{"a.txt": "A"}, "a.txt")),
		"supervisor": script(step("COMPLETED", "fine")),
	}})
	f.run("j")
	if m := f.load("j"); m.Status != lifecycle.Success || m.Run.CheckpointID != "cp-0001-review" {
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
	trs := ofType(f.records("j"), history.TypeTransition)
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
	f.run("j")
	recs := f.records("j")
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
	if m := f.load("j"); m.Status != lifecycle.Success || m.Run.CheckpointID == "cp-0000-work" {
		t.Errorf("after the second run: %s at %s (a new final checkpoint is current)", m.Status, m.Run.CheckpointID)
	}
}
