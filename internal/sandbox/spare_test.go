package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startTestSpare starts the owner's spare for spec and returns its
// launcher's pid once its sandbox waits for its program.
func startTestSpare(t *testing.T, ex *Local, spec Spec) int {
	t.Helper()
	if err := ex.Spare(spec); err != nil {
		t.Fatal(err)
	}
	ex.spareMu.Lock()
	s := ex.spares[spec.Owner]
	ex.spareMu.Unlock()
	if s == nil {
		t.Fatal("no spare kept")
	}
	return s.la.cmd.Process.Pid
}

// sandboxesOf lists the running bwrap processes that bind dir (a test's
// unique workspace): the spare's sandbox, while it runs.
func sandboxesOf(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if strings.HasSuffix(args[0], "bwrap") && strings.Contains(string(b), "\x00"+dir+"\x00") {
			var pid int
			if _, ok := procStart(atoi(e.Name())); ok {
				pid = atoi(e.Name())
				out = append(out, pid)
			}
		}
	}
	return out
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func bwrapOnly(t *testing.T) {
	t.Helper()
	for _, l := range layers(t) {
		if l == LayerBwrap {
			return
		}
	}
	t.Skip("SKIP (loud): bwrap unavailable on this host")
}

// TestSpareServesTheCall: a call whose plan makes the sandbox its owner's
// spare was started for runs in that spare, with its own argv,
// environment and stdin (not the prediction's), /dev/null as stdin when
// it has none, and the spare is gone after (it serves one call).
func TestSpareServesTheCall(t *testing.T) {
	bwrapOnly(t)
	ex := &Local{}
	spec := shSpec(t, `echo "ran $FOO"; cat; readlink /proc/self/fd/0`)
	spec.Layer, spec.Owner = LayerBwrap, "job-a"
	for i, stdin := range [][]byte{[]byte("fed\n"), nil} {
		predicted := spec
		predicted.Argv, predicted.Env = []string{"/bin/false"}, []string{"FOO=predicted"}
		pid := startTestSpare(t, ex, predicted)
		call := spec
		call.CallDir = spec.CallDir + "-" + string(rune('a'+i))
		call.Env = append(call.Env, "FOO=real")
		call.Stdin = stdin
		r, err := Run(context.Background(), ex, call)
		if err != nil || r.Outcome != OutcomeExited || r.ExitCode != 0 {
			t.Fatalf("call %d: %+v %v", i, r, err)
		}
		want := "ran real\nfed\npipe:"
		if stdin == nil {
			want = "ran real\n/dev/null\n"
		}
		if !strings.HasPrefix(string(r.Stdout), want) {
			t.Errorf("call %d printed %q, want it to start %q", i, r.Stdout, want)
		}
		if got, _, _ := readPid(filepath.Join(call.CallDir, fileLauncher)); got != pid {
			t.Errorf("call %d ran under launcher %d, not its spare %d", i, got, pid)
		}
		if n := len(ex.spares); n != 0 {
			t.Errorf("call %d: %d spares left after the call that used one", i, n)
		}
	}
}

