package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func ip(n int) *int { return &n }

func open(t *testing.T, dir string) *Log {
	t.Helper()
	l, torn, err := Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if torn != nil {
		t.Fatalf("unexpected torn tail %+v", torn)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func appendAll(t *testing.T, l *Log, recs ...*Record) {
	t.Helper()
	for _, r := range recs {
		if err := l.Append(r); err != nil {
			t.Fatalf("Append(%s): %v", r.Type, err)
		}
	}
}

func intent(n int, role string) *Record {
	return &Record{Type: TypeIntent, Interaction: ip(n), Role: role, Phase: "work", StateBefore: "PENDING", Attempt: 1,
		Request: &Request{Prompt: "do " + role, FilesContext: []string{"spec.md"}, Metadata: map[string]any{"role": role}}}
}

func response(n int, role, action string) *Record {
	return &Record{Type: TypeResponse, Interaction: ip(n), Role: role, Phase: "work",
		Response: &Response{Status: StatusSuccess, Action: action, EvidenceFiles: []string{"a.txt"}, Summary: "did " + role,
			RawResponse: `{"action":"` + action + `"}`, ExecutionTimeSeconds: 1.5, CostUSD: 0.01}}
}

func historyPath(dir string) string { return filepath.Join(dir, FileName) }

func TestOpenCreatesEmpty(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := open(t, dir)
	st := l.State()
	if st.NextSeq != 0 || st.NextInteraction != 0 || st.OpenIntent != nil || len(st.Responses) != 0 || st.LastCheckpoint != "" {
		t.Errorf("fresh state %+v", st)
	}
	if l.Path() != historyPath(dir) {
		t.Errorf("Path = %q", l.Path())
	}
	fi, err := os.Stat(historyPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("new history size %d perm %v", fi.Size(), fi.Mode().Perm())
	}
	recs, err := ReadAll(dir)
	if err != nil || len(recs) != 0 {
		t.Errorf("ReadAll of empty history: %v %v", recs, err)
	}
	// ReadAll of a folder without a history is not an error.
	recs, err = ReadAll(t.TempDir())
	if err != nil || recs != nil {
		t.Errorf("ReadAll without history: %v %v", recs, err)
	}
	if _, _, err := Open(filepath.Join(dir, "missing", "deeper")); err == nil {
		t.Error("Open in a missing folder succeeded")
	}
}

func TestAppendReadAllRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := open(t, dir)
	fixed := time.Date(2025, 1, 29, 14, 30, 45, 0, time.FixedZone("CET", 3600))
	l.now = func() time.Time { return fixed }

	in := []*Record{
		intent(0, "worker"),
		response(0, "worker", "COMPLETED"),
		{Type: TypeTransition, Transition: &Transition{From: "RUNNING", To: "REVIEWING", FromPhase: "work", ToPhase: "review", Event: "phase_advance", Actor: "SYSTEM"}},
		{Type: TypeRecoveryPoint, RecoveryPoint: &RecoveryPoint{CheckpointID: "cp-1", Sequence: 1, ResumePhase: "review", CanResumeFrom: true, Description: "worker done", RollbackFiles: []string{"a.txt"}}},
		{Type: TypeError, Time: "2000-01-01T00:00:00Z", Error: &ErrorInfo{Code: "INTERRUPTED", Message: "stopped"}},
	}
	appendAll(t, l, in...)

	recs, err := ReadAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(in) {
		t.Fatalf("read %d records, want %d", len(recs), len(in))
	}
	for i, r := range recs {
		if r.V != RecordVersion || r.Seq != int64(i) {
			t.Errorf("record %d: v %d seq %d", i, r.V, r.Seq)
		}
		// Append fills in V, Seq and Time on the caller's record too.
		if !reflect.DeepEqual(r, *in[i]) {
			t.Errorf("record %d round trip:\n got %+v\nwant %+v", i, r, *in[i])
		}
	}
	if recs[0].Time != "2025-01-29T13:30:45Z" {
		t.Errorf("time %q, want UTC RFC3339", recs[0].Time)
	}
	if recs[4].Time != "2000-01-01T00:00:00Z" {
		t.Errorf("preset time overwritten: %q", recs[4].Time)
	}
	if recs[1].Response.Summary != "did worker" || recs[0].Request.Metadata["role"] != "worker" {
		t.Errorf("payloads %+v %+v", recs[1].Response, recs[0].Request)
	}

	// Every line is one JSON object ending in a newline.
	data, _ := os.ReadFile(historyPath(dir))
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	if len(lines) != len(in) || data[len(data)-1] != '\n' {
		t.Fatalf("file has %d lines", len(lines))
	}
	for _, ln := range lines {
		var env struct {
			Hash string         `json:"hash"`
			Rec  map[string]any `json:"rec"`
		}
		if err := json.Unmarshal(ln, &env); err != nil {
			t.Fatalf("line %q: %v", ln, err)
		}
		if len(env.Hash) != 64 {
			t.Errorf("line %s has no hash", ln)
		}
		for _, k := range []string{"v", "seq", "type", "ts", "prev_hash"} {
			if _, ok := env.Rec[k]; !ok {
				t.Errorf("line %s lacks %q", ln, k)
			}
		}
	}
}

func TestStateCounters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := open(t, dir)

	appendAll(t, l, intent(0, "worker"))
	st := l.State()
	if st.OpenIntent == nil || *st.OpenIntent.Interaction != 0 || st.OpenIntent.Role != "worker" {
		t.Fatalf("OpenIntent after intent: %+v", st.OpenIntent)
	}
	if st.NextSeq != 1 || st.NextInteraction != 1 || l.NewInteraction() != 1 {
		t.Errorf("NextSeq %d NextInteraction %d", st.NextSeq, st.NextInteraction)
	}

	appendAll(t, l, response(0, "worker", "COMPLETED"))
	st = l.State()
	if st.OpenIntent != nil {
		t.Errorf("OpenIntent after response: %+v", st.OpenIntent)
	}
	if st.Responses["worker"] != 1 || st.NextSeq != 2 {
		t.Errorf("state %+v", st)
	}

	appendAll(t, l, intent(1, "supervisor"), response(1, "supervisor", "RETRY"),
		intent(2, "worker"), response(2, "worker", "COMPLETED"),
		&Record{Type: TypeRecoveryPoint, RecoveryPoint: &RecoveryPoint{CheckpointID: "cp-7"}},
		intent(3, "supervisor"))
	st = l.State()
	if st.Responses["worker"] != 2 || st.Responses["supervisor"] != 1 {
		t.Errorf("Responses %v", st.Responses)
	}
	if st.NextSeq != 8 || st.NextInteraction != 4 || st.LastCheckpoint != "cp-7" {
		t.Errorf("NextSeq %d NextInteraction %d LastCheckpoint %q", st.NextSeq, st.NextInteraction, st.LastCheckpoint)
	}
	if st.OpenIntent == nil || *st.OpenIntent.Interaction != 3 {
		t.Fatalf("OpenIntent %+v", st.OpenIntent)
	}

	// Reopening derives the same state from the file.
	l2 := open(t, dir)
	st2 := l2.State()
	if st2.NextSeq != st.NextSeq || st2.NextInteraction != st.NextInteraction || st2.LastCheckpoint != st.LastCheckpoint ||
		!reflect.DeepEqual(st2.Responses, st.Responses) || st2.OpenIntent == nil || *st2.OpenIntent.Interaction != 3 {
		t.Errorf("reopened state %+v, want %+v", st2, st)
	}

	// A steward resume does not settle the open intent; halt does.
	appendAll(t, l2, &Record{Type: TypeSteward, Steward: &Steward{Command: "resume", CommandID: "c1"}})
	if l2.State().OpenIntent == nil {
		t.Error("resume cleared the open intent")
	}
	appendAll(t, l2, &Record{Type: TypeSteward, Interaction: ip(9), Steward: &Steward{Command: "halt", CommandID: "c2"}})
	if l2.State().OpenIntent != nil {
		t.Error("halt did not settle the open intent")
	}
	if l2.State().NextInteraction != 10 {
		t.Errorf("NextInteraction %d after steward interaction 9", l2.State().NextInteraction)
	}
	appendAll(t, l2, intent(10, "worker"), &Record{Type: TypeSteward, Steward: &Steward{Command: "rollback", CommandID: "c3"}})
	if l2.State().OpenIntent != nil {
		t.Error("rollback did not settle the open intent")
	}
}

