package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
)

// watchLimitChild marks the test binary re-run in its own user namespace,
// where the test may lower inotify's watch limit for itself alone.
const watchLimitChild = "LOGIST_TEST_WATCH_LIMIT_CHILD"

// Past inotify's watch limit, job folders are polled: a steward's change
// to a folder the watcher refused is still heard, and the limit is
// reported once. The limit is the kernel's own, lowered to a few watches
// in a user namespace (/proc/sys/user/max_inotify_watches is per
// namespace), so the daemon meets a real ENOSPC from inotify_add_watch.
func TestWatchLimitPollsFoldersPastIt(t *testing.T) {
	if os.Getenv(watchLimitChild) == "" {
		unshare, err := exec.LookPath("unshare")
		if err == nil {
			err = exec.Command(unshare, "-Ur", "true").Run()
		}
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("unshare -Ur (util-linux, user namespaces) is needed for this test: %v", err)
			}
			t.Skipf("SKIP (loud): no user namespace for a private inotify limit (unshare -Ur: %v)", err)
		}
		cmd := exec.Command(unshare, "-Ur", os.Args[0], "-test.run=^TestWatchLimitPollsFoldersPastIt$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), watchLimitChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestWatchLimitPollsFoldersPastIt") {
			t.Fatalf("in a user namespace: %v\n%s", err, out)
		}
		return
	}

	const jobs, limit = 12, 6
	if err := os.WriteFile("/proc/sys/user/max_inotify_watches", []byte(fmt.Sprint(limit)), 0o644); err != nil {
		t.Fatalf("lower the watch limit in this namespace: %v", err)
	}
	dir := t.TempDir()
	draft := strings.Replace(quick, `{"task_description"`, `{"status": "DRAFT", "task_description"`, 1)
	for i := 0; i < jobs; i++ {
		id := fmt.Sprintf("j%02d", i)
		if err := os.MkdirAll(filepath.Join(dir, id), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, id, "job.json"), []byte(draft), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d, lb, _, _ := startDaemon(t, dir)
	waitFor(t, "the scan to end", func() bool {
		select {
		case <-d.scanDone:
			return true
		default:
			return false
		}
	})
	d.polled.mu.Lock()
	polledN := len(d.polled.dirs)
	d.polled.mu.Unlock()
	if polledN == 0 {
		t.Fatalf("no folder polled with a limit of %d watches and %d jobs", limit, jobs)
	}
	// A steward's change to every job (a new file, as a command saves it):
	// each must run, the polled ones too.
	for i := 0; i < jobs; i++ {
		id := fmt.Sprintf("j%02d", i)
		tmp := filepath.Join(dir, id, ".job.json.new")
		if err := os.WriteFile(tmp, []byte(quick), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, id, "job.json")); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < jobs; i++ {
		id := fmt.Sprintf("j%02d", i)
		waitFor(t, id+" to run", func() bool { return status(dir, id) == "SUCCESS" })
	}
	if n := lb.count("error_code", codes.WatchLimit); n != 1 {
		t.Errorf("%d %s lines, want 1 (the limit reported once, not per folder)", n, codes.WatchLimit)
	}
	if l := lb.seedLine(t, codes.WatchLimit); l == nil || l["level"] != "WARN" {
		t.Errorf("%s line %v", codes.WatchLimit, l)
	}
	t.Logf("%d of %d job folders polled", polledN, jobs)
}
