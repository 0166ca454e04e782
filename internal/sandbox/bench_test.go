package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkCall measures what containment adds to one call of /bin/true:
// a bare exec, a bare `bwrap ... true` with the namespaces and mounts
// every call uses, and a full sandboxed call (launcher, sandbox, helper,
// durable result) under each layer. docs/benchmarks.md quotes it.
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
	for _, layer := range append(ls, LayerNone) {
		b.Run("sandbox-"+string(layer), func(b *testing.B) {
			d := b.TempDir()
			ws := filepath.Join(d, "workspace")
			os.Mkdir(ws, 0o700)
			ex := &Local{}
			for i := 0; i < b.N; i++ {
				r, err := Run(context.Background(), ex, Spec{Argv: []string{truePath}, Dir: ws, Env: []string{"PATH=/usr/bin:/bin"},
					CallDir: filepath.Join(d, "calls", fmt.Sprint(i)), Layer: layer})
				if err != nil || r.Outcome != OutcomeExited || r.ExitCode != 0 {
					b.Fatalf("%+v %v", r, err)
				}
			}
		})
	}
}
