package agent

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/logist/logist/internal/sandbox"
)

// fakeSparer is an executor whose calls run until released, recording the
// spares asked of it.
type fakeSparer struct {
	mu      sync.Mutex
	spares  int
	release chan struct{}
}

func (f *fakeSparer) Start(sandbox.Spec) (sandbox.Call, error) { return fakeCall{f.release}, nil }
func (f *fakeSparer) Adopt(string) (sandbox.Call, error)       { return nil, sandbox.ErrNoCall }
func (f *fakeSparer) Spare(sandbox.Spec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.spares++
	return nil
}
func (f *fakeSparer) DropSpare(string) {}
func (f *fakeSparer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spares
}

type fakeCall struct{ release chan struct{} }

func (c fakeCall) Wait(ctx context.Context) (*sandbox.Result, error) {
	select {
	case <-c.release:
		return &sandbox.Result{Outcome: sandbox.OutcomeExited}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
func (c fakeCall) Kill() error { return nil }

// A run's first call (its pickup) gets its program a head start before the
// next call's spare is started; a later call's spare starts at once; a
// first call that ends sooner has its spare started before Run returns.
func TestFirstCallsSpareWaitsForTheHeadStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSparer{release: make(chan struct{})}
		c := &Contained{Exec: f, Mode: sandbox.LayerBwrap, Job: "j", nexts: &nextFiles{}}
		next := func() (ProcSpec, func(), bool) { return ProcSpec{Argv: []string{"a"}}, func() {}, true }
		spec := ProcSpec{Argv: []string{"a"}, Next: next}

		done := make(chan error, 1)
		go func() { _, err := c.Run(context.Background(), spec); done <- err }()
		synctest.Wait()
		if n := f.count(); n != 0 {
			t.Fatalf("%d spares started with the first call's program just started, want 0", n)
		}
		time.Sleep(spareHeadStart)
		synctest.Wait()
		if n := f.count(); n != 1 {
			t.Fatalf("%d spares after the head start, want 1", n)
		}
		close(f.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}

		// A later call of the same run: its spare at once.
		f.release = make(chan struct{})
		go func() { _, err := c.Run(context.Background(), spec); done <- err }()
		synctest.Wait()
		if n := f.count(); n != 2 {
			t.Errorf("%d spares with the second call just started, want 2", n)
		}
		close(f.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}

		// A new run's first call that ends before the head start.
		c.nexts.end("j")
		f.release = make(chan struct{})
		close(f.release)
		if _, err := c.Run(context.Background(), spec); err != nil {
			t.Fatal(err)
		}
		if n := f.count(); n != 3 {
			t.Errorf("%d spares once a quick first call returned, want 3 (started at its end)", n)
		}
	})
}
