package runner

import (
	"runtime"
	"sync"
	"time"
)

// The CPU gate: the engine's work between two waits (a transaction: its
// checks, encoding, signing, writes and fsync) passes a gate that lets a
// few sections run at once and hands the next place out by what waits on
// the section, not by who came first.
//
// Why: jobs started together end together. When a wave of agents ends
// within milliseconds (scenario 6 of the bench: 200 runs at once), some
// hundreds of sections want the two CPUs together, and Go's scheduler
// shares the CPUs among all of them, so every one of them finishes late —
// among them the next jobs' first transactions, whose agents wait, behind
// the ends of runs that have given their slot back and whose records no
// agent waits for. Through the gate a run's first transaction comes before
// a call's outcome and next intent, which come before a run's end; within
// a priority, first come first served.
//
// The gate must never hold a run up for long whatever a section does: a
// section keeps its place at most gateLease (a section that waits on
// something else — PostgreSQL in cluster mode, a git command at a run's
// end, a slow disk — loses its place to the next waiter and goes on
// without one), and a waiter that has waited gateAging goes before any
// priority, so that a steady stream of starts cannot keep ends waiting.
// Agent calls never hold a place: the engine leaves the gate before each
// call and comes back after it.
const (
	gateLease = 50 * time.Millisecond
	gateAging = 250 * time.Millisecond
)

// Priorities at the gate, first served first.
const (
	prioStart = iota // a run's first transaction: its first agent waits for it
	prioNext         // a call's outcome and the next intent: the next agent waits
	prioEnd          // after a run's last call (its slot given back): no agent waits
	// prioAhead is the files of a job waiting for a slot, made ahead of
	// its start (ahead.go). It gets a place only while nobody holds or
	// waits for one (the calm between waves), never by age: nothing
	// waits for it, and it must never delay the others.
	prioAhead
	nPrio
)

// gateSize is the places of a gate for this process: a few per CPU, so
// that a section waiting on its fsync leaves the CPU to another.
func gateSize() int { return 4 * runtime.GOMAXPROCS(0) }

type cpuGate struct {
	now func() time.Time

	mu      sync.Mutex
	free    int
	waiting [nPrio][]*gateHold
	holders map[*gateHold]struct{}
}

func newCPUGate(size int) *cpuGate {
	return &cpuGate{now: time.Now, free: size, holders: map[*gateHold]struct{}{}}
}

// gateHold is one run's place at the gate: held between enter and leave.
// A run uses its own, from one goroutine at a time.
type gateHold struct {
	g *cpuGate
	// in: between enter and leave (whether or not the place was since
	// taken back).
	in bool

	// Under g.mu:
	since time.Time     // when it began to wait, then when it got a place
	ready chan struct{} // closed when a place is given to it
	has   bool          // it holds a place now
}

// enter waits for a place for a section of priority prio. A hold already
// in keeps its place.
func (h *gateHold) enter(prio int) {
	if h == nil || h.g == nil || h.in {
		return
	}
	h.in = true
	g := h.g
	g.mu.Lock()
	g.reclaim()
	h.since = g.now()
	if g.free > 0 && g.mayPass(prio) {
		g.give(h)
		g.mu.Unlock()
		return
	}
	h.ready = make(chan struct{})
	g.waiting[prio] = append(g.waiting[prio], h)
	g.mu.Unlock()
	t := time.NewTimer(gateLease)
	defer t.Stop()
	for {
		select {
		case <-h.ready:
			return
		case <-t.C:
			// Places held past their lease are free again: no holder's
			// leave may come to hand them on.
			g.mu.Lock()
			g.reclaim()
			g.handOut()
			g.mu.Unlock()
			t.Reset(gateLease)
		}
	}
}

// leave gives the place back, if the hold still has it.
func (h *gateHold) leave() {
	if h == nil || h.g == nil || !h.in {
		return
	}
	h.in = false
	g := h.g
	g.mu.Lock()
	if h.has {
		h.has = false
		delete(g.holders, h)
		g.free++
		g.handOut()
	}
	g.mu.Unlock()
}

// give makes h a holder of one of the free places (g.mu held).
func (g *cpuGate) give(h *gateHold) {
	g.free--
	h.has = true
	h.since = g.now()
	g.holders[h] = struct{}{}
}

// reclaim frees the places held longer than gateLease (g.mu held).
func (g *cpuGate) reclaim() {
	if len(g.holders) == 0 {
		return
	}
	now := g.now()
	for h := range g.holders {
		if now.Sub(h.since) >= gateLease {
			h.has = false
			delete(g.holders, h)
			g.free++
		}
	}
}

// mayPass says whether a section of priority prio may take a free place
// at once: nobody waits who would go before it or beside it (a waiter for
// prioAhead goes after everyone), and for prioAhead, nobody holds one
// either (g.mu held).
func (g *cpuGate) mayPass(prio int) bool {
	for p, q := range g.waiting {
		if len(q) > 0 && (p != prioAhead || prio == prioAhead) {
			return false
		}
	}
	return prio != prioAhead || len(g.holders) == 0
}

// handOut gives the free places to the waiters: by priority, except that
// one waiting gateAging or longer goes first (g.mu held).
func (g *cpuGate) handOut() {
	for g.free > 0 {
		p := g.next()
		if p < 0 {
			return
		}
		h := g.waiting[p][0]
		g.waiting[p][0] = nil
		g.waiting[p] = g.waiting[p][1:]
		g.give(h)
		close(h.ready)
	}
}

// next is the priority whose first waiter goes next, or -1 if none may.
func (g *cpuGate) next() int {
	first, oldest := -1, -1
	now := g.now()
	for p, q := range g.waiting {
		if len(q) == 0 || (p == prioAhead && (first >= 0 || len(g.holders) > 0)) {
			continue
		}
		if first < 0 {
			first = p
		}
		if now.Sub(q[0].since) >= gateAging && (oldest < 0 || q[0].since.Before(g.waiting[oldest][0].since)) {
			oldest = p
		}
	}
	if oldest >= 0 {
		return oldest
	}
	return first
}
