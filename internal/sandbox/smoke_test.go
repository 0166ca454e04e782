package sandbox

import (
	"context"
	"path/filepath"
	"testing"
	"os"
)

func attacker() bool { return false }

func TestSmoke(t *testing.T) {
	for _, layer := range []Layer{LayerBwrap, LayerLandlock, LayerNone} {
		d := t.TempDir()
		ws := filepath.Join(d, "ws")
		os.Mkdir(ws, 0o700)
		r, err := Run(context.Background(), &Local{}, Spec{Argv: []string{"/bin/sh", "-c", "echo hi; id; pwd; echo $HOME; ls / ; cat /etc/shadow; echo err >&2; exit 3"},
			Dir: ws, Env: []string{"PATH=/usr/bin:/bin"}, CallDir: filepath.Join(d, "call"), Layer: layer})
		if err != nil {
			t.Fatal(layer, err)
		}
		t.Logf("%s: %+v\nstdout=%s\nstderr=%s", layer, *r, r.Stdout, r.Stderr)
	}
}
