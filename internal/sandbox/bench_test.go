package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCall measures what containment adds to one call of /bin/true:
// a bare exec, a bare `bwrap ... true` with the namespaces and mounts
// every call uses, and a full sandboxed call (launcher, sandbox, helper,
// result file, left to the waiting caller to make durable) under each
// layer. docs/benchmarks.md quotes it (scenario 8).
func BenchmarkCall(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("bare-exec", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := exec.Command(truePath).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	st := Probe()
	if st.Bwrap.OK {
		b.Run("bare-bwrap", func(b *testing.B) {
			args := append(nsArgs(NetNone, false), systemArgs(currentView())...)
			args = append(args, "--tmpfs", "/tmp", "--", truePath)
			for i := 0; i < b.N; i++ {
				if err := exec.Command(st.BwrapPath, args...).Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	var ls []Layer
	if st.Bwrap.OK {
		ls = append(ls, LayerBwrap)
	}
	if st.Landlock.OK {
		ls = append(ls, LayerLandlock)
	}
	// The helpers are this test binary, logistd without a logist-sandbox
	// beside it (its package inits make each of its two starts per call
	// dearer), or logist-sandbox as deployed.
	logistd := filepath.Join(b.TempDir(), "logistd")
	if out, err := exec.Command("go", "build", "-o", logistd, "../../cmd/logistd").CombinedOutput(); err != nil {
		b.Fatalf("build logistd: %v: %s", err, out)
	}
	for _, c := range []struct {
		name, self string
		layers     []Layer
	}{{"", "", append(ls, LayerNone)}, {"-logistd", logistd, ls[:1]}, {"-" + HelperName, helperBinary(b), ls[:1]}} {
		for _, layer := range c.layers {
			b.Run("sandbox-"+string(layer)+c.name, func(b *testing.B) {
				benchSandbox(b, &Local{Self: c.self}, layer, truePath, 0)
			})
		}
	}
	if st.Bwrap.OK {
		// A call served by a spare sandbox (spare.go) given 200 ms to get
		// ready, as the call before it would (an agent that runs that
		// long): the wall time is the call's from its plan on; the CPU
		// counts the spare's start too.
		b.Run("sandbox-bwrap-"+HelperName+"-spare", func(b *testing.B) {
			benchSandbox(b, &Local{Self: helperBinary(b)}, LayerBwrap, truePath, 200*time.Millisecond)
		})
	}
}

func benchSandbox(b *testing.B, ex *Local, layer Layer, truePath string, spare time.Duration) {
	d := b.TempDir()
	ws := filepath.Join(d, "workspace")
	if err := os.Mkdir(ws, 0o700); err != nil {
		b.Fatal(err)
	}
	// CPU is less noisy than wall time on a loaded machine: the children's
	// (every launcher waits for its sandbox, and is waited for).
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &before)
	for i := 0; i < b.N; i++ {
		spec := Spec{Argv: []string{truePath}, Dir: ws, Env: []string{"PATH=/usr/bin:/bin"},
			CallDir: filepath.Join(d, "calls", fmt.Sprint(i)), Layer: layer}
		if spare > 0 {
			b.StopTimer()
			spec.Owner = "bench"
			if err := ex.Spare(spec); err != nil {
				b.Fatal(err)
			}
			time.Sleep(spare)
			b.StartTimer()
		}
		r, err := Run(context.Background(), ex, spec)
		if err != nil || r.Outcome != OutcomeExited || r.ExitCode != 0 {
			b.Fatalf("%+v %v", r, err)
		}
	}
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}