func TestOpenIntentIsACopy(t *testing.T) {
	t.Parallel()
	l := open(t, t.TempDir())
	r := intent(0, "worker")
	appendAll(t, l, r)
	r.Role = "changed"
	if l.State().OpenIntent.Role != "worker" {
		t.Error("OpenIntent aliases the caller's record")
	}
}

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, p string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestTornTail(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, tail string }{
		{"partial line", `{"v":1,"seq":3,"type":"inte`},
		{"complete json without newline", `{"v":1,"seq":3,"type":"intent"}`},
		{"garbage last line", "\x00\x00garbage\x00\n"},
		{"half object with newline", `{"v":1,"seq":3,` + "\n"},
		{"wrong types last line", `{"v":"one","seq":3}` + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l := open(t, dir)
			appendAll(t, l, intent(0, "worker"), response(0, "worker", "COMPLETED"), intent(1, "supervisor"))
			l.Close()
			good, _ := os.ReadFile(historyPath(dir))
			appendBytes(t, historyPath(dir), []byte(c.tail))

			l2, torn, err := Open(dir)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer l2.Close()
			if torn == nil {
				t.Fatal("no torn tail reported")
			}
			if torn.Offset != int64(len(good)) || torn.Bytes != int64(len(c.tail)) || torn.Path != historyPath(dir) {
				t.Errorf("torn %+v, want offset %d bytes %d", torn, len(good), len(c.tail))
			}
			after, _ := os.ReadFile(historyPath(dir))
			if !bytes.Equal(after, good) {
				t.Errorf("file after repair:\n%q\nwant\n%q", after, good)
			}
			st := l2.State()
			if st.NextSeq != 3 || st.OpenIntent == nil || *st.OpenIntent.Interaction != 1 {
				t.Errorf("state after repair %+v", st)
			}
			// The repaired log takes appends and reads back whole.
			appendAll(t, l2, response(1, "supervisor", "COMPLETED"))
			recs, err := ReadAll(dir)
			if err != nil || len(recs) != 4 || recs[3].Seq != 3 || recs[3].Type != TypeResponse {
				t.Fatalf("after append: %d records, %v", len(recs), err)
			}
			// And opens cleanly again.
			l3 := open(t, dir)
			if l3.State().NextSeq != 4 {
				t.Errorf("NextSeq %d", l3.State().NextSeq)
			}
		})
	}
}

func TestTornTailOnlyRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, historyPath(dir), []byte(`{"v":1,"se`))
	l, torn, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if torn == nil || torn.Offset != 0 || torn.Bytes != 10 {
		t.Errorf("torn %+v", torn)
	}
	if fi, _ := os.Stat(historyPath(dir)); fi.Size() != 0 {
		t.Errorf("size %d after repair", fi.Size())
	}
}

// ReadAll never writes: it skips an in-flight last line but does not cut it.
func TestReadAllSkipsTornTailWithoutRepair(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := open(t, dir)
	appendAll(t, l, intent(0, "worker"))
	appendBytes(t, historyPath(dir), []byte(`{"v":1,"seq":1`))
	before, _ := os.ReadFile(historyPath(dir))
	recs, err := ReadAll(dir)
	if err != nil || len(recs) != 1 {
		t.Fatalf("ReadAll: %d %v", len(recs), err)
	}
	after, _ := os.ReadFile(historyPath(dir))
	if !bytes.Equal(before, after) {
		t.Error("ReadAll modified the file")
	}
}

func TestCorruptMiddleLineIsAnError(t *testing.T) {
	t.Parallel()
	// good, garbage, good: the garbage is not a torn write.
	dir := t.TempDir()
	l := open(t, dir)
	appendAll(t, l, intent(0, "worker"))
	l.Close()
	appendBytes(t, historyPath(dir), []byte("{corrupt\n"))
	first, _ := os.ReadFile(historyPath(dir))
	appendBytes(t, historyPath(dir), []byte(`{"v":1,"seq":2,"type":"response","interaction":0,"role":"worker"}`+"\n"))
	before, _ := os.ReadFile(historyPath(dir))

	l2, torn, err := Open(dir)
	if err == nil {
		l2.Close()
		t.Fatalf("Open accepted a corrupt middle line (torn %+v)", torn)
	}
	if !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), "byte") {
		t.Errorf("error %q", err)
	}
	offset := len(first) - len("{corrupt\n")
	if !strings.Contains(err.Error(), "byte "+strconv.Itoa(offset)) {
		t.Errorf("error %q does not name byte %d", err, offset)
	}
	after, _ := os.ReadFile(historyPath(dir))
	if !bytes.Equal(before, after) {
		t.Error("Open modified a corrupt history")
	}
	if _, err := ReadAll(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("ReadAll: %v", err)
	}
}

func TestNewerRecordVersionRefused(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"last", "middle"} {
		t.Run(where, func(t *testing.T) {
			dir := t.TempDir()
			l := open(t, dir)
			appendAll(t, l, intent(0, "worker"))
			l.Close()
			appendBytes(t, historyPath(dir), []byte(`{"hash":"00","rec":{"v":3,"seq":1,"type":"quantum"}}`+"\n"))
			if where == "middle" {
				appendBytes(t, historyPath(dir), []byte(`{"v":1,"seq":2,"type":"intent","interaction":1}`+"\n"))
			}
			before, _ := os.ReadFile(historyPath(dir))
			l2, _, err := Open(dir)
			if err == nil {
				l2.Close()
				t.Fatal("Open accepted a newer record")
			}
			if !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), "version 3") {
				t.Errorf("Open error %q", err)
			}
			after, _ := os.ReadFile(historyPath(dir))
			if !bytes.Equal(before, after) {
				t.Error("a newer record was cut off as if torn")
			}
			if _, err := ReadAll(dir); err == nil || !strings.Contains(err.Error(), "newer") {
				t.Errorf("ReadAll error %v", err)
			}
		})
	}
}

func TestRefreshSeesOtherWriter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := open(t, dir)
	appendAll(t, a, intent(0, "worker"))

	// Another process (here: a second Log) appends while a is idle.
	b := open(t, dir)
	if b.State().NextSeq != 1 || b.State().OpenIntent == nil {
		t.Fatalf("b state %+v", b.State())
	}
	appendAll(t, b, response(0, "worker", "COMPLETED"), intent(1, "supervisor"))

	if a.State().NextSeq != 1 {
		t.Fatal("a saw b's records before Refresh")
	}
	if err := a.Refresh(); err != nil {
		t.Fatal(err)
	}
	st := a.State()
	if st.NextSeq != 3 || st.NextInteraction != 2 || st.Responses["worker"] != 1 || st.OpenIntent == nil || *st.OpenIntent.Interaction != 1 {
		t.Fatalf("a after Refresh %+v", st)
	}
	// No change: Refresh is a no-op.
	if err := a.Refresh(); err != nil || a.State().NextSeq != 3 {
		t.Fatalf("second Refresh: %v %+v", err, a.State())
	}
	// a's next append continues the sequence without a gap or duplicate.
	appendAll(t, a, response(1, "supervisor", "COMPLETED"))
	recs, err := ReadAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.Seq != int64(i) {
			t.Errorf("record %d has seq %d", i, r.Seq)
		}
	}
	if len(recs) != 4 {
		t.Errorf("%d records", len(recs))
	}
}

