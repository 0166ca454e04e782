package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	Helper()
	if spec := os.Getenv("LOGIST_SANDBOX_TEST_DAEMON"); spec != "" {
		os.Exit(testDaemon(spec))
	}
	if os.Getenv("LOGIST_SANDBOX_TEST_SWEEP") != "" {
		os.Exit(testSweep())
	}
	code := m.Run()
	if attackerDir != "" {
		_ = os.RemoveAll(attackerDir) // a leftover in the temp folder fails no test
	}
	os.Exit(code)
}

// testDaemon stands in for a daemon that starts a call and then dies
// (the test SIGKILLs it): it starts the call described by spec and says
// "started".
func testDaemon(spec string) int {
	var s Spec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Println(err)
		return 2
	}
	if _, err := (&Local{}).Start(s); err != nil {
		fmt.Println(err)
		return 2
	}
	fmt.Println("started")
	time.Sleep(time.Hour)
	return 0
}

var (
	attackerOnce sync.Once
	attackerDir  string
	attackerBin  string
	attackerErr  error
)

// attacker builds testdata/attacker (without -race, whose shadow memory
// no memory limit would let start) once per test binary.
func attacker(t testing.TB) string {
	attackerOnce.Do(func() {
		attackerDir, attackerErr = os.MkdirTemp("", "logist-attacker-")
		if attackerErr != nil {
			return
		}
		attackerBin = filepath.Join(attackerDir, "attacker")
		cmd := exec.Command("go", "build", "-o", attackerBin, "./testdata/attacker")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			attackerErr = fmt.Errorf("build attacker: %v: %s", err, out)
		}
	})
	if attackerErr != nil {
		t.Fatal(attackerErr)
	}
	return attackerBin
}

// layers are the layers this host runs. Under CI=true every layer must
// work (the escape suite may not skip); elsewhere a missing one skips
// loudly.
func layers(t *testing.T) []Layer {
	st := Probe()
	var out []Layer
	for _, x := range []struct {
		l Layer
		c Check
	}{{LayerBwrap, st.Bwrap}, {LayerLandlock, st.Landlock}} {
		if x.c.OK {
			out = append(out, x.l)
			continue
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("layer %s unavailable under CI=true: %s", x.l, x.c.Why)
		}
		t.Logf("SKIP (loud): layer %s unavailable on this host: %s", x.l, x.c.Why)
	}
	if len(out) == 0 {
		t.Skip("SKIP (loud): no sandbox layer works on this host")
	}
	return out
}

// survivors lists the processes whose command line has marker, or
// "attacker-"+marker, as one of its arguments: the attacker, its
// survivors and the sandboxes that run them. Only a whole argument
// counts: while an attack of the suite's unsandboxed run has left
// /etc/logist-escape-MARKER on the host, every sandbox any Logist process
// starts names that path inside its Landlock configuration argument, and
// killing those (another package's agents, as a CI run showed) is not
// this suite's business.
func survivors(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && slices.ContainsFunc(strings.Split(string(b), "\x00"), func(arg string) bool {
			return arg == marker || arg == "attacker-"+marker
		}) {
			if st, ok := procStart(pid); ok && st != "" {
				out = append(out, pid)
			}
		}
	}
	return out
}

// noSurvivors fails the test if a process named by marker still runs a
// moment after the call ended, and kills what it finds.
func noSurvivors(t *testing.T, marker, what string) {
	t.Helper()
	var left []int
	for i := 0; i < 20; i++ {
		if left = survivors(marker); len(left) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, pid := range left {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	t.Errorf("%s: %d processes survived the call: %v", what, len(left), left)
}

// waitFile waits until p exists and holds want.
func waitFile(t *testing.T, p, want string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), want) {
			return
		}
		select {
		case <-ctx.Done():
			// The call folder's other files say why (a program that
			// failed to start, a sandbox that refused it).
			b, _ := os.ReadFile(p)
			var more strings.Builder
			ents, _ := os.ReadDir(filepath.Dir(p))
			for _, e := range ents {
				if q := filepath.Join(filepath.Dir(p), e.Name()); q != p && e.Type().IsRegular() {
					c, _ := os.ReadFile(q)
					fmt.Fprintf(&more, "\n  %s: %q", e.Name(), c)
				}
			}
			t.Fatalf("%s never held %q in %s (holds %q)%s", p, want, d, b, more.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestSurvivorsMatchWholeArguments: the suite's sweep of leftover
// processes never takes a process that merely names the marker inside a
// longer argument (another package's sandbox whose Landlock configuration
// lists /etc/logist-escape-MARKER), only one that has it as an argument.
func TestSurvivorsMatchWholeArguments(t *testing.T) {
	marker := "LOGISTMARK" + rnd()
	start := func(arg0 string) *exec.Cmd {
		cmd := exec.Command("/bin/sh", "-c", "sleep 30", arg0)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	foreign := start(`{"ro":["/etc/logist-escape-` + marker + `"]}`)
	own := start("attacker-" + marker)
	var got []int
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Contains(got, own.Process.Pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		got = survivors(marker)
	}
	if !slices.Contains(got, own.Process.Pid) || slices.Contains(got, foreign.Process.Pid) {
		t.Fatalf("survivors %v: want %d (attacker-MARKER) and never %d (a longer argument naming it)", got, own.Process.Pid, foreign.Process.Pid)
	}
}
