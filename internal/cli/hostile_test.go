package cli

// Hostile inputs (docs/hostile-inputs.md) as logist shows them: a stalled
// job in status, a workflow loop in validate.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/jobstore"
)

// A job the daemon has stalled on its storage (hostile input H104) shows
// why in logist status, text and JSON: its manifest may be the very file
// that cannot be written.
func TestStatusShowsStall(t *testing.T) {
	t.Parallel()
	jobs := filepath.Join(t.TempDir(), "jobs")
	writeJob(t, jobs, "ro", jobJSON("PENDING", ""))
	st := jobstore.Stall{Code: "STORAGE_DENIED", Reason: "append history: write ro/history.jsonl: permission denied",
		Since: "2026-01-01T00:00:00Z", RetryAt: "2026-01-01T00:00:08Z", Attempt: 3}
	if err := jobstore.New(jobs).WriteStall("ro", st); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain(t, nil, "status", "ro", "--jobs-dir", jobs)
	if code != 0 || !strings.Contains(out, "STORAGE_DENIED since 2026-01-01T00:00:00Z (attempt 3, next try 2026-01-01T00:00:08Z): append history") {
		t.Fatalf("status exit %d:\n%s%s", code, out, errOut)
	}
	_, out, _ = runMain(t, nil, "status", "ro", "--jobs-dir", jobs, "--format", "json")
	if !strings.Contains(out, `"error_code": "STORAGE_DENIED"`) {
		t.Errorf("json status has no stall:\n%s", out)
	}
	if err := jobstore.New(jobs).ClearStall("ro"); err != nil {
		t.Fatal(err)
	}
	if _, out, _ = runMain(t, nil, "status", "ro", "--jobs-dir", jobs); strings.Contains(out, "Stalled") {
		t.Errorf("status shows a cleared stall:\n%s", out)
	}
}

// A job whose run the daemon refused and will not retry (hostile inputs
// H81-H84, H99, H100: a cut or corrupt history) shows the code and the
// reason in logist status: its manifest still says RUNNING.
func TestStatusShowsRefusal(t *testing.T) {
	t.Parallel()
	jobs := filepath.Join(t.TempDir(), "jobs")
	writeJob(t, jobs, "cut", jobJSON("RUNNING", `"current_phase": "work"`))
	st := jobstore.Stall{Code: "HISTORY_MISSING", Reason: "history cut/history.jsonl ends at record 1, but its head says it held records up to 2: history lost committed records; not continuing it: restore the file",
		Since: "2026-01-01T00:00:00Z", Attempt: 1, Refused: true}
	if err := jobstore.New(jobs).WriteStall("cut", st); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain(t, nil, "status", "cut", "--jobs-dir", jobs)
	if code != 0 || !strings.Contains(out, "Refused:") ||
		!strings.Contains(out, "HISTORY_MISSING since 2026-01-01T00:00:00Z, not run until it is repaired: history cut/history.jsonl ends at record 1, but its head says it held records up to 2") {
		t.Fatalf("status exit %d:\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, "Stalled") {
		t.Errorf("a refusal shown as a stall:\n%s", out)
	}
	_, out, _ = runMain(t, nil, "status", "cut", "--jobs-dir", jobs, "--format", "json")
	if !strings.Contains(out, `"refused": {`) || !strings.Contains(out, `"error_code": "HISTORY_MISSING"`) {
		t.Errorf("json status has no refusal:\n%s", out)
	}
}

// Hostile input H106: logist validate warns of a workflow whose COMPLETED
// leads back round (it ran 58,540 calls in 5 minutes with no budget).
func TestValidateWarnsOfLoopWithNoExit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := filepath.Join(dir, "spin.json")
	m := `{"task_description": "t", "workflow": {"name": "spin", "start": "work", "phases": {
		"work": {"role": "worker", "on": {"COMPLETED": "work", "RETRY": "work", "STUCK": "INTERVENTION_REQUIRED"}}}},
		"agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "again"}]}}}`
	if err := os.WriteFile(f, []byte(m), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain(t, nil, "validate", f)
	if code != 0 || !strings.Contains(out, `warning: workflow spin: answering COMPLETED never reaches SUCCESS from phase "work" (work → work)`) {
		t.Errorf("validate exit %d:\n%s%s", code, out, errOut)
	}
}

// A preset whose program this shell cannot find is a warning at validate
// (logistd looks on its own PATH), naming the field and what to install,
// not an ok that the first call turns into NOT_INSTALLED.
func TestValidateWarnsOfAPresetNotInstalled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := filepath.Join(dir, "preset.json")
	m := `{"task_description": "t", "agents": {
		"worker": {"provider": "command", "command": {"preset": "claude-code", "program": "no-such-claude-xyz"}},
		"supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`
	if err := os.WriteFile(f, []byte(m), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain(t, nil, "validate", f)
	for _, want := range []string{"ok (warning:", "/agents/worker/command/program", `preset claude-code's program "no-such-claude-xyz" is not found`, "NOT_INSTALLED"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("validate exit %d, output lacks %q:\n%s%s", code, want, out, errOut)
		}
	}
}