func TestRefreshAfterShrink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := open(t, dir)
	appendAll(t, a, intent(0, "worker"), response(0, "worker", "COMPLETED"))
	keep, _ := os.ReadFile(historyPath(dir))
	appendAll(t, a, intent(1, "supervisor"), response(1, "supervisor", "RETRY"), intent(2, "worker"))
	if a.State().NextSeq != 5 {
		t.Fatal(a.State())
	}
	// Someone cuts the file back to its first two records: the log lost
	// committed records, and its head says so (issue 18: it used to be
	// continued from record 2).
	if err := os.Truncate(historyPath(dir), int64(len(keep))); err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(); !errors.Is(err, ErrMissing) {
		t.Fatalf("Refresh after shrink: %v, want ErrMissing", err)
	}
	// A steward who accepts the loss removes the head; then the log is
	// continued from where it now ends.
	if err := os.Remove(filepath.Join(dir, HeadFile)); err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(); err != nil {
		t.Fatalf("Refresh after shrink, head removed: %v", err)
	}
	st := a.State()
	if st.NextSeq != 2 || st.NextInteraction != 1 || st.OpenIntent != nil || st.Responses["supervisor"] != 0 || st.Responses["worker"] != 1 {
		t.Fatalf("state after shrink %+v", st)
	}
	appendAll(t, a, intent(1, "supervisor"))
	recs, err := ReadAll(dir)
	if err != nil || len(recs) != 3 || recs[2].Seq != 2 {
		t.Fatalf("after append: %v %v", recs, err)
	}
}

func TestRefreshRepairsTornTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := open(t, dir)
	appendAll(t, a, intent(0, "worker"))
	b := open(t, dir)
	appendAll(t, b, response(0, "worker", "COMPLETED"))
	appendBytes(t, historyPath(dir), []byte(`{"v":1,"seq":2,"ty`))
	if err := a.Refresh(); err != nil {
		t.Fatal(err)
	}
	if a.State().NextSeq != 2 || a.State().Responses["worker"] != 1 {
		t.Errorf("state %+v", a.State())
	}
	appendAll(t, a, intent(1, "supervisor"))
	if recs, err := ReadAll(dir); err != nil || len(recs) != 3 {
		t.Fatalf("ReadAll: %d %v", len(recs), err)
	}
}

func hasKeys(t *testing.T, what string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks key %q (has %v)", what, k, slices.Sorted(maps.Keys(m)))
		}
	}
}

