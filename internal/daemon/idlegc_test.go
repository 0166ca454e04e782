package daemon

import (
	"runtime"
	"runtime/metrics"
	"testing"
)

func TestGCDue(t *testing.T) {
	for _, c := range []struct {
		goal, live, now uint64
		want            bool
	}{
		{goal: 12 << 20, live: 4 << 20, now: 4 << 20, want: false}, // just collected
		{goal: 12 << 20, live: 4 << 20, now: 9 << 20, want: false}, // 5/8 of the way
		{goal: 12 << 20, live: 4 << 20, now: 10 << 20, want: true}, // 3/4
		{goal: 12 << 20, live: 4 << 20, now: 11 << 20, want: true}, // almost due
		{goal: 4 << 20, live: 4 << 20, now: 11 << 20, want: false}, // no room (GC off, or a limit)
		{goal: 12 << 20, live: 4 << 20, now: 2 << 20, want: false}, // below the live heap
	} {
		if got := gcDue(c.goal, c.live, c.now); got != c.want {
			t.Errorf("gcDue(goal %d, live %d, now %d) = %v, want %v", c.goal, c.live, c.now, got, c.want)
		}
	}
}

func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// sink keeps the garbage of TestCollectWhileIdle reachable until it is
// dropped, so that the runtime does not collect it by itself first.
var sink [][]byte

// An idle daemon collects a heap that is almost due, and leaves one that
// was just collected alone.
func TestCollectWhileIdle(t *testing.T) {
	// Not parallel: it reads the process's GC counters.
	runtime.GC()
	if collectWhileIdle() {
		t.Fatal("an idle collection right after one")
	}
	goal, live, _ := heapNow()
	for {
		_, _, now := heapNow()
		if gcDue(goal, live, now) {
			break
		}
		sink = append(sink, make([]byte, 64<<10))
		if g, _, _ := heapNow(); g != goal {
			t.Skip("the runtime collected while the heap grew (another test's garbage)")
		}
	}
	sink = nil
	before := gcCycles()
	if !collectWhileIdle() {
		t.Fatal("no idle collection of a heap three quarters of the way to its goal")
	}
	waitIdleGC()
	if gcCycles() == before {
		t.Fatal("no collection of a heap three quarters of the way to its goal")
	}
}

// waitIdleGC waits for an idle collection under way to end.
func waitIdleGC() {
	for idleGC.Load() {
		runtime.Gosched()
	}
}
