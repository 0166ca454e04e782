package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPrefork: with Prefork the launcher of a call is the spare started
// after the previous call (so a call does not wait for a launcher's
// start), each call still runs once with its own log, and a spare whose
// daemon lets go of it (a daemon that died) exits having run nothing.
func TestPrefork(t *testing.T) {
	for _, layer := range append(layers(t), LayerNone) {
		ex := &Local{Prefork: true}
		base := shSpec(t, "echo ran")
		base.Layer = layer
		for i := 0; i < 3; i++ {
			spare := 0
			if i > 0 {
				// The spare started after the previous call, once it is there.
				deadline := time.Now().Add(time.Minute)
				for spare == 0 && time.Now().Before(deadline) {
					ex.spareMu.Lock()
					if ex.spare != nil {
						spare = ex.spare.cmd.Process.Pid
					}
					ex.spareMu.Unlock()
					time.Sleep(5 * time.Millisecond)
				}
				if spare == 0 {
					t.Fatalf("%s: no spare launcher after call %d", layer, i)
				}
			}
			spec := base
			spec.CallDir = fmt.Sprintf("%s-%d", base.CallDir, i)
			r, err := Run(context.Background(), ex, spec)
			if err != nil || r.Outcome != OutcomeExited || string(r.Stdout) != "ran\n" {
				t.Fatalf("%s: call %d: %+v %v", layer, i, r, err)
			}
			pid, _, err := readPid(filepath.Join(spec.CallDir, fileLauncher))
			if err != nil {
				t.Fatal(err)
			}
			if spare != 0 && pid != spare {
				t.Errorf("%s: call %d ran under launcher %d, not the spare %d", layer, i, pid, spare)
			}
			if _, err := os.Stat(filepath.Join(spec.CallDir, fileLog)); err != nil {
				t.Errorf("%s: call %d: no launcher log: %v", layer, i, err)
			}
		}
		ex.spareMu.Lock()
		la := ex.spare
		ex.spare = nil
		ex.spareMu.Unlock()
		if la == nil {
			continue // not refilled yet: the next check needs one
		}
		wd, _ := os.Getwd()
		before, _ := os.ReadDir(wd)
		la.in.Close()
		select {
		case <-la.done:
		case <-time.After(time.Minute):
			t.Fatalf("%s: a spare without its daemon did not exit", layer)
		}
		if code := la.cmd.ProcessState.ExitCode(); code != 1 {
			t.Errorf("%s: spare without a plan exited %d, want 1 (nothing run)", layer, code)
		}
		after, _ := os.ReadDir(wd)
		if len(after) != len(before) {
			t.Errorf("%s: a spare without a plan wrote in the working folder: %v", layer, names(after))
		}
	}
}

func names(es []os.DirEntry) string {
	var n []string
	for _, e := range es {
		n = append(n, e.Name())
	}
	return strings.Join(n, " ")
}