func TestMaterialiseSeedShape(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := open(t, dir)
	wsOverride := intent(1, "supervisor")
	wsOverride.Request.WorkspacePath = "/elsewhere/ws"
	appendAll(t, l,
		intent(0, "worker"),
		response(0, "worker", "COMPLETED"),
		&Record{Type: TypeTransition, Role: "worker", Phase: "work", Transition: &Transition{From: "RUNNING", To: "REVIEWING", Event: "phase_advance", Actor: "SYSTEM"}},
		&Record{Type: TypeRecoveryPoint, RecoveryPoint: &RecoveryPoint{CheckpointID: "phase-1-complete", Sequence: 1, ResumePhase: "review", CanResumeFrom: true,
			Description: "Worker completed initial implementation", RollbackFiles: []string{"a.txt"}, Snapshot: &SnapshotRef{Listing: "snapshots/phase-1-complete.json", Files: 1}}},
		wsOverride,              // interrupted: no response
		intent(1, "supervisor"), // re-attempt of the same turn replaces it
		response(1, "supervisor", "STUCK"),
		&Record{Type: TypeSteward, Interaction: ip(2), Phase: "review", StateBefore: "INTERVENTION_REQUIRED",
			Steward: &Steward{Command: "resume", CommandID: "c1", Guidance: "try again", Reason: "looks fine"}},
		&Record{Type: TypeError, Error: &ErrorInfo{Code: "INTERRUPTED", Message: "daemon stopped"}},
		&Record{Type: TypeResponse, Interaction: ip(99), Response: &Response{Status: StatusError}}, // no intent: ignored
	)
	recs, err := ReadAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := Materialise("example-job-001", "2025-01-29T10:00:00Z", "/jobs/example-job-001/workspace", recs)
	// A steward's command is an event, not an interaction (version 2).
	if len(h.Interactions) != 2 || h.FormatVersion != JobHistoryVersion {
		t.Fatalf("version %d, %d interactions: %+v", h.FormatVersion, len(h.Interactions), h.Interactions)
	}
	w, s := h.Interactions[0], h.Interactions[1]
	if w.Sequence != 0 || w.Role != "worker" || w.StateBefore != "PENDING" || w.WorkspacePath != "/jobs/example-job-001/workspace" ||
		w.Response == nil || w.Response.Action != "COMPLETED" || w.Request.Prompt != "do worker" || w.Timestamp != recs[0].Time {
		t.Errorf("worker interaction %+v", w)
	}
	if s.Sequence != 1 || s.Response == nil || s.Response.Action != "STUCK" || s.WorkspacePath != "/jobs/example-job-001/workspace" {
		t.Errorf("re-attempted interaction %+v (want the second intent, answered)", s)
	}
	if st := h.Events[1]; st.Steward == nil || st.Steward.Command != "resume" || st.Steward.Guidance != "try again" ||
		st.Steward.Reason != "looks fine" || st.StateBefore != "INTERVENTION_REQUIRED" || st.Phase != "review" {
		t.Errorf("steward event %+v", st)
	}
	if len(h.RecoveryPoints) != 1 || h.RecoveryPoints[0].CheckpointID != "phase-1-complete" {
		t.Errorf("recovery points %+v", h.RecoveryPoints)
	}
	if len(h.Events) != 3 || h.Events[0].Type != TypeTransition || h.Events[1].Type != TypeSteward || h.Events[2].Type != TypeError {
		t.Errorf("events %+v", h.Events)
	}
	if h.Events[0].Transition.To != "REVIEWING" || h.Events[2].Error.Code != "INTERRUPTED" || h.Events[1].Steward.CommandID != "c1" {
		t.Errorf("event payloads %+v", h.Events)
	}

	// The workspace_path in a request overrides the default.
	h2 := Materialise("j", "", "/ws", recs[:5])
	if h2.Interactions[1].WorkspacePath != "/elsewhere/ws" || h2.Interactions[1].Response != nil {
		t.Errorf("interrupted interaction %+v", h2.Interactions[1])
	}

	// JSON shape of seed 002's jobHistory.json.
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	hasKeys(t, "jobHistory", doc, "format_version", "job_id", "created_at", "interactions", "recovery_points")
	if doc["job_id"] != "example-job-001" || doc["created_at"] != "2025-01-29T10:00:00Z" {
		t.Errorf("header %v %v", doc["job_id"], doc["created_at"])
	}
	ins := doc["interactions"].([]any)
	in0 := ins[0].(map[string]any)
	hasKeys(t, "interaction", in0, "sequence", "timestamp", "state_before", "workspace_path", "request", "response")
	req := in0["request"].(map[string]any)
	hasKeys(t, "request", req, "prompt", "files_context", "metadata")
	if _, ok := req["files_context"].([]any); !ok {
		t.Errorf("files_context is %T", req["files_context"])
	}
	if _, ok := req["metadata"].(map[string]any); !ok {
		t.Errorf("metadata is %T", req["metadata"])
	}
	resp := in0["response"].(map[string]any)
	hasKeys(t, "response", resp, "status", "action", "evidence_files", "summary_for_supervisor", "raw_response", "execution_time_seconds", "cost_usd")
	if resp["status"] != "SUCCESS" || resp["execution_time_seconds"] != 1.5 || resp["cost_usd"] != 0.01 {
		t.Errorf("response %v", resp)
	}
	if _, ok := in0["sequence"].(float64); !ok {
		t.Errorf("sequence is %T, want a number", in0["sequence"])
	}
	rp := doc["recovery_points"].([]any)[0].(map[string]any)
	hasKeys(t, "recovery point", rp, "checkpoint_id", "sequence", "can_resume_from", "description", "resume_phase", "rollback_files")
	if rp["can_resume_from"] != true {
		t.Errorf("can_resume_from %v", rp["can_resume_from"])
	}
	// An in-flight interaction has "response": null, not a missing key.
	b2, _ := json.Marshal(h2)
	var doc2 map[string]any
	_ = json.Unmarshal(b2, &doc2)
	in1 := doc2["interactions"].([]any)[1].(map[string]any)
	if v, ok := in1["response"]; !ok || v != nil {
		t.Errorf("in-flight response = %v (present %v), want null", v, ok)
	}
}

func TestMaterialiseEmpty(t *testing.T) {
	h := Materialise("j", "t", "/ws", nil)
	b, _ := json.Marshal(h)
	if string(b) != `{"format_version":2,"job_id":"j","created_at":"t","interactions":[],"recovery_points":[],"events":[]}` {
		t.Errorf("empty history = %s", b)
	}
}

// Records that lack their payload (a hand-edited or foreign history) are
// skipped rather than crashing the daemon or the CLI.
func TestMaterialiseMalformedRecords(t *testing.T) {
	recs := []Record{
		{Type: TypeIntent},
		{Type: TypeResponse, Interaction: ip(0)},
		{Type: TypeRecoveryPoint},
		{Type: TypeSteward},
		{Type: TypeTransition},
		{Type: "unknown"},
		{Type: TypeIntent, Interaction: ip(0)},
		{Type: TypeResponse, Interaction: ip(0)},
	}
	h := Materialise("j", "t", "/ws", recs)
	if len(h.Interactions) != 1 || h.Interactions[0].Response != nil {
		t.Errorf("interactions %+v", h.Interactions)
	}
	if len(h.RecoveryPoints) != 0 || len(h.Events) != 1 {
		t.Errorf("recovery %v events %v", h.RecoveryPoints, h.Events)
	}
}

