package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testSweep runs in a process of its own (the sweep reaps every child
// of the process that runs it, which in the test binary would include
// other tests' children): it leaves one child running and sweeps, then
// sweeps again with none left, and prints how often each sweep listed
// the children from /proc and whether the child was reaped.
func testSweep() int {
	listed := 0
	listChildren = func() []int { listed++; return children() }
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		fmt.Println(err)
		return 2
	}
	sweepChildren()
	first := listed
	var ws unix.WaitStatus
	_, err := unix.Wait4(cmd.Process.Pid, &ws, unix.WNOHANG, nil)
	reaped := err == unix.ECHILD
	listed = 0
	sweepChildren()
	fmt.Printf("listed=%d reaped=%v listed-after=%d\n", first, reaped, listed)
	return 0
}

// TestSweepListsOnlyWhileAChildIsLeft: the sweep kills and reaps a
// child left running, and lists /proc only while one is left (a listing
// of /proc/self/task/*/children costs the reaping daemon ms of kernel
// CPU).
func TestSweepListsOnlyWhileAChildIsLeft(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep program")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOGIST_SANDBOX_TEST_SWEEP=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sweep process: %v: %s", err, out)
	}
	var listed, after int
	var reaped bool
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "listed=%d reaped=%t listed-after=%d", &listed, &reaped, &after); err != nil {
		t.Fatalf("sweep process said %q: %v", out, err)
	}
	if listed == 0 || !reaped {
		t.Errorf("a running child: listed %d times, reaped %v; want listed and reaped", listed, reaped)
	}
	if after != 0 {
		t.Errorf("no child left: listed %d times, want 0", after)
	}
}

// TestAwaitExit: a killed process has exited (not reaped) once
// awaitExit returns, and a running one is left running.
func TestAwaitExit(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Skip("no pidfd:", err)
	}
	defer unix.Close(fd) //nolint:errcheck // a pidfd
	awaitExit(fd, 10*time.Millisecond)
	if exited(t, cmd.Process.Pid) {
		t.Fatal("a running process counted as exited")
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	awaitExit(fd, time.Minute)
	if !exited(t, cmd.Process.Pid) {
		t.Fatal("awaitExit returned before the killed process exited")
	}
}

// exited says whether child pid has exited, without reaping it.
func exited(t *testing.T, pid int) bool {
	t.Helper()
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	return info.Signo == int32(unix.SIGCHLD) // zero while it runs
}
