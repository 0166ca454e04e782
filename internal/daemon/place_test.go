package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/testkit"
)

// The pair a crash leaves in the middle of a placement (the bare name and
// job.json, one file) is one job at the next start: run once, never
// reported as "already exists", and the bare name removed.
func TestPlacementLeftoverAtStartRunsOnce(t *testing.T) {
	dir := t.TempDir()
	bare := filepath.Join(dir, "pair.json")
	if err := os.WriteFile(bare, []byte(quick), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "pair"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(bare, filepath.Join(dir, "pair", jobstore.ManifestFile)); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	var logs testkit.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	if err := Run(context.Background(), Options{JobsDir: dir, Once: true, MaxParallel: 1}, log); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.ReadFile(filepath.Join(dir, "pair", jobstore.ManifestFile))
	if err != nil || m.Status != lifecycle.Success {
		t.Fatalf("job pair: %v %v", m, err)
	}
	if _, err := os.Lstat(bare); err == nil {
		t.Fatal("the leftover bare name is still there")
	}
	es, err := history.ReadEntries(filepath.Join(dir, "pair"))
	if err != nil {
		t.Fatal(err)
	}
	responses := 0
	for _, e := range es {
		if e.Type == history.TypeResponse {
			responses++
		}
	}
	if responses != 2 {
		t.Fatalf("%d responses recorded, want 2 (the job run once)", responses)
	}
	if out := logs.String(); strings.Contains(out, "already exists") || strings.Contains(out, "invalid manifest") {
		t.Fatalf("the leftover was reported:\n%s", out)
	}
	if m.Metrics.AgentCalls != 2 {
		t.Fatalf("%d agent calls, want 2", m.Metrics.AgentCalls)
	}
}

// A placed job that waits for a slot keeps its bare name, the same file as
// its job.json, until its first unit (no extra folder fsync); a steward's
// new job.json meanwhile settles the placement at once, so that no crash
// can leave the old name beside another file.
func TestWaitingPlacementSettledOnEdit(t *testing.T) {
	dir, bare, mf := waitingPlacement(t)
	putFile(t, mf, strings.Replace(quick, `"t"`, `"edited"`, 1)) // a steward's new file
	waitFor(t, "the bare name to go after the edit", func() bool {
		_, err := os.Lstat(bare)
		return os.IsNotExist(err)
	})
	if ran, _ := history.Present(filepath.Join(dir, "second")); ran {
		t.Fatal("the second job ran: it did not wait for the slot (the test proves nothing)")
	}
}

// A placed job removed while it waits for a slot takes its bare name with
// it: the name does not stay behind to be placed again as a new job.
func TestWaitingPlacementRemovedTakesItsName(t *testing.T) {
	dir, bare, _ := waitingPlacement(t)
	if err := os.RemoveAll(filepath.Join(dir, "second")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bare name to go with its job", func() bool {
		_, err := os.Lstat(bare)
		return os.IsNotExist(err)
	})
	if _, err := os.Lstat(filepath.Join(dir, "second")); !os.IsNotExist(err) {
		t.Fatalf("the removed job came back: %v", err)
	}
}

// waitingPlacement runs a daemon with one slot, taken by a slow job, and
// drops second.json, whose job is placed and waits for the slot with its
// bare name kept (the same file as its job.json). A job dropped before it
// waits first in line: its files are made ahead (runner's ahead.go), and
// their folders' fsyncs settle its placement (its bare name goes), while
// second, beyond the next --max-parallel in line, is left to its start.
func waitingPlacement(t *testing.T) (dir, bare, mf string) {
	t.Helper()
	dir = oneSlotTaken(t)
	store := jobstore.New(dir)
	putFile(t, filepath.Join(dir, "next.json"), quick)
	waitFor(t, "the next job's files made ahead and its placement settled", func() bool {
		_, herr := os.Stat(history.Path(filepath.Join(dir, "next")))
		_, berr := os.Lstat(filepath.Join(dir, "next.json"))
		return herr == nil && os.IsNotExist(berr)
	})
	bare = filepath.Join(dir, "second.json")
	putFile(t, bare, quick)
	mf = filepath.Join(dir, "second", jobstore.ManifestFile)
	waitFor(t, "the second job's placement", func() bool { _, err := os.Stat(mf); return err == nil })
	if !store.Leftover(bare) {
		t.Fatal("the waiting job's bare name is gone or another file: want it kept, one file with job.json")
	}
	return dir, bare, mf
}

// oneSlotTaken runs a daemon with one slot on a new jobs folder (its
// path), taken by a job whose worker takes a minute (first.json).
func oneSlotTaken(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{JobsDir: dir, MaxParallel: 1, Grace: time.Second}, discard())
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	store := jobstore.New(dir)
	waitFor(t, "daemon lock", func() bool { return store.DaemonPID() == os.Getpid() })
	slow := `{"task_description": "t", "agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "done", "delay_ms": 60000}]}, "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`
	putFile(t, filepath.Join(dir, "first.json"), slow)
	waitFor(t, "the first job's run", func() bool {
		_, err := os.Stat(history.Path(filepath.Join(dir, "first")))
		return err == nil
	})
	return dir
}