func TestWriteJobHistory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := open(t, dir)
	appendAll(t, l, intent(0, "worker"), response(0, "worker", "COMPLETED"))
	if err := WriteJobHistory(dir, "job-1", "2025-01-29T10:00:00Z", "/ws"); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, JobHistoryFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) || b[len(b)-1] != '\n' {
		t.Fatalf("jobHistory.json is not valid JSON with a trailing newline:\n%s", b)
	}
	var h JobHistory
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	if h.JobID != "job-1" || len(h.Interactions) != 1 || h.Interactions[0].Response == nil || h.Interactions[0].WorkspacePath != "/ws" {
		t.Errorf("jobHistory %+v", h)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("perm %v", fi.Mode().Perm())
	}
	// Rewritten as the history grows.
	appendAll(t, l, intent(1, "supervisor"))
	if err := WriteJobHistory(dir, "job-1", "", "/ws"); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(p)
	h = JobHistory{}
	if err := json.Unmarshal(b, &h); err != nil || len(h.Interactions) != 2 {
		t.Errorf("rewritten: %v %d", err, len(h.Interactions))
	}
	// A corrupt history is reported, and the old jobHistory.json stays.
	appendBytes(t, historyPath(dir), []byte("junk\n{}\n"))
	if err := WriteJobHistory(dir, "job-1", "", "/ws"); err == nil {
		t.Error("WriteJobHistory over a corrupt history succeeded")
	}
	b2, _ := os.ReadFile(p)
	if !bytes.Equal(b, b2) {
		t.Error("jobHistory.json changed after a failed write")
	}
	// No history at all: an empty but valid jobHistory.json.
	empty := t.TempDir()
	if err := WriteJobHistory(empty, "e", "", "/ws"); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join(empty, JobHistoryFile))
	if !json.Valid(b) {
		t.Errorf("empty jobHistory.json: %s", b)
	}
}

func TestAppendAfterCloseFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, l, intent(0, "worker"))
	l.Close()
	err = l.Append(intent(1, "worker"))
	if err == nil {
		t.Fatal("Append on a closed log succeeded")
	}
	if !errors.Is(err, os.ErrClosed) {
		t.Logf("error: %v", err)
	}
	if l.State().NextSeq != 1 {
		t.Errorf("failed append advanced the state: %+v", l.State())
	}
	recs, _ := ReadAll(dir)
	if len(recs) != 1 {
		t.Errorf("%d records after failed append", len(recs))
	}
}

func TestStateRemembersSessionsUntilRollback(t *testing.T) {
	t.Parallel()
	l, _, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	withSession := func(n int, phase, role, sid string) *Record {
		r := response(n, role, "RETRY")
		r.Phase = phase
		r.Response.SessionID = sid
		return r
	}
	appendAll(t, l, intent(0, "worker"), withSession(0, "work", "worker", "s-1"),
		intent(1, "worker"), withSession(1, "work", "worker", "s-2"),
		intent(2, "worker"), withSession(2, "review", "worker", "s-3"),
		intent(3, "worker"), withSession(3, "work", "worker", ""))
	st := l.State()
	if got := st.Sessions[SessionKey("work", "worker")]; got != "s-2" {
		t.Errorf("work/worker session = %q, want the newest one that had an id, s-2", got)
	}
	if got := st.Sessions[SessionKey("review", "worker")]; got != "s-3" {
		t.Errorf("review/worker session = %q", got)
	}
	appendAll(t, l, &Record{Type: TypeSteward, Steward: &Steward{Command: "resume", CommandID: "c1"}})
	if len(l.State().Sessions) != 2 {
		t.Errorf("resume dropped sessions: %v", l.State().Sessions)
	}
	appendAll(t, l, &Record{Type: TypeSteward, Steward: &Steward{Command: "rollback", CommandID: "c2"}})
	if s := l.State().Sessions; len(s) != 0 {
		t.Errorf("sessions after rollback: %v (they remember undone work)", s)
	}
}

// Issue 17 item 4: the current checkpoint is the newest recovery point or
// the one a later rollback returned to, read back the same way.
func TestStateCurrentCheckpointFollowsRollback(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir)
	point := func(id string, files int) *Record {
		return &Record{Type: TypeRecoveryPoint, RecoveryPoint: &RecoveryPoint{CheckpointID: id, RollbackFiles: []string{},
			Snapshot: &SnapshotRef{Listing: "snapshots/" + id + ".json", Files: files}}}
	}
	rollback := func(id string, snap *SnapshotRef) *Record {
		return &Record{Type: TypeSteward, Steward: &Steward{Command: CommandRollback, CommandID: "c-" + id,
			Changes: map[string]any{"checkpoint_id": id, "resume_phase": "work"}, Snapshot: snap}}
	}
	appendAll(t, l, point("cp-start", 0), point("cp-0000-work", 1), point("cp-0001-review", 2))
	if st := l.State(); st.LastCheckpoint != "cp-0001-review" || st.CheckpointSnapshot.Files != 2 {
		t.Fatalf("state %q %+v", st.LastCheckpoint, st.CheckpointSnapshot)
	}
	appendAll(t, l, rollback("cp-0000-work", &SnapshotRef{Listing: "snapshots/cp-0000-work.json", Files: 1}))
	check := func(what, id string, files int) {
		t.Helper()
		st := l.State()
		if st.LastCheckpoint != id || (files < 0) != (st.CheckpointSnapshot == nil) || (files >= 0 && st.CheckpointSnapshot.Files != files) {
			t.Errorf("%s: current checkpoint %q %+v, want %s", what, st.LastCheckpoint, st.CheckpointSnapshot, id)
		}
	}
	check("after rollback", "cp-0000-work", 1)
	// A halt or a resume does not move it.
	appendAll(t, l, &Record{Type: TypeSteward, Steward: &Steward{Command: CommandHalt, CommandID: "h"}},
		&Record{Type: TypeSteward, Steward: &Steward{Command: "resume", CommandID: "r"}})
	check("after halt and resume", "cp-0000-work", 1)
	l.Close()
	l = open(t, dir)
	check("reopened", "cp-0000-work", 1)
	// A rollback recorded before Logist named the snapshot: the checkpoint
	// moves, its snapshot is unknown.
	appendAll(t, l, rollback("cp-start", nil))
	check("old rollback record", "cp-start", -1)
	appendAll(t, l, point("cp-0007-work", 3))
	check("new point", "cp-0007-work", 3)
}

