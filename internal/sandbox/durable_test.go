package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestDaemonWaits: the launcher's stdin tells whether its daemon still
// waits for the result: a pipe whose writer is open does; a closed one, a
// pipe holding more than the plan, or anything but a pipe does not (the
// launcher then fsyncs the result itself).
func TestDaemonWaits(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !daemonWaits(int(r.Fd())) {
		t.Error("open pipe: daemonWaits false, want true")
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if daemonWaits(int(r.Fd())) {
		t.Error("pipe with unread data: daemonWaits true, want false")
	}
	buf := make([]byte, 1)
	if _, err := r.Read(buf); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if daemonWaits(int(r.Fd())) {
		t.Error("pipe whose writer closed: daemonWaits true, want false")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "plan"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if daemonWaits(int(f.Fd())) {
		t.Error("regular file: daemonWaits true, want false")
	}
}

// TestWaitedResultSyncs: a call its daemon waits for leaves its result
// to the daemon (whose history fsync records the answer); once the daemon
// lets go of the call (Wait given up), the launcher makes it durable.
func TestWaitedResultSyncs(t *testing.T) {
	layers(t)
	ex := &Local{}
	spec := shSpec(t, "echo answer")
	c, err := ex.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "answer\n" || res.Synced {
		t.Fatalf("waited call: stdout %q synced %v, want the answer, not synced by the launcher", res.Stdout, res.Synced)
	}

	spec = shSpec(t, "sleep 1; echo late")
	if c, err = ex.Start(spec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Wait(ctx); err == nil {
		t.Fatal("Wait with a canceled context returned a result")
	}
	if res, err = c.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "late\n" || !res.Synced {
		t.Fatalf("call let go: stdout %q synced %v, want the answer made durable by the launcher", res.Stdout, res.Synced)
	}
}
