package runner

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/logist/logist/internal/agent"
)

// served is a copy of got, read under mu.
func served(mu *sync.Mutex, got *[]string) []string {
	mu.Lock()
	defer mu.Unlock()
	return append([]string(nil), *got...)
}

// queueAt starts a goroutine whose hold enters g at prio and, once in,
// appends name to got and leaves when release is closed. It returns once
// the hold waits at the gate (or is in).
func queueAt(t *testing.T, g *cpuGate, prio int, name string, mu *sync.Mutex, got *[]string, release <-chan struct{}) {
	t.Helper()
	go func() {
		h := &gateHold{g: g}
		h.enter(prio)
		mu.Lock()
		*got = append(*got, name)
		mu.Unlock()
		<-release
		h.leave()
	}()
	synctest.Wait()
}

func TestGateServesByPriorityThenArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newCPUGate(1)
		var mu sync.Mutex
		var got []string
		first := &gateHold{g: g}
		first.enter(prioNext)
		release := make(chan struct{})
		// Arrival order: an end, a next, a start, another next, another start.
		queueAt(t, g, prioEnd, "end", &mu, &got, release)
		queueAt(t, g, prioNext, "next1", &mu, &got, release)
		queueAt(t, g, prioStart, "start1", &mu, &got, release)
		queueAt(t, g, prioNext, "next2", &mu, &got, release)
		queueAt(t, g, prioStart, "start2", &mu, &got, release)
		if g := served(&mu, &got); len(g) != 0 {
			t.Fatalf("%v got in while the one place was held", g)
		}
		first.leave()
		close(release) // each leaves as soon as it is in: one at a time, in the gate's order
		synctest.Wait()
		want := []string{"start1", "start2", "next1", "next2", "end"}
		if s := served(&mu, &got); !slices.Equal(s, want) {
			t.Fatalf("served %v, want %v", s, want)
		}
	})
}

func TestGateTakesBackAPlaceHeldPastItsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newCPUGate(1)
		stuck := &gateHold{g: g}
		stuck.enter(prioEnd) // and never leaves in time: a section waiting on something else
		var mu sync.Mutex
		var got []string
		release := make(chan struct{})
		start := time.Now()
		queueAt(t, g, prioStart, "start", &mu, &got, release)
		if len(served(&mu, &got)) != 0 {
			t.Fatal("a waiter got in at once while the one place was held")
		}
		time.Sleep(gateLease)
		synctest.Wait()
		if len(served(&mu, &got)) != 1 {
			t.Fatalf("no place for the waiter %v after the holder's lease of %v ran out", time.Since(start), gateLease)
		}
		stuck.leave() // late: the place it lost is not freed twice
		g.mu.Lock()
		free := g.free
		g.mu.Unlock()
		if free != 0 {
			t.Fatalf("free places %d after the late leave, want 0 (the waiter holds the only one)", free)
		}
		close(release)
		synctest.Wait()
		g.mu.Lock()
		free = g.free
		g.mu.Unlock()
		if free != 1 {
			t.Fatalf("free places %d once all left, want 1", free)
		}
	})
}

func TestGateServesALongWaiterBeforeAnyPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newCPUGate(1)
		start := time.Now()
		// Starts keep coming, one every 5 ms for 600 ms, each holding the
		// one place 10 ms: some start always waits.
		stop := time.Now().Add(600 * time.Millisecond)
		var wg sync.WaitGroup
		wg.Go(func() {
			for time.Now().Before(stop) {
				wg.Go(func() {
					h := &gateHold{g: g}
					h.enter(prioStart)
					time.Sleep(10 * time.Millisecond)
					h.leave()
				})
				time.Sleep(5 * time.Millisecond)
			}
		})
		time.Sleep(time.Millisecond)
		end := &gateHold{g: g}
		end.enter(prioEnd)
		waited := time.Since(start) - time.Millisecond
		end.leave()
		wg.Wait()
		if waited < gateAging || waited > gateAging+20*time.Millisecond {
			t.Fatalf("the end waited %v behind a stream of starts, want %v to %v", waited, gateAging, gateAging+20*time.Millisecond)
		}
	})
}

// The engine leaves the gate before each agent call and comes back after
// it: a call that holds its place would keep other runs' transactions
// waiting for as long as the agent works.
func TestEngineHoldsNoGatePlaceDuringCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	g := f.Engine.gate
	if g == nil {
		t.Fatal("NewEngine made no gate")
	}
	var mu sync.Mutex
	var held []int
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		g.mu.Lock()
		n := len(g.holders)
		g.mu.Unlock()
		mu.Lock()
		held = append(held, n)
		mu.Unlock()
		return answer("COMPLETED", req.Role+" done"), nil
	})
	f.WriteJob("j", job(okSupervisor(), okSupervisor()))
	if err := f.Engine.Run(context.Background(), "j"); err != nil {
		t.Fatal(err)
	}
	if len(held) != 2 {
		t.Fatalf("%d calls, want 2", len(held))
	}
	for i, n := range held {
		if n != 0 {
			t.Fatalf("call %d: %d places held at the gate during it, want 0", i, n)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.free != gateSize() || len(g.holders) != 0 {
		t.Fatalf("after the run: %d free of %d, %d holders", g.free, gateSize(), len(g.holders))
	}
	if st := f.Load("j").Status; st != "SUCCESS" {
		t.Fatalf("status %s, want SUCCESS", st)
	}
}