// Issue 17 item 5: a list with nothing in it is [] in history.jsonl and in
// jobHistory.json, never null: as written (a stored copy of an empty list
// once lost it), and as read from records that hold null.
func TestEmptyListsStayLists(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir)
	in := &Record{Type: TypeIntent, Interaction: ip(0), Role: "worker", Request: &Request{Prompt: "p", FilesContext: []string{}, Metadata: map[string]any{}}}
	stored := in.Clone() // what jobtx stores: a clone
	out := &Record{Type: TypeResponse, Interaction: ip(0), Role: "worker", Response: &Response{Status: StatusSuccess, Action: "COMPLETED", EvidenceFiles: []string{}}}
	storedOut := out.Clone()
	appendAll(t, l, &stored, &storedOut, &Record{Type: TypeRecoveryPoint, RecoveryPoint: &RecoveryPoint{CheckpointID: "cp"}})
	raw, err := os.ReadFile(Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("null")) {
		t.Errorf("history.jsonl holds null:\n%s", raw)
	}
	for _, key := range []string{`"files_context":[]`, `"evidence_files":[]`, `"rollback_files":[]`} {
		if !bytes.Contains(raw, []byte(key)) {
			t.Errorf("history.jsonl lacks %s", key)
		}
	}

	// Records written with null (before the rule) read back as [].
	line := func(rec string) []byte { return []byte(`{"hash":"x","rec":` + rec + `}`) }
	var recs []Record
	for _, r := range []string{
		`{"v":2,"seq":0,"type":"intent","ts":"t","interaction":0,"role":"worker","request":{"prompt":"p","files_context":null,"metadata":null}}`,
		`{"v":2,"seq":1,"type":"response","ts":"t","interaction":0,"role":"worker","response":{"status":"SUCCESS","evidence_files":null,"summary_for_supervisor":"","raw_response":"","execution_time_seconds":0,"cost_usd":0}}`,
		`{"v":2,"seq":2,"type":"recovery_point","ts":"t","recovery_point":{"checkpoint_id":"cp","sequence":0,"resume_phase":"","can_resume_from":true,"description":"","rollback_files":null}}`,
	} {
		e, err := ParseLine(line(r))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, e.Record)
	}
	if recs[0].Request.FilesContext == nil || recs[0].Request.Metadata == nil || recs[1].Response.EvidenceFiles == nil || recs[2].RecoveryPoint.RollbackFiles == nil {
		t.Errorf("null lists read back as nil: %+v %+v %+v", recs[0].Request, recs[1].Response, recs[2].RecoveryPoint)
	}
	b, _ := json.Marshal(Materialise("j", "t", "/ws", recs))
	if bytes.Contains(b, []byte("null")) {
		t.Errorf("jobHistory.json holds null: %s", b)
	}
}

// TestJobHistoryCurrent: jobHistory.json is written without an fsync, so a
// crash can leave it missing, torn or stale; JobHistoryCurrent tells each
// from a current view by the view's start and end and the history's head,
// and EnsureJobHistory rebuilds exactly those.
func TestJobHistoryCurrent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, JobHistoryFile)
	current := func(want bool, why string) {
		t.Helper()
		got, err := JobHistoryCurrent(dir)
		if err != nil || got != want {
			t.Fatalf("%s: JobHistoryCurrent = %v, %v; want %v", why, got, err, want)
		}
	}
	ensure := func(want bool, why string) {
		t.Helper()
		got, err := EnsureJobHistory(dir, "job-1", "", "/ws")
		if err != nil || got != want {
			t.Fatalf("%s: EnsureJobHistory rebuilt = %v, %v; want %v", why, got, err, want)
		}
		current(true, why+", then ensured")
	}
	// No history and no view: nothing to rebuild.
	if got, err := EnsureJobHistory(dir, "job-1", "", "/ws"); got || err != nil {
		t.Fatalf("empty folder: rebuilt %v, %v", got, err)
	}
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("empty folder: a view was written (%v)", err)
	}
	// A view of no history (a torn one, then a whole one) is kept whole.
	if err := os.WriteFile(p, []byte("{\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ensure(true, "torn view of no history")
	ensure(false, "view of no history")
	l := open(t, dir)
	appendAll(t, l, intent(0, "worker"))
	current(false, "stale by one record")
	ensure(true, "stale by one record")
	appendAll(t, l, response(0, "worker", "COMPLETED"))
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	current(false, "missing")
	ensure(true, "missing")
	ensure(false, "current")
	var h JobHistory
	b, _ := os.ReadFile(p)
	if err := json.Unmarshal(b, &h); err != nil || h.HistorySeq != l.State().NextSeq-1 || h.HistoryHash != l.LastHash() {
		t.Fatalf("view reflects %d %s (%v), history ends at %d %s", h.HistorySeq, h.HistoryHash, err, l.State().NextSeq-1, l.LastHash())
	}
	appendAll(t, l, intent(1, "supervisor"))
	current(false, "stale")
	ensure(true, "stale")
	b, _ = os.ReadFile(p)
	for _, torn := range [][]byte{b[:len(b)/2], b[:len(b)-1], nil, make([]byte, len(b))} {
		if err := os.WriteFile(p, torn, 0o600); err != nil {
			t.Fatal(err)
		}
		ensure(true, fmt.Sprintf("torn to %d bytes", len(torn)))
	}
	// A view of another history with as many records is stale too.
	other := t.TempDir()
	appendAll(t, open(t, other), intent(0, "worker"), response(0, "worker", "STUCK"), intent(1, "supervisor"))
	if err := WriteJobHistory(other, "job-1", "", "/ws"); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join(other, JobHistoryFile))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ensure(true, "another history's view")
}

