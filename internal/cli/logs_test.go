package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
)

func ip(i int) *int { return &i }

// appendN appends n response records to the history in dir.
func appendN(t *testing.T, l *history.Log, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		rec := &history.Record{Type: history.TypeResponse, Role: "worker", Phase: "work", Interaction: ip(i),
			Response: &history.Response{Status: history.StatusSuccess, Action: "RETRY", Summary: strings.Repeat("s", 40)}}
		if err := l.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
}

// collector records the sequence numbers passed on, and fails on a
// repeat or a gap.
type collector struct {
	mu   sync.Mutex
	seqs []int64
}

func (c *collector) emit(en history.Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if want := int64(len(c.seqs)); en.Seq != want {
		return fmt.Errorf("record %d passed on after %d records (want %d): repeated or skipped", en.Seq, len(c.seqs), want)
	}
	c.seqs = append(c.seqs, en.Seq)
	return nil
}

func (c *collector) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seqs)
}

func TestFollowLogsExitOnFinish(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	writeJob(t, jobs, "job-a", jobJSON("RUNNING", `"current_phase": "work"`))
	store := jobstore.New(jobs)
	dir := store.JobDir("job-a")
	l, _, err := history.OpenWith(dir, history.Options{MaxBytes: 2000})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendN(t, l, 3)

	c := &collector{}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- followLogs(ctx, store, "job-a", history.NewFollower(dir), c.emit, true) }()
	waitFor(t, "the first records", 5*time.Second, func() bool { return c.n() == 3 })
	appendN(t, l, 20) // rotates on the way
	waitFor(t, "the appended records", 5*time.Second, func() bool { return c.n() == 23 })
	select {
	case err := <-done:
		t.Fatalf("followLogs returned early: %v", err)
	default:
	}
	// History first, manifest second, as logistd does.
	if err := l.Append(&history.Record{Type: history.TypeTransition, Transition: &history.Transition{From: "RUNNING", To: "SUCCESS", Event: "job_succeeded", Actor: "supervisor"}}); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "job.json"), []byte(jobJSON("SUCCESS", `"current_phase": "review"`)), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("followLogs did not exit when the job finished")
	}
	if c.n() != 24 {
		t.Fatalf("%d records, want 24", c.n())
	}
}

func TestFollowLogsStopsOnCancel(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	writeJob(t, jobs, "job-a", jobJSON("PENDING", ""))
	store := jobstore.New(jobs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c := &collector{}
	go func() {
		done <- followLogs(ctx, store, "job-a", history.NewFollower(store.JobDir("job-a")), c.emit, true)
	}()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("followLogs did not stop on cancel")
	}
}

func TestFollowLogsJobRemoved(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	writeJob(t, jobs, "job-a", jobJSON("RUNNING", `"current_phase": "work"`))
	store := jobstore.New(jobs)
	dir := store.JobDir("job-a")
	l, _, err := history.OpenWith(dir, history.Options{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2)
	l.Close()
	c := &collector{}
	done := make(chan error, 1)
	go func() {
		done <- followLogs(context.Background(), store, "job-a", history.NewFollower(dir), c.emit, false)
	}()
	waitFor(t, "the records", 5*time.Second, func() bool { return c.n() == 2 })
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if ExitCode(err) != ExitNotFound || !strings.Contains(fmt.Sprint(err), "job job-a was removed") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("following a removed job did not stop")
	}
}

