package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/testkit"
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

// A polled job folder's manifest the daemon may not read is read again
// once a chmod gives it back, as inotify's IN_ATTRIB has a watched one
// read again (watch.go): the poll notices a change of mode, not only of
// content. The limit is the kernel's, lowered in a user namespace and
// used up, so the folder is refused a watch by a real ENOSPC; the
// manifest is a real file made unreadable by its mode; the test looks
// at the folders itself (pollOnce; the poller's own ticks never come).
func TestPolledManifestReadAgainOnChmod(t *testing.T) {
	// As a user other than root in a user namespace of its own (uid
	// 1000, this user outside): it may lower inotify's watch limit
	// (CAP_SYS_RESOURCE, kept) but not read a file whatever its mode (no
	// CAP_DAC_OVERRIDE), as logistd's user cannot.
	if !testkit.InUserNamespace(t, "a private inotify limit, a user a file's mode holds back", unix.CAP_SYS_RESOURCE) {
		return
	}

	const limit = 32
	if err := os.WriteFile("/proc/sys/user/max_inotify_watches", []byte(fmt.Sprint(limit)), 0o644); err != nil {
		t.Fatalf("lower the watch limit in this namespace: %v", err)
	}
	dir := t.TempDir()
	d, lb, _, _ := startDaemonWith(t, Options{JobsDir: dir, MaxParallel: 2, Grace: time.Second, pollTicks: make(chan time.Time)})
	// Every watch left is taken: the next job folder is refused one.
	filler, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer filler.Close() //nolint:errcheck // a watcher holds no data
	spare := t.TempDir()
	for i := 0; ; i++ {
		if i > limit {
			t.Fatalf("%d watches added under a limit of %d", i, limit)
		}
		sub := filepath.Join(spare, fmt.Sprint(i))
		if err := os.Mkdir(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := filler.Add(sub); isWatchLimit(err) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	// A job whose manifest its owner made unreadable (chmod 000), moved in
	// whole.
	stage := filepath.Join(t.TempDir(), "locked")
	if err := os.Mkdir(stage, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(stage, jobstore.ManifestFile)
	if err := os.WriteFile(file, []byte(quick), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(stage, filepath.Join(dir, "locked")); err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, "locked", jobstore.ManifestFile)
	// The stall note is reportDenied's last act.
	waitFor(t, "the unreadable manifest's STORAGE_DENIED stall note", func() bool {
		st, ok := d.store.ReadStall("locked")
		return ok && st.Code == codes.StorageDenied
	})
	d.polled.mu.Lock()
	_, polled := d.polled.dirs["locked"]
	d.polled.mu.Unlock()
	if !polled {
		t.Fatalf("the job folder was not polled: the watch limit was not met\n%s", lb.b.String())
	}
	if !d.isDenied("locked") {
		t.Fatal("a stall note, but the job is not STORAGE_DENIED")
	}
	// Given back to the daemon's user: the next look reads it again, and
	// the job runs.
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	d.pollOnce()
	if d.isDenied("locked") {
		t.Fatalf("job.json made 0600, then a poll: the job is still STORAGE_DENIED\n%s", lb.b.String())
	}
	waitFor(t, "the job to run", func() bool { return status(dir, "locked") == "SUCCESS" })
	if _, ok := d.store.ReadStall("locked"); ok {
		t.Error("the stall note outlived the repair")
	}
	if n := lb.count("error_code", codes.StorageDenied); n != 1 {
		t.Errorf("%d %s lines, want 1", n, codes.StorageDenied)
	}
}