// Refresh compares the path's inode with the one its descriptor had at the
// open (an open file's inode never changes): no fstat per transaction, and
// a history replaced by another file (same content, new inode) is still
// opened again, so that the next append reaches the file at the path.
func TestRefreshStatsTheOpenFileOnce(t *testing.T) {
	n := 0
	fstat = func(f *os.File) (os.FileInfo, error) { n++; return f.Stat() }
	t.Cleanup(func() { fstat = (*os.File).Stat })
	dir := t.TempDir()
	a := open(t, dir)
	appendAll(t, a, intent(0, "worker"))
	for range 3 {
		if err := a.Refresh(); err != nil {
			t.Fatal(err)
		}
	}
	if n != 0 {
		t.Errorf("three Refreshes took %d fstats of the open history, want 0", n)
	}
	// Replaced: the same bytes under a new inode, then one more record
	// by another writer.
	b, err := os.ReadFile(historyPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	tmp := historyPath(dir) + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, historyPath(dir)); err != nil {
		t.Fatal(err)
	}
	other := open(t, dir)
	appendAll(t, other, response(0, "worker", "COMPLETED"))
	if err := a.Refresh(); err != nil {
		t.Fatal(err)
	}
	if a.State().NextSeq != 2 {
		t.Fatalf("after Refresh of a replaced history: %+v", a.State())
	}
	appendAll(t, a, intent(1, "supervisor"))
	recs, err := ReadAll(dir)
	if err != nil || len(recs) != 3 || recs[2].Seq != 2 {
		t.Fatalf("the replaced history after a's append: %d records, %v", len(recs), err)
	}
}

// An open reads the job folder (recoverRotation) only when one of the two
// plain archives a cut rotation can leave is there: history-N+1.jsonl not
// yet indexed, history-N.jsonl indexed but not removed (N archives
// indexed). Both are still finished.
func TestOpenReadsTheFolderOnlyAfterACutRotation(t *testing.T) {
	n := 0
	readDir = func(d string) ([]fs.DirEntry, error) { n++; return os.ReadDir(d) }
	t.Cleanup(func() { readDir = os.ReadDir })
	dir := t.TempDir()
	o := Options{MaxBytes: 1024}
	reopen := func() *Log {
		t.Helper()
		l, _, err := OpenWith(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := reopen()
	i := 0
	for ; l.archives < 2; i++ {
		appendAll(t, l, intent(i, "worker"))
	}
	appendAll(t, l, intent(i, "worker")) // the active file is not empty
	if l.archives != 2 {
		t.Fatalf("%d archives", l.archives)
	}
	l.Close()
	n = 0
	reopen().Close()
	if n != 0 {
		t.Errorf("an open of a history with %d archives read the folder %d times, want 0", 2, n)
	}
	idx, err := readIndex(dir)
	if err != nil || len(idx.Archives) != 2 {
		t.Fatalf("index: %d archives, %v", len(idx.Archives), err)
	}
	// Cut after the rename: the active file is archive 3, not indexed.
	if err := os.Rename(Path(dir), filepath.Join(dir, archiveName(3))); err != nil {
		t.Fatal(err)
	}
	n = 0
	l = reopen()
	next := l.State().NextSeq
	l.Close()
	if idx, err := readIndex(dir); n != 1 || err != nil || len(idx.Archives) != 3 {
		t.Fatalf("a cut rotation: %d folder reads, %d archives indexed (%v); want 1 and 3", n, len(idx.Archives), err)
	}
	// Cut after the index: the plain copy of archive 3 is left.
	if err := os.WriteFile(filepath.Join(dir, archiveName(3)), []byte("left\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n = 0
	l = reopen()
	if _, err := os.Lstat(filepath.Join(dir, archiveName(3))); n != 1 || !errors.Is(err, fs.ErrNotExist) || l.State().NextSeq != next {
		t.Errorf("an indexed archive's plain copy: %d folder reads, still there: %v, next seq %d (want %d)", n, err, l.State().NextSeq, next)
	}
	l.Close()
}
