package crashtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/signing"
)

// TestCrashAfterFilesPreparedAhead kills logistd while a job waits for a
// slot with its files made ahead (an empty history and head, its
// workspace: runner's ahead.go) and checks that the next logistd runs it
// once, to its end: an empty history present at the start is a job that
// has not started.
func TestCrashAfterFilesPreparedAhead(t *testing.T) {
	if testing.Short() {
		t.Skip("crash harness: skipped with -short")
	}
	bin := buildDaemon(t)
	work := t.TempDir()
	dir := filepath.Join(work, "jobs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	d := daemon{bin: bin, dir: dir, logFile: filepath.Join(work, "logistd.log")}
	// The holder's worker hangs at its first attempt (the test kills the
	// daemon then); a later one answers.
	agent := hangOnceAgent(t, work)
	mark := filepath.Join(work, "holder.started")
	place := func(id string, worker map[string]any) {
		t.Helper()
		b, err := json.MarshalIndent(map[string]any{"schema_version": 1, "job_id": id, "task_description": "ahead " + id,
			"agents": map[string]any{"worker": worker, "supervisor": agentScript(step{"action": "COMPLETED", "summary": "ok"})}}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		stage := filepath.Join(work, id)
		if err := os.Mkdir(stage, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stage, jobstore.ManifestFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(stage, filepath.Join(dir, id)); err != nil {
			t.Fatal(err)
		}
	}
	// One slot (daemon.start's 64 would run the waiter at once).
	cmd := d.start(t, "--max-parallel", "1", "--sandbox", "none")
	place("holder", agentCommand(true, "sh", agent, "{answer_file}", mark))
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder's worker never started; log:\n%s", tail(d.logFile, 0))
		}
	}
	place("waiter", agentScript(step{"action": "COMPLETED", "summary": "done"}))
	jd := filepath.Join(dir, "waiter")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, herr := os.Stat(filepath.Join(jd, history.HeadFile))
		_, werr := os.Stat(filepath.Join(jd, jobstore.WorkspaceDir))
		if herr == nil && werr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter's files were not prepared; log:\n%s", tail(d.logFile, 0))
		}
	}
	killAtMark(t, cmd, mark, d.logFile)
	if fi, err := os.Stat(history.Path(jd)); err != nil || fi.Size() != 0 {
		t.Fatalf("the waiter's history at the crash: %v, %v; want an empty one", fi, err)
	}
	from := logSize(d.logFile)
	d.runOnce(t, 60*time.Second, "--sandbox", "none")
	key, err := signing.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"waiter", "holder"} {
		got := checkJob(t, filepath.Join(dir, id), jobSpec{id: id, kind: "ahead", want: "SUCCESS"}, key.Public())
		if got.status != "SUCCESS" || got.responses != 2 {
			t.Errorf("job %s ends %s with %d responses, want SUCCESS with 2 (one call each, once); log:\n%s",
				id, got.status, got.responses, tail(d.logFile, from))
		}
	}
}