func TestRecordText(t *testing.T) {
	ts := "2026-11-21T10:00:00.123456789Z"
	for _, c := range []struct {
		rec  history.Record
		want string
	}{
		{history.Record{Seq: 1, Type: history.TypeIntent, Time: ts, Role: "worker", Phase: "work", Interaction: ip(0), Attempt: 2},
			"2026-11-21T10:00:00.123Z #1 intent         worker/work asked (interaction 0, attempt 2)\n"},
		{history.Record{Seq: 2, Type: history.TypeResponse, Time: ts, Role: "worker", Phase: "work",
			Response: &history.Response{Status: "SUCCESS", Action: "COMPLETED", Summary: "Done.\nmore", CostUSD: 0.02, ExecutionTimeSeconds: 1.5, NewStatus: "REVIEWING"}},
			"2026-11-21T10:00:00.123Z #2 response       worker/work SUCCESS COMPLETED $0.02 1.50s \"Done.\\nmore\" → REVIEWING\n"},
		{history.Record{Seq: 3, Type: history.TypeResponse, Time: ts, Role: "worker", Phase: "work",
			Response: &history.Response{Status: "ERROR", ErrorCode: "AGENT_EXIT", Error: "sh exited with status 3", Stderr: "a\nb\nc\nd\ne\n"}},
			"2026-11-21T10:00:00.123Z #3 response       worker/work ERROR $0.00 0.00s AGENT_EXIT: sh exited with status 3\n" +
				"    stderr: a\n    stderr: b\n    stderr: c\n    stderr: … 2 more lines (logist history JOB --record 3)\n"},
		{history.Record{Seq: 4, Type: history.TypeTransition, Time: ts, Phase: "review",
			Transition: &history.Transition{From: "RUNNING", To: "REVIEWING", FromPhase: "work", ToPhase: "review", Event: "phase_advance", Actor: "worker", CheckpointID: "cp-1"}},
			"2026-11-21T10:00:00.123Z #4 transition     RUNNING→REVIEWING phase work→review phase_advance by worker at cp-1\n"},
		{history.Record{Seq: 5, Type: history.TypeTransition, Time: ts, Phase: "work",
			Transition: &history.Transition{From: "RUNNING", To: "INTERVENTION_REQUIRED", FromPhase: "work", ToPhase: "work", Event: "agent_stuck", Actor: "worker", Reason: "need a human"}},
			"2026-11-21T10:00:00.123Z #5 transition     RUNNING→INTERVENTION_REQUIRED in phase work agent_stuck by worker: need a human\n"},
		{history.Record{Seq: 6, Type: history.TypeSteward, Time: ts, Role: "Steward", Phase: "work",
			Steward: &history.Steward{Command: "resume", User: "ann", Guidance: "keep the column\n\"and\" the\arow", Changes: map[string]any{"cost_threshold": 500}}},
			"2026-11-21T10:00:00.123Z #6 steward        Steward/work resume by ann guidance \"keep the column\\n\\\"and\\\" the\\x07row\" changes {\"cost_threshold\":500}\n"},
		{history.Record{Seq: 7, Type: history.TypeError, Time: ts, Error: &history.ErrorInfo{Code: "AGENT_INTERRUPTED", Message: "logistd stopped"}},
			"2026-11-21T10:00:00.123Z #7 error          AGENT_INTERRUPTED: logistd stopped\n"},
		{history.Record{Seq: 8, Type: history.TypeRecoveryPoint, Time: ts, Role: "SYSTEM", Phase: "work",
			RecoveryPoint: &history.RecoveryPoint{CheckpointID: "cp-start", ResumePhase: "work", Description: "before", Snapshot: &history.SnapshotRef{Files: 2}}},
			"2026-11-21T10:00:00.123Z #8 recovery_point SYSTEM/work checkpoint cp-start (resume at work) 2 files: before\n"},
	} {
		if got := recordText(&c.rec); got != c.want {
			t.Errorf("record %d:\n got %q\nwant %q", c.rec.Seq, got, c.want)
		}
	}
}

func TestLogsThroughMain(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	writeJob(t, jobs, "job-a", jobJSON("SUCCESS", `"current_phase": "review"`))
	l, _, err := history.OpenWith(filepath.Join(jobs, "job-a"), history.Options{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 3)
	l.Close()

	code, out, errs := runMain(t, nil, "logs", "job-a", "--jobs-dir", jobs)
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "#2 response       worker/work SUCCESS RETRY") {
		t.Fatalf("exit %d, stderr %s, out:\n%s", code, errs, out)
	}
	// -f on a finished job with --exit-on-finish: the same, then exit.
	code, out2, _ := runMain(t, nil, "logs", "job-a", "-f", "--exit-on-finish", "--jobs-dir", jobs)
	if code != 0 || out2 != out {
		t.Fatalf("exit %d, follow output differs:\n%s", code, out2)
	}
	code, out, _ = runMain(t, nil, "logs", "job-a", "--format", "json", "--jobs-dir", jobs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("exit %d, json:\n%s", code, out)
	}
	for i, line := range lines {
		var rec history.Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Seq != int64(i) || rec.Type != history.TypeResponse {
			t.Fatalf("line %d %q: %v %+v", i, line, err, rec)
		}
	}
	writeJob(t, jobs, "fresh", jobJSON("PENDING", ""))
	code, out, errs = runMain(t, nil, "logs", "fresh", "--jobs-dir", jobs)
	if code != 0 || out != "" || !strings.Contains(errs, "job fresh has no history yet") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, _, errs = runMain(t, nil, "logs", "nope", "--jobs-dir", jobs)
	if code != ExitNotFound || !strings.Contains(errs, "job nope not found in "+jobs+"; logist list shows the jobs") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	code, _, errs = runMain(t, nil, "logs", "--jobs-dir", jobs)
	if code != ExitUsage || !strings.Contains(errs, "usage: logist logs JOB") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}
