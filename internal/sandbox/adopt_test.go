package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startInDaemon starts spec's call from a stand-in daemon process (this
// test binary, see testDaemon) and SIGKILLs that daemon as soon as the
// call has started: the call is left to its launcher.
func startInDaemon(t *testing.T, spec Spec) {
	t.Helper()
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "LOGIST_SANDBOX_TEST_DAEMON="+string(b))
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if line != "started\n" {
		t.Fatalf("stand-in daemon: %q", line)
	}
}

func shSpec(t *testing.T, script string) Spec {
	d := t.TempDir()
	ws := filepath.Join(d, "job", "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	return Spec{Argv: []string{"/bin/sh", "-c", script}, Dir: ws, Env: []string{"PATH=/usr/bin:/bin"},
		CallDir: filepath.Join(d, "job", "calls", "000001")}
}

// TestAdoptFinishedCall: a call whose launcher finished while the daemon
// was away is read back from its call directory (never re-run), the same
// each time until Forget, and then never again.
func TestAdoptFinishedCall(t *testing.T) {
	layers(t)
	spec := shSpec(t, "echo answer; echo note >&2; exit 7")
	startInDaemon(t, spec)
	waitFile(t, filepath.Join(spec.CallDir, fileResult), "outcome", 20*time.Second)
	ex := &Local{}
	for i := 0; i < 2; i++ {
		c, err := ex.Adopt(spec.CallDir)
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != OutcomeExited || r.ExitCode != 7 || string(r.Stdout) != "answer\n" || string(r.Stderr) != "note\n" {
			t.Fatalf("adopted %+v stdout %q stderr %q", r, r.Stdout, r.Stderr)
		}
		if r.Layer != Probe().Effective(LayerBwrap) && r.Layer != "landlock" {
			t.Errorf("layer %q", r.Layer)
		}
		if !r.Synced {
			t.Error("a result no daemon waited for was not made durable by its launcher")
		}
	}
	if err := Forget(spec.CallDir); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Adopt(spec.CallDir); !errors.Is(err, ErrNoCall) {
		t.Fatalf("after Forget: %v, want ErrNoCall", err)
	}
}

// TestAdoptRunningCall: a restarted daemon waits for a call still
// running and gets its result.
func TestAdoptRunningCall(t *testing.T) {
	layers(t)
	spec := shSpec(t, "sleep 1; echo late answer")
	startInDaemon(t, spec)
	c, err := (&Local{}).Adopt(spec.CallDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(spec.CallDir, fileResult)); err == nil {
		t.Fatal("the call finished before it was adopted; the test proves nothing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if _, err := c.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a short deadline: %v", err)
	}
	cancel()
	r, err := c.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != OutcomeExited || r.ExitCode != 0 || string(r.Stdout) != "late answer\n" {
		t.Fatalf("adopted %+v stdout %q", r, r.Stdout)
	}
}

// TestAdoptRunningCallKill: a restarted daemon can kill an adopted call,
// and nothing the call started survives (setsid'd, double-forked).
func TestAdoptRunningCallKill(t *testing.T) {
	for _, layer := range layers(t) {
		t.Run(string(layer), func(t *testing.T) {
			a := newArena(t, os.Getuid())
			startInDaemon(t, a.spec(layer, "sleeper"))
			waitFile(t, filepath.Join(a.call, fileStdout), "sleeping", 60*time.Second)
			c, err := (&Local{}).Adopt(a.call)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Kill(); err != nil {
				t.Fatal(err)
			}
			r, err := c.Wait(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if r.Outcome != OutcomeKilled {
				t.Errorf("outcome %s, want killed", r.Outcome)
			}
			noSurvivors(t, a.marker, "adopted and killed")
		})
	}
}

// TestLostCall: a launcher killed outright leaves no result: Wait and
// Adopt say ErrLost (the engine re-asks), and under bwrap the sandbox died
// with its launcher (--die-with-parent), survivors included.
func TestLostCall(t *testing.T) {
	layers(t)
	if !Probe().Bwrap.OK {
		t.Skip("SKIP (loud): needs bwrap")
	}
	a := newArena(t, os.Getuid())
	c, err := (&Local{}).Start(a.spec(LayerBwrap, "sleeper"))
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(a.call, fileStdout), "sleeping", 60*time.Second)
	pid, alive, err := readPid(filepath.Join(a.call, fileLauncher))
	if err != nil || !alive {
		t.Fatalf("launcher record: %d %v %v", pid, alive, err)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	if _, err := c.Wait(context.Background()); !errors.Is(err, ErrLost) {
		t.Fatalf("Wait: %v, want ErrLost", err)
	}
	if _, err := (&Local{}).Adopt(a.call); !errors.Is(err, ErrLost) {
		t.Fatalf("Adopt: %v, want ErrLost", err)
	}
	noSurvivors(t, a.marker, "lost call")
}

// TestTamperedOutputRefused: output changed in the call directory after
// the launcher wrote it (or cut by a crash) is not taken as the call's
// answer: the call is lost, and re-asked.
func TestTamperedOutputRefused(t *testing.T) {
	layers(t)
	spec := shSpec(t, "echo genuine")
	if _, err := Run(context.Background(), &Local{}, spec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spec.CallDir, fileStdout), []byte("forged\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := (&Local{}).Adopt(spec.CallDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(context.Background()); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "not what the launcher wrote") {
		t.Fatalf("tampered stdout read back: %v", err)
	}
}

// TestCutResultIsLost: a result.json a crash cut short (written and
// fsync'd with the outputs at once, not renamed into place) makes the
// call lost, not an answer.
func TestCutResultIsLost(t *testing.T) {
	layers(t)
	spec := shSpec(t, "echo genuine")
	if _, err := Run(context.Background(), &Local{}, spec); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(spec.CallDir, fileResult)
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := (&Local{}).Adopt(spec.CallDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(context.Background()); !errors.Is(err, ErrLost) {
		t.Fatalf("cut result: %v, want ErrLost", err)
	}
}

// TestStartRefusesUsedCallDir: a call directory holds one call; starting
// another there (which could take the first one's result) is refused.
func TestStartRefusesUsedCallDir(t *testing.T) {
	layers(t)
	spec := shSpec(t, "true")
	if _, err := Run(context.Background(), &Local{}, spec); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Local{}).Start(spec); !errors.Is(err, ErrCallExists) {
		t.Fatalf("second Start: %v, want ErrCallExists", err)
	}
}
