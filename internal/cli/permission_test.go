package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/testkit"
)

// runAsOther runs logist as a user the jobs folder's files refuse: this
// user, after the files are made unreadable (chmod does not bind root),
// or, as root, the test binary as nobody (LOGIST_CLI_TEST_MAIN).
func runAsOther(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return runMain(t, nil, args...)
	}
	return runAsUID(t, 65534, args...)
}

// runAsUID runs logist as uid (root only), the test binary copied where
// that user may run it.
func runAsUID(t *testing.T, uid uint32, args ...string) (int, string, string) {
	t.Helper()
	// nobody must reach the binary: a copy in a folder it may enter.
	exe := testkit.SelfCopy(t, "logist")
	cmd := exec.Command(exe, args...)
	cmd.Env = []string{"LOGIST_CLI_TEST_MAIN=1", "HOME=/"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stdout.String(), stderr.String()
	} else if err != nil {
		t.Skipf("cannot run logist as uid %d: %v", uid, err)
	}
	return 0, stdout.String(), stderr.String()
}

// unreadableJobs is a jobs folder whose jobs' manifests other users (and
// this one, not root) may not read; readable names jobs left readable.
func unreadableJobs(t *testing.T, ids []string, readable ...string) string {
	t.Helper()
	jobs, err := os.MkdirTemp("", "logist-cli-jobs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(jobs) }) // best effort: a temporary folder
	for _, id := range ids {
		writeJob(t, jobs, id, jobJSON("INTERVENTION_REQUIRED", `"current_phase": "work"`))
		dir, file := filepath.Join(jobs, id), filepath.Join(jobs, id, "job.json")
		mode := os.FileMode(0o000)
		for _, r := range readable {
			if r == id {
				mode = 0o644
			}
		}
		if err := os.Chmod(file, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(jobs, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, id := range ids {
			os.Chmod(filepath.Join(jobs, id, "job.json"), 0o600) //nolint:errcheck // best effort: RemoveAll follows
		}
	})
	return jobs
}

// A job this user may not read is a permission failure (exit 3), never
// an invalid manifest: status fails as resume and halt do; list lists
// it as UNREADABLE with the others, and fails (exit 3) only when it
// could read none of them.
func TestUnreadableJobIsPermissionDenied(t *testing.T) {
	jobs := unreadableJobs(t, []string{"a", "b"}, "b")
	code, out, errs := runAsOther(t, "--jobs-dir", jobs, "status", "a")
	if code != 3 || strings.Contains(out+errs, "invalid manifest") || !strings.Contains(errs, "permission denied") {
		t.Errorf("status: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runAsOther(t, "--jobs-dir", jobs, "list")
	if code != 0 || !strings.Contains(out, "UNREADABLE") || !strings.Contains(out, "could not be read: permission denied on job.json") ||
		strings.Contains(out, "INVALID") || !strings.Contains(out, "INTERVENTION_REQUIRED") {
		t.Errorf("list with one job readable: exit %d\n%s%s", code, out, errs)
	}

	jobs = unreadableJobs(t, []string{"a", "b"})
	code, out, errs = runAsOther(t, "--jobs-dir", jobs, "list")
	if code != 3 || strings.Count(out, "UNREADABLE") != 2 || !strings.Contains(out, "none of the 2 jobs") {
		t.Errorf("list with none readable: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = runAsOther(t, "--jobs-dir", jobs, "list", "--format", "json")
	if code != 3 || !strings.Contains(out, `"code": "permission_denied"`) || strings.Count(out, `"status": "UNREADABLE"`) != 2 {
		t.Errorf("list --format json with none readable: exit %d\n%s", code, out)
	}
}

// A job that the jobs folder's owner (logistd's user) may not read
// because of its own files, a folder copied in as root or a chmod, is
// not "run logist as logistd's user": its owner already is that user.
// The hint names the file that refuses and how to give the job back.
func TestUnreadableJobOfTheOwnerSaysHowToGiveItBack(t *testing.T) {
	asRootOrSkip(t)
	const uid = 1000 // the jobs folder's owner, logistd's user
	jobs, err := os.MkdirTemp("", "logist-cli-owner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(jobs) }) // best effort: a temporary folder
	writeJob(t, jobs, "rooted", jobJSON("INTERVENTION_REQUIRED", `"current_phase": "work"`))
	writeJob(t, jobs, "chmodded", jobJSON("INTERVENTION_REQUIRED", `"current_phase": "work"`))
	for _, p := range []string{jobs, filepath.Join(jobs, "chmodded"), filepath.Join(jobs, "chmodded", "job.json")} {
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	// rooted: root's folder, as a cp -r by root leaves it.
	if err := os.Chmod(filepath.Join(jobs, "rooted"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(jobs, "chmodded", "job.json"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(jobs, 0o755); err != nil {
		t.Fatal(err)
	}
	me := jobstore.UserName(uid)
	code, out, errs := runAsUID(t, uid, "--jobs-dir", jobs, "status", "rooted")
	want := filepath.Join(jobs, "rooted") + " belongs to root (uid 0), not to " + me +
		", who owns the jobs folder (logistd's user): give the job's files back (sudo chown -R " + me + " " + filepath.Join(jobs, "rooted") + ")"
	if code != ExitPermission || !strings.Contains(errs, want) || strings.Contains(errs, "run logist as") {
		t.Errorf("status of root's job folder: exit %d, want %d and\n%s\n%s%s", code, ExitPermission, want, out, errs)
	}
	code, out, errs = runAsUID(t, uid, "--jobs-dir", jobs, "status", "chmodded")
	want = filepath.Join(jobs, "chmodded", "job.json") + " has mode 0000, which its owner " + me +
		" may not read: give the job's files back (chmod -R u+rwX " + filepath.Join(jobs, "chmodded") + ")"
	if code != ExitPermission || !strings.Contains(errs, want) || strings.Contains(errs, "run logist as") {
		t.Errorf("status of a chmodded job.json: exit %d, want %d and\n%s\n%s%s", code, ExitPermission, want, out, errs)
	}
}

// asRootOrSkip skips (loudly; never under CI=true, which runs as root)
// a test that needs root to make a folder another user owns.
func asRootOrSkip(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test needs root (to give a jobs folder to another user), and CI=true may not skip it")
	}
	t.Skip("SKIP: needs root to give a jobs folder to another user; not tested")
}

// A command that writes into a jobs folder its user does not own (root's
// resume on the daemon's folder) is refused before it writes anything,
// naming the folder, its owner and how to run it; the daemon would not
// be able to read what it wrote, and the job would never run.
func TestSteeringAsNotTheOwnerIsRefused(t *testing.T) {
	asRootOrSkip(t)
	jobs := t.TempDir()
	writeJob(t, jobs, "stuck", jobJSON("INTERVENTION_REQUIRED", `"current_phase": "work"`))
	before, err := os.ReadFile(filepath.Join(jobs, "stuck", "job.json"))
	if err != nil {
		t.Fatal(err)
	}
	listing := func() []string {
		var names []string
		_ = filepath.WalkDir(jobs, func(p string, _ os.DirEntry, _ error) error {
			names = append(names, p)
			return nil
		})
		return names
	}
	files := listing()
	if err := os.Chown(jobs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"resume", "stuck", "--guidance", "x y"},
		{"halt", "stuck"},
		{"schedules", "pause", "stuck", "--reason", "r"},
	} {
		code, out, errs := runMain(t, nil, append([]string{"--jobs-dir", jobs}, args...)...)
		owner := jobstore.UserName(65534)
		if code != ExitPermission || !strings.Contains(errs, "jobs folder "+jobs+" belongs to "+owner+" (uid 65534)") ||
			!strings.Contains(errs, "sudo -u "+owner+" logist --jobs-dir "+jobs+" "+args[0]) {
			t.Errorf("%v: exit %d, want %d naming the owner and the command to run\n%s%s", args, code, ExitPermission, out, errs)
		}
		if strings.Count(errs, "run logist as") > 0 {
			t.Errorf("%v: the refusal says twice whom to run it as:\n%s", args, errs)
		}
	}
	code, out, errs := runMain(t, nil, "--jobs-dir", jobs, "resume", "stuck", "--guidance", "it's", "--format", "json")
	if code != ExitPermission || !strings.Contains(out, `"code": "permission_denied"`) || !strings.Contains(out, `--guidance 'it'\\''s'`) {
		t.Errorf("resume --format json: exit %d\n%s%s", code, out, errs)
	}
	after, err := os.ReadFile(filepath.Join(jobs, "stuck", "job.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) || !slices.Equal(listing(), files) {
		t.Errorf("a refused command wrote into the jobs folder: files %v (were %v), job.json changed: %v",
			listing(), files, string(after) != string(before))
	}
	// Reading stays open to anyone the files let read.
	if code, out, errs := runMain(t, nil, "--jobs-dir", jobs, "status", "stuck"); code != 0 {
		t.Errorf("status as root on another user's folder: exit %d\n%s%s", code, out, errs)
	}
	// The owner steers.
	if err := os.Chown(jobs, 0, 0); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runMain(t, nil, "--jobs-dir", jobs, "resume", "stuck", "--guidance", "x"); code != 0 {
		t.Errorf("resume as the owner: exit %d\n%s%s", code, out, errs)
	}
}

// A job the daemon does not move (its storage refused it) is not "queued
// or running: wait": status says what stops it, stalled or refused.
func TestStatusOfAStalledJobSaysWhatStopsIt(t *testing.T) {
	jobs := t.TempDir()
	writeJob(t, jobs, "stuck", jobJSON("PENDING", ""))
	store := jobstore.New(jobs)
	lock, err := store.LockDaemon() // a daemon serves the folder
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release() //nolint:errcheck // the test's own lock
	code, out, _ := runMain(t, nil, "--jobs-dir", jobs, "status", "stuck")
	if code != 0 || !strings.Contains(out, "queued or running") {
		t.Fatalf("status of a job not stalled: exit %d\n%s", code, out)
	}
	for _, c := range []struct {
		st   jobstore.Stall
		want string
	}{
		{jobstore.Stall{Code: "STORAGE_DENIED", Reason: "open job.json: permission denied", Since: "x", Refused: true},
			"logistd does not run it until what Refused names is repaired (STORAGE_DENIED)"},
		{jobstore.Stall{Code: "HISTORY_WRITE", Reason: "append history: no space left on device", Since: "x", RetryAt: "y", Attempt: 2},
			"logistd retries it by itself once its storage lets it: repair what Stalled names (HISTORY_WRITE)"},
	} {
		if err := store.WriteStall("stuck", c.st); err != nil {
			t.Fatal(err)
		}
		code, out, _ := runMain(t, nil, "--jobs-dir", jobs, "status", "stuck")
		if code != 0 || strings.Contains(out, "queued or running") || !strings.Contains(out, c.want) || !strings.Contains(out, c.st.Reason) {
			t.Errorf("status of a job stalled with %s: exit %d, want %q\n%s", c.st.Code, code, c.want, out)
		}
	}
}
