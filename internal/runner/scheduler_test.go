package runner

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/testkit"
)

// gauge counts calls in flight and remembers the most seen at once.
type gauge struct{ cur, peak atomic.Int32 }

func (g *gauge) enter() {
	n := g.cur.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (g *gauge) leave() { g.cur.Add(-1) }

func sleepOrDone(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func newScheduler(t *testing.T, f *fixture, n int) *Scheduler {
	t.Helper()
	s := NewScheduler(context.Background(), f.Engine, n, testkit.Logger())
	t.Cleanup(func() { s.Stop(ErrShutdown) })
	return s
}

func waitIdle(t *testing.T, s *Scheduler, d time.Duration) {
	t.Helper()
	select {
	case <-s.Idle():
	case <-time.After(d):
		t.Fatalf("scheduler not idle after %s (%d running)", d, s.Running())
	}
}

func TestSchedulerBoundsParallelCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := make([]string, 6)
	for i := range ids {
		ids[i] = fmt.Sprintf("job-%d", i)
		f.WriteJob(ids[i], job(okSupervisor(), okSupervisor()))
	}
	var all gauge
	var total atomic.Int32
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		all.enter()
		defer all.leave()
		total.Add(1)
		if err := sleepOrDone(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
		return answer("COMPLETED", req.Role+" of "+req.JobID+" done"), nil
	})
	s := newScheduler(t, f, 2)
	for _, id := range ids {
		s.Nudge(id)
	}
	if r := s.Running(); r != 6 {
		t.Errorf("Running() = %d right after nudging 6 jobs, want 6 (queued runs count)", r)
	}
	waitIdle(t, s, 20*time.Second)

	if p := all.peak.Load(); p != 2 {
		t.Errorf("peak concurrent calls = %d, want 2 (maxParallel)", p)
	}
	if n := total.Load(); n != 12 {
		t.Errorf("%d calls, want 12", n)
	}
	for _, id := range ids {
		if m := f.Load(id); m.Status != lifecycle.Success {
			t.Errorf("%s is %s", id, m.Status)
		}
	}
}

func TestSchedulerNeverRunsAJobTwice(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", job(okSupervisor(), okSupervisor()))
	f.WriteJob("k", job(okSupervisor(), okSupervisor()))
	gauges := map[string]*gauge{"j": {}, "k": {}}
	var calls sync.Map // job -> *atomic.Int32
	for id := range gauges {
		calls.Store(id, new(atomic.Int32))
	}
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		g := gauges[req.JobID]
		g.enter()
		defer g.leave()
		c, _ := calls.Load(req.JobID)
		n := c.(*atomic.Int32).Add(1)
		if err := sleepOrDone(ctx, 30*time.Millisecond); err != nil {
			return nil, err
		}
		// The worker retries twice before completing: 4 calls per job.
		if req.Role == "worker" && n <= 2 {
			return answer("RETRY", "again"), nil
		}
		return answer("COMPLETED", "done"), nil
	})
	s := newScheduler(t, f, 4)
	var wg sync.WaitGroup
	stop := time.Now().Add(400 * time.Millisecond)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := []string{"j", "k"}[i%2]
			for time.Now().Before(stop) {
				s.Nudge(id)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	testkit.WaitFor(t, "both jobs to finish", 20*time.Second, func() bool {
		return f.Load("j").Status == lifecycle.Success && f.Load("k").Status == lifecycle.Success
	})
	waitIdle(t, s, 10*time.Second)

	for id, g := range gauges {
		if p := g.peak.Load(); p != 1 {
			t.Errorf("job %s had %d calls in flight at once", id, p)
		}
		c, _ := calls.Load(id)
		if n := c.(*atomic.Int32).Load(); n != 4 {
			t.Errorf("job %s: %d calls, want 4", id, n)
		}
		recs := f.Records(id)
		seen := map[int]int{}
		for _, r := range testkit.OfType(recs, history.TypeResponse) {
			seen[*r.Interaction]++
		}
		if len(seen) != 4 {
			t.Errorf("job %s: responses %v", id, seen)
		}
		for in, n := range seen {
			if n != 1 {
				t.Errorf("job %s: interaction %d answered %d times", id, in, n)
			}
		}
		if n := len(testkit.OfType(recs, history.TypeIntent)); n != 4 {
			t.Errorf("job %s: %d intents", id, n)
		}
	}
}

func TestSchedulerStopInterruptsCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", job(okSupervisor(), okSupervisor()))
	inCall := make(chan struct{}, 1)
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		inCall <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	s := NewScheduler(context.Background(), f.Engine, 1, testkit.Logger())
	s.Nudge("j")
	select {
	case <-inCall:
	case <-time.After(10 * time.Second):
		t.Fatal("agent never called")
	}
	stopped := make(chan struct{})
	go func() { s.Stop(ErrShutdown); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return")
	}
	recs := f.Records("j")
	if n := len(testkit.OfType(recs, history.TypeResponse)); n != 0 {
		t.Errorf("%d responses after shutdown, want none", n)
	}
	errs := testkit.OfType(recs, history.TypeError)
	if len(errs) != 1 || errs[0].Error.Code != codes.AgentInterrupted {
		t.Errorf("errors = %+v", errs)
	}
	if m := f.Load("j"); m.Status != lifecycle.Running {
		t.Errorf("status %s, want RUNNING (resumed by the next daemon)", m.Status)
	}
	// A stopped scheduler takes no new work.
	s.Nudge("j")
	if s.Running() != 0 {
		t.Errorf("stopped scheduler started a run")
	}
}

// endGate is an observer that holds a job at its move to SUCCESS (in the
// transaction that records its end, before the commit) until let go.
type endGate struct {
	jobtx.Nop
	reached chan string
	mu      sync.Mutex
	gates   map[string]chan struct{}
}

func newEndGate(ids ...string) *endGate {
	g := &endGate{reached: make(chan string, len(ids)), gates: map[string]chan struct{}{}}
	for _, id := range ids {
		g.gates[id] = make(chan struct{})
	}
	return g
}

func (g *endGate) JobStatus(id string, _, to lifecycle.Status) {
	g.mu.Lock()
	gate := g.gates[id]
	g.mu.Unlock()
	if gate == nil || to != lifecycle.Success {
		return
	}
	g.reached <- id
	<-gate
}

func (g *endGate) open(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gate := g.gates[id]; gate != nil {
		close(gate)
		delete(g.gates, id)
	}
}

// openAll lets every job go (a failed test's cleanup, before Stop).
func (g *endGate) openAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, gate := range g.gates {
		close(gate)
		delete(g.gates, id)
	}
}

// A job past its last agent call gives its place back before recording its
// end: with --max-parallel 1, the next job's agent runs while the first
// job's end is still being committed (it used to wait for it).
func TestSchedulerStartsNextJobBesideAnEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, id := range []string{"a", "b", "c"} {
		f.WriteJob(id, job(okSupervisor(), okSupervisor()))
	}
	gate := newEndGate("a", "b")
	f.Engine.Env.Obs = gate
	called := make(chan string, 16)
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		called <- req.JobID + " " + req.Role
		return answer("COMPLETED", req.Role+" done"), nil
	})
	s := newScheduler(t, f, 1)
	t.Cleanup(gate.openAll) // before newScheduler's Stop, which waits for the runs
	s.Nudge("a")
	waitFor := func(what string, ch <-chan string, want string) {
		t.Helper()
		for {
			select {
			case got := <-ch:
				if got == want {
					return
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no %s %q within 30 s", what, want)
			}
		}
	}
	waitFor("end of", gate.reached, "a")
	s.Nudge("b")
	s.Nudge("c")
	// a is held before its end's commit; b's agents run all the same.
	waitFor("call of", called, "b supervisor")
	waitFor("end of", gate.reached, "b")
	// b found the places of jobs ending all taken (a's): it kept its own,
	// so c waits, and at most two jobs are open.
	if len(s.sem) != 1 || len(s.ending) != 1 {
		t.Errorf("places taken: %d of sem, %d of ending; want 1 and 1", len(s.sem), len(s.ending))
	}
	select {
	case got := <-called:
		t.Errorf("call %q while both places were taken", got)
	default:
	}
	gate.open("a")
	gate.open("b")
	waitIdle(t, s, 30*time.Second)
	for _, id := range []string{"a", "b", "c"} {
		if m := f.Load(id); m.Status != lifecycle.Success {
			t.Errorf("%s is %s, want SUCCESS", id, m.Status)
		}
	}
	if len(s.sem) != 0 || len(s.ending) != 0 {
		t.Errorf("places still taken when idle: %d of sem, %d of ending", len(s.sem), len(s.ending))
	}
}

