package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/manifest"
)

func request(t *testing.T, n int) *Request {
	job := t.TempDir()
	ws := filepath.Join(job, "workspace")
	os.MkdirAll(ws, 0o700)
	return &Request{JobID: "j", Phase: "work", Role: "worker", Workspace: ws, JobDir: job, Interaction: n}
}

// Many agents at once, each answering a large stdout right before it
// exits: every answer arrives whole (no deadline on reading the pipes).
func TestAnswersAreNeverCutUnderLoad(t *testing.T) {
	answer := `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"` + strings.Repeat("x", 400) + `"}`
	c := &Command{Cfg: manifest.Command{Argv: []string{"sh", "-c", "head -c 200000 /dev/zero | tr '\\0' ' ' >&2; printf '%s' '" + answer + "'"}}}
	var wg sync.WaitGroup
	errs := make(chan string, 200)
	sem := make(chan struct{}, 16)
	for i := 0; i < 120; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := c.Call(context.Background(), request(t, i))
			if err != nil {
				errs <- err.Error()
				return
			}
			if string(res.Raw) != answer || len(res.Stderr) != 200000 {
				errs <- fmt.Sprintf("call %d: answer %d bytes, stderr %d bytes", i, len(res.Raw), len(res.Stderr))
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// A child left in the background does not hold the call open: once the
// agent exits, its group is killed and the call returns with the answer.
func TestLingeringChildIsKilled(t *testing.T) {
	req := request(t, 1)
	c := &Command{Cfg: manifest.Command{Argv: []string{"sh", "-c", "sleep 60 & echo $! > child.pid; echo '{\"a\":1}'"}}}
	start := time.Now()
	res, err := c.Call(context.Background(), req)
	if err != nil || strings.TrimSpace(string(res.Raw)) != `{"a":1}` {
		t.Fatalf("res %q err %v", res.Raw, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("call took %s", d)
	}
	b, _ := os.ReadFile(filepath.Join(req.Workspace, "child.pid"))
	var pid int
	fmt.Sscan(string(b), &pid)
	waitGone(t, pid)
	if _, err := os.Stat(filepath.Join(req.JobDir, "requests", "000001.pid")); !os.IsNotExist(err) {
		t.Error("pid file left after the call")
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, ok := procStart(pid); !ok {
			return
		}
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(b), ") Z ") {
			return // dead, waiting to be reaped by its adopter
		}
	}
	t.Fatalf("process %d still runs", pid)
}

// An agent left running by a killed daemon is killed before its call is
// re-attempted; a recycled pid is left alone.
func TestKillOrphan(t *testing.T) {
	req := request(t, 7)
	os.MkdirAll(filepath.Join(req.JobDir, "requests"), 0o700)
	cmd := exec.Command("sh", "-c", "sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	go cmd.Wait()
	pidFile := filepath.Join(req.JobDir, "requests", "000007.pid")

	// Wrong start time: someone else's process now has that pid.
	os.WriteFile(pidFile, []byte(fmt.Sprintf("%d 1\n", cmd.Process.Pid)), 0o600)
	if KillOrphan(req.JobDir, 7) {
		t.Fatal("killed a process whose start time does not match")
	}
	if _, ok := procStart(cmd.Process.Pid); !ok {
		t.Fatal("process gone")
	}
	writePidFile(pidFile, cmd.Process.Pid)
	if !KillOrphan(req.JobDir, 7) {
		t.Fatal("orphan not killed")
	}
	waitGone(t, cmd.Process.Pid)
	if KillOrphan(req.JobDir, 7) {
		t.Error("pid file not consumed")
	}
}