// putFile replaces p with body whole (a new file renamed over it).
func putFile(t *testing.T, p, body string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(p), ".put.tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

// A job folder removed while its job waits for a slot, its files made
// ahead, leaves nothing noted in memory (atomicfile.Forget): the daemon
// forgets the entries with the folder.
func TestRemovedWaitingJobForgetsItsFilesMadeAhead(t *testing.T) {
	dir := oneSlotTaken(t)
	next := filepath.Join(dir, "next")
	if err := os.Mkdir(next, 0o700); err != nil {
		t.Fatal(err)
	}
	putFile(t, filepath.Join(next, jobstore.ManifestFile), quick)
	waitFor(t, "the waiting job's files made ahead and noted", func() bool {
		return atomicfile.Noted(next) && atomicfile.Noted(history.Path(next))
	})
	if err := os.RemoveAll(next); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removed job's notes forgotten", func() bool {
		return !atomicfile.Noted(next) && !atomicfile.Noted(history.Path(next))
	})
}

// A symlink or a named pipe dropped as <name>.json while the daemon runs
// is reported once, as not placed with what it is, and left where it is:
// the pipe is never opened for a read that would wait for a writer, the
// link's target is not taken, and a job dropped after them runs.
func TestNotARegularFileIsReportedNotPlaced(t *testing.T) {
	dir := t.TempDir()
	_, logs, _, _ := startDaemon(t, dir)
	target := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(target, []byte(quick), 0o600); err != nil {
		t.Fatal(err)
	}
	pipe, link := filepath.Join(dir, "pipe.json"), filepath.Join(dir, "link.json")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	said := map[string]string{
		pipe: pipe + ": it is a named pipe (FIFO), not a regular file; not placed: write the manifest to a regular file and move it in",
		link: fmt.Sprintf("%s: it is a symlink (to %q), not a regular file; not placed: copy the manifest into the jobs folder (logistd does not follow links out of it)", link, target),
	}
	for p, err := range said {
		waitFor(t, p+" reported", func() bool { return logs.has("msg", "invalid manifest", "err", err) })
	}
	putFile(t, filepath.Join(dir, "after.json"), quick)
	waitFor(t, "the job dropped after them to end", func() bool {
		m, err := manifest.ReadFile(filepath.Join(dir, "after", jobstore.ManifestFile))
		return err == nil && m.Status == lifecycle.Success
	})
	for _, p := range []string{pipe, link} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode().IsRegular() {
			t.Errorf("%s was moved or replaced: %v %v", p, fi, err)
		}
		if _, err := os.Lstat(strings.TrimSuffix(p, ".json")); !os.IsNotExist(err) {
			t.Errorf("%s: a job folder was made: %v", p, err)
		}
	}
	for p, err := range said {
		if n := logs.count("msg", "invalid manifest", "err", err); n != 1 {
			t.Errorf("%s reported %d times, want once", p, n)
		}
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != quick {
		t.Fatalf("the link's target changed: %v", err)
	}
}

// H154: a bare manifest cut short (not complete JSON) dropped into a
// running daemon and not written to again is reported once it has been
// quiet for incompleteQuiet, as a scan reports it: MANIFEST_INVALID naming
// the file, counted among the invalid manifests; one still being written
// (each write within the quiet time) is not, and is placed once complete.
// A running daemon used to say nothing of it for as long as it ran.
func TestBareManifestCutShortIsReportedOnceQuiet(t *testing.T) {
	old := incompleteQuiet
	incompleteQuiet = 300 * time.Millisecond
	t.Cleanup(func() { incompleteQuiet = old })
	dir := t.TempDir()
	d, logs, _, _ := startDaemon(t, dir)

	cut := filepath.Join(dir, "cut.json")
	putFile(t, cut, quick[:40])
	grow := filepath.Join(dir, "grow.json")
	f, err := os.OpenFile(grow, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(quick); i += len(quick) / 5 {
		if _, err := f.WriteString(quick[i:min(i+len(quick)/5, len(quick))]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := cut + ": invalid JSON, cut short, and not written to since: not placed: complete it (logistd places it then) or remove it"
	waitFor(t, "cut.json reported", func() bool { return logs.has("msg", "invalid manifest", "job_id", "cut.json", "err", want) })
	waitFor(t, "the job written bit by bit to end", func() bool { return status(dir, "grow") == string(lifecycle.Success) })
	time.Sleep(3 * incompleteQuiet)
	if n := logs.count("msg", "invalid manifest", "job_id", "cut.json"); n != 1 {
		t.Errorf("cut.json reported %d times, want once", n)
	}
	if n := logs.count("msg", "invalid manifest", "job_id", "grow.json") + logs.count("msg", "invalid manifest", "job_id", "grow"); n != 0 {
		t.Errorf("grow.json, written bit by bit, reported %d times", n)
	}
	d.mu.Lock()
	_, counted := d.invalid["cut.json"]
	left := len(d.quiet)
	d.mu.Unlock()
	if !counted || left != 0 {
		t.Errorf("cut.json counted as invalid: %v; timers left: %d", counted, left)
	}
	if _, err := os.Lstat(cut); err != nil {
		t.Errorf("cut.json was moved: %v", err)
	}

	// Completed in place, it is placed and runs.
	putFile(t, cut, quick)
	waitFor(t, "cut.json, completed, to end", func() bool { return status(dir, "cut") == string(lifecycle.Success) })
}