// OnRun hears each run begin once, before it waits for a slot: a job nudged
// while the only slot is taken is heard at once, and called only later.
func TestSchedulerOnRunBeforeTheSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, id := range []string{"a", "b"} {
		f.WriteJob(id, job(okSupervisor(), okSupervisor()))
	}
	hold := make(chan struct{})
	called := make(chan string, 8)
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		called <- req.JobID
		if req.JobID == "a" {
			<-hold
		}
		return answer("COMPLETED", req.Role+" done"), nil
	})
	s := newScheduler(t, f, 1)
	heard := make(chan string, 8)
	s.OnRun = func(id string) { heard <- id }
	t.Cleanup(func() {
		select {
		case <-hold:
		default:
			close(hold)
		}
	})
	next := func(what string, ch <-chan string) string {
		t.Helper()
		select {
		case got := <-ch:
			return got
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s within 30 s", what)
			return ""
		}
	}
	s.Nudge("a")
	if got := next("run begun", heard); got != "a" {
		t.Fatalf("heard %q begin, want a", got)
	}
	if got := next("call", called); got != "a" {
		t.Fatalf("call of %q, want a", got)
	}
	s.Nudge("b") // a holds the slot
	if got := next("run begun", heard); got != "b" {
		t.Fatalf("heard %q begin, want b", got)
	}
	select {
	case got := <-called:
		t.Fatalf("call of %q while a held the only slot", got)
	default:
	}
	close(hold)
	waitIdle(t, s, 30*time.Second)
	if len(heard) != 0 {
		t.Errorf("%d more runs heard, want none", len(heard))
	}
}

// OnIdle is heard once the last running job has ended, not when one of
// several ends (the daemon collects garbage then: no pickup is under way).
func TestSchedulerOnIdleAfterTheLastRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, id := range []string{"a", "b"} {
		f.WriteJob(id, job(okSupervisor(), okSupervisor()))
	}
	hold := make(chan struct{})
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		if req.JobID == "b" {
			<-hold
		}
		return answer("COMPLETED", req.Role+" done"), nil
	})
	s := newScheduler(t, f, 2)
	var released atomic.Bool
	idle := make(chan bool, 8)
	s.OnIdle = func() { idle <- released.Load() }
	ended := make(chan string, 8)
	s.OnEnd = func(id string) { ended <- id }
	t.Cleanup(func() {
		if released.CompareAndSwap(false, true) {
			close(hold)
		}
	})
	s.Nudge("b")
	s.Nudge("a")
	select {
	case id := <-ended:
		if id != "a" {
			t.Fatalf("%s ended first, want a (b is held)", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a did not end within 30 s")
	}
	for deadline := time.Now().Add(30 * time.Second); s.Running() != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("%d running after a ended, want 1", s.Running())
		}
		time.Sleep(time.Millisecond)
	}
	released.Store(true)
	close(hold)
	waitIdle(t, s, 30*time.Second)
	select {
	case afterB := <-idle:
		if !afterB {
			t.Fatal("OnIdle heard while b still ran")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("OnIdle not heard after the last run ended")
	}
	if n := len(idle); n != 0 {
		t.Errorf("OnIdle heard %d more times, want once", n)
	}
}