// TestSpareOfAnotherSandboxIsDiscarded: a spare whose sandbox is not the
// call's (another bound path; another owner's) is not used: the call runs
// in a sandbox of its own, and the spare ends having run nothing.
func TestSpareOfAnotherSandboxIsDiscarded(t *testing.T) {
	bwrapOnly(t)
	ex := &Local{}
	spec := shSpec(t, "echo ran")
	spec.Layer, spec.Owner = LayerBwrap, "job-b"
	extra := t.TempDir()
	for _, tc := range []struct {
		name string
		edit func(s *Spec)
	}{
		{"another path", func(s *Spec) { s.ReadOnly = []string{extra} }},
		{"another owner", func(s *Spec) { s.Owner = "job-c" }},
	} {
		predicted := spec
		tc.edit(&predicted)
		pid := startTestSpare(t, ex, predicted)
		ex.spareMu.Lock()
		la := ex.spares[predicted.Owner].la
		ex.spareMu.Unlock()
		call := spec
		call.CallDir = spec.CallDir + "-" + strings.ReplaceAll(tc.name, " ", "-")
		r, err := Run(context.Background(), ex, call)
		if err != nil || r.Outcome != OutcomeExited || string(r.Stdout) != "ran\n" {
			t.Fatalf("%s: %+v %v", tc.name, r, err)
		}
		if got, _, _ := readPid(filepath.Join(call.CallDir, fileLauncher)); got == pid {
			t.Errorf("%s: the call ran in a spare made for another sandbox", tc.name)
		}
		ex.DropSpare(predicted.Owner)
		select {
		case <-la.done:
		case <-time.After(time.Minute):
			t.Fatalf("%s: the discarded spare did not exit", tc.name)
		}
		if code := la.cmd.ProcessState.ExitCode(); code != 1 {
			t.Errorf("%s: discarded spare exited %d, want 1 (nothing run)", tc.name, code)
		}
	}
}

// TestSpareNeverLeaks: a spare whose owner's job ends (DropSpare), or
// whose daemon is gone (its plan pipe closed), kills its sandbox, which
// was running, and leaves nothing behind on disk.
func TestSpareNeverLeaks(t *testing.T) {
	bwrapOnly(t)
	for _, how := range []string{"dropped", "daemon gone"} {
		ex := &Local{}
		spec := shSpec(t, "echo ran")
		spec.Layer, spec.Owner = LayerBwrap, "job-d"
		startTestSpare(t, ex, spec)
		ex.spareMu.Lock()
		s := ex.spares[spec.Owner]
		ex.spareMu.Unlock()
		deadline := time.Now().Add(time.Minute)
		for len(sandboxesOf(spec.Dir)) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the spare's sandbox never started", how)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if how == "dropped" {
			ex.DropSpare(spec.Owner)
		} else {
			s.drop() // what the daemon's exit does to the pipe
		}
		select {
		case <-s.la.done:
		case <-time.After(time.Minute):
			t.Fatalf("%s: the spare's launcher did not exit", how)
		}
		for i := 0; len(sandboxesOf(spec.Dir)) > 0; i++ {
			if i == 100 {
				t.Fatalf("%s: the spare's sandbox outlived its launcher: %v", how, sandboxesOf(spec.Dir))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := os.Stat(filepath.Dir(spec.CallDir)); err == nil {
			t.Errorf("%s: a spare made a call folder", how)
		}
	}
}

// TestSpareMissesStopSpares: an owner whose calls keep making another
// sandbox than predicted gets no more spares (each costs a sandbox's
// start) until its run ends (DropSpare); one used resets the count.
func TestSpareMissesStopSpares(t *testing.T) {
	bwrapOnly(t)
	ex := &Local{}
	spec := shSpec(t, "echo ran")
	spec.Layer, spec.Owner = LayerBwrap, "job-e"
	predicted := spec
	predicted.ReadOnly = []string{t.TempDir()}
	kept := func() bool {
		ex.spareMu.Lock()
		defer ex.spareMu.Unlock()
		return ex.spares[spec.Owner] != nil
	}
	for i := 0; i <= spareMisses; i++ {
		if err := ex.Spare(predicted); err != nil {
			t.Fatal(err)
		}
		if got, want := kept(), i < spareMisses; got != want {
			t.Fatalf("after %d misses: a spare kept = %v, want %v", i, got, want)
		}
		call := spec
		call.CallDir = spec.CallDir + "-" + string(rune('a'+i))
		if r, err := Run(context.Background(), ex, call); err != nil || string(r.Stdout) != "ran\n" {
			t.Fatalf("call %d: %+v %v", i, r, err)
		}
	}
	ex.DropSpare(spec.Owner)
	if err := ex.Spare(spec); err != nil || !kept() {
		t.Fatalf("after DropSpare: no spare (%v)", err)
	}
	ex.DropSpare(spec.Owner)
}
