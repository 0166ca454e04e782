package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestProcArgv: the probe finds an agent by its exact argv, not by a
// process whose argv merely contains it (the sandbox helper that starts
// it) or begins like it.
func TestProcArgv(t *testing.T) {
	proc := t.TempDir()
	for pid, argv := range map[string]string{
		"10":   "/bin/agent\x00-\x00f-1\x00worker\x00300\x00",
		"11":   "/run/helper\x00__sandbox-exec\x00--\x00/bin/agent\x00-\x00f-2\x00worker\x00300\x00",
		"12":   "/bin/agent\x00-\x00f-3\x00worker\x00300\x00x\x00",
		"self": "/bin/agent\x00-\x00f-4\x00worker\x00300\x00",
	} {
		if err := os.MkdirAll(filepath.Join(proc, pid), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, pid, "cmdline"), []byte(argv), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		id   string
		want bool
	}{{"f-1", true}, {"f-2", false}, {"f-3", false}, {"f-4", false}, {"f-5", false}} {
		if got := procArgv(proc, []string{"/bin/agent", "-", c.id, "worker", "300"}); got != c.want {
			t.Errorf("procArgv(%s) = %v, want %v", c.id, got, c.want)
		}
	}
}

// TestWaitProcSeesARunningProcess: on this host's /proc, a process that
// runs is found, and one that does not is not.
func TestWaitProcSeesARunningProcess(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("probe-test-%d", os.Getpid())
	argv := []string{sh, "-c", "sleep 60; :", tag}
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := waitProc(argv, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := waitProc([]string{sh, "-c", "sleep 60; :", tag + "-other"}, 10*time.Millisecond); err == nil {
		t.Error("waitProc found a process that does not run")
	}
}
