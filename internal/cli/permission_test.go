package cli

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// runAsOther runs logist as a user the jobs folder's files refuse: this
// user, after the files are made unreadable (chmod does not bind root),
// or, as root, the test binary as nobody (LOGIST_CLI_TEST_MAIN).
func runAsOther(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return runMain(t, nil, args...)
	}
	// nobody must reach the binary: a copy in a folder it may enter.
	bin, err := os.MkdirTemp("", "logist-cli-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(bin) }) // best effort: a temporary folder
	self, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	exe := filepath.Join(bin, "logist")
	out, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, self); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = []string{"LOGIST_CLI_TEST_MAIN=1", "HOME=/"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stdout.String(), stderr.String()
	} else if err != nil {
		t.Skipf("cannot run logist as nobody: %v", err)
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
