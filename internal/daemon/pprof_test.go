package daemon

import (
	"context"
	"testing"
	"time"
)

// TestPprofOnlyWithFlag: /debug/pprof/ answers on the --listen server only
// when --pprof is given.
func TestPprofOnlyWithFlag(t *testing.T) {
	for _, on := range []bool{false, true} {
		dir := t.TempDir()
		addr := freeAddr(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, Options{JobsDir: dir, MaxParallel: 1, Listen: addr, Grace: time.Second, Pprof: on}, discard())
		}()
		waitFor(t, "readyz", func() bool { code, _ := get(t, "http://"+addr+"/readyz"); return code == 200 })
		want := 404
		if on {
			want = 200
		}
		if code, body := get(t, "http://"+addr+"/debug/pprof/"); code != want {
			t.Errorf("pprof=%v: /debug/pprof/ = %d, want %d (%.100q)", on, code, want, body)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
