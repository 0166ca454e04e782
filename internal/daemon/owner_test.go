package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/testkit"
)

const nobody = 65534

// asRootOrSkip skips (loudly; never under CI=true, which runs as root) a
// test that needs root: to run logistd as another user, to give files to
// another user.
func asRootOrSkip(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test needs root (to run logistd as another user), and CI=true may not skip it")
	}
	t.Skip("SKIP: needs root to run logistd as another user; not tested")
}

// nobodysFolder is a folder owned by nobody, mode 0700.
func nobodysFolder(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "logistd-owner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) }) // best effort: a temporary folder
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runAsNobody starts this test binary as logistd (LOGISTD_TEST_MAIN) as
// nobody, with args, until the test ends; its log is returned.
func runAsNobody(t *testing.T, args ...string) *testkit.SyncBuffer {
	t.Helper()
	asRootOrSkip(t)
	exe := testkit.SelfCopy(t, "logistd")
	log := &testkit.SyncBuffer{}
	cmd := exec.Command(exe, args...)
	cmd.Env = []string{"LOGISTD_TEST_MAIN=1", "HOME=/", "PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot run logistd as nobody: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	return log
}

func waitLog(t *testing.T, log *testkit.SyncBuffer, what string, cond func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond(log.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; log:\n%s", what, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A job.json the daemon may not read (another user rewrote it: root's
// logist before it refused to) is a storage problem, STORAGE_DENIED, noted
// for logist status and counted as stalled, never an invalid manifest; the
// job runs once the file is given back to the daemon's user.
func TestUnreadableManifestIsStorageDenied(t *testing.T) {
	asRootOrSkip(t)
	jobs := nobodysFolder(t)
	log := runAsNobody(t, "--jobs-dir", jobs, "--log-level", "debug")
	waitLog(t, log, "the daemon's start", func(s string) bool { return strings.Contains(s, "logistd starting") })
	// The job as root's logist wrote it: its folder the daemon's, the
	// manifest root's and 0600.
	dir := filepath.Join(jobs, "stuck")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, jobstore.ManifestFile)
	if err := os.WriteFile(file, []byte(quick), 0o600); err != nil {
		t.Fatal(err)
	}
	store := jobstore.New(jobs)
	for _, code := range []string{codes.RunsAsRoot, codes.JobsDirExposed} {
		if strings.Contains(log.String(), code) {
			t.Errorf("logistd as nobody on nobody's 0700 folder warned %s:\n%s", code, log.String())
		}
	}
	waitLog(t, log, "the STORAGE_DENIED line", func(s string) bool { return strings.Contains(s, codes.StorageDenied) })
	if strings.Contains(log.String(), codes.ManifestInvalid) {
		t.Errorf("an unreadable manifest was logged as invalid:\n%s", log.String())
	}
	for _, want := range []string{`"job_id":"stuck"`, "permission denied", "is root's with mode 0600", "chown -R nobody " + dir} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the STORAGE_DENIED line does not say %q:\n%s", want, log.String())
		}
	}
	waitLog(t, log, "the stall note", func(string) bool { _, ok := store.ReadStall("stuck"); return ok })
	st, ok := store.ReadStall("stuck")
	if !ok || st.Code != codes.StorageDenied || !st.Refused || !strings.Contains(st.Reason, "chown -R nobody") {
		t.Fatalf("stall note for logist status: %+v, %v", st, ok)
	}
	// Given back to the daemon's user, it runs, and the note goes.
	if err := os.Chown(file, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	waitLog(t, log, "the job's success", func(string) bool { return status(jobs, "stuck") == "SUCCESS" })
	if _, ok := store.ReadStall("stuck"); ok {
		t.Error("the stall note outlived the repair")
	}
}