// logist validate refuses a FILE that is not a regular file, naming it,
// as submit does: a named pipe no one writes to made it wait for ever,
// and /dev/zero made it read without end.
func TestValidateRefusesNonRegularFile(t *testing.T) {
	t.Parallel()
	fifo := mkfifo(t, filepath.Join(t.TempDir(), "answer.json"))
	code, out, _ := runMainWithin(t, "validate", fifo, "/dev/zero")
	if code != 1 || !strings.Contains(out, fifo+": not a regular file: it is a named pipe") ||
		!strings.Contains(out, "/dev/zero: not a regular file") {
		t.Fatalf("validate exit %d:\n%s", code, out)
	}
}

// logist reply --file refuses a file that is not a regular file, naming
// it, before it looks at the job: a named pipe no one writes to made it
// wait for ever.
func TestReplyRefusesNonRegularFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs")
	writeJob(t, jobs, "j", jobJSON("INTERVENTION_REQUIRED", ""))
	fifo := mkfifo(t, filepath.Join(dir, "answer.json"))
	code, _, errOut := runMainWithin(t, "reply", "j", "--as", "worker", "--file", fifo, "--jobs-dir", jobs)
	if code != 1 || !strings.Contains(errOut, fifo+": not a regular file: it is a named pipe") {
		t.Fatalf("reply exit %d:\n%s", code, errOut)
	}
}

// logist verify --key refuses a key file that is not a regular file,
// naming it: a named pipe no one writes to made it wait for ever.
func TestVerifyRefusesNonRegularKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs")
	writeJob(t, jobs, "j", jobJSON("PENDING", ""))
	fifo := mkfifo(t, filepath.Join(dir, "signing.pub"))
	for _, args := range [][]string{{"verify", "j"}, {"verify", "--all"}} {
		code, _, errOut := runMainWithin(t, append(args, "--key", fifo, "--jobs-dir", jobs)...)
		if code != 1 || !strings.Contains(errOut, fifo+": not a regular file: it is a named pipe") {
			t.Fatalf("%v exit %d:\n%s", args, code, errOut)
		}
	}
}

// A --jobs-dir that is there but is not a folder is refused by every
// command that reads the jobs folder, naming it (exit 1): list, watch
// and schedules waited for ever on a named pipe, and status showed a job
// "in" a regular file as INVALID with exit 0. validate reads no jobs
// folder and still works.
func TestJobsDirNotAFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "jobs-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := mkfifo(t, filepath.Join(dir, "jobs-fifo"))
	for _, jobs := range []string{file, fifo} {
		for _, args := range [][]string{{"list"}, {"status", "x"}, {"watch", "--once"}, {"schedules"}, {"halt", "x"}} {
			code, _, errOut := runMainWithin(t, append(args, "--jobs-dir", jobs)...)
			if code != ExitUsage || !strings.Contains(errOut, "jobs folder "+jobs+" is not a folder") {
				t.Errorf("%v --jobs-dir %s: exit %d:\n%s", args, jobs, code, errOut)
			}
		}
	}
	manifest := filepath.Join(dir, "m.json")
	if err := os.WriteFile(manifest, []byte(jobJSON("PENDING", "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runMain(t, nil, "validate", manifest, "--jobs-dir", file); code != 0 {
		t.Errorf("validate with a jobs folder that is a file: exit %d:\n%s%s", code, out, errOut)
	}
}
