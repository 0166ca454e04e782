package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
)

// gate is a node's view of the store that can be frozen: while closed,
// every call waits (a SIGSTOPped process, or a node cut off from the
// database whose packets are held), and goes on when it opens, reaching
// the database whatever its deadline said meanwhile: the request was on
// the wire (the store's fence must refuse it, not the node's clock).
type gate struct {
	clusterstore.Store
	mu     sync.Mutex
	closed chan struct{}
	// beatsOnly freezes heartbeats alone (a heartbeat goroutine starved
	// while the node's claim loop goes on).
	beatsOnly bool
}

// wait holds a call while the gate is closed; it says whether it did.
func (g *gate) wait() bool {
	g.mu.Lock()
	c := g.closed
	g.mu.Unlock()
	if c != nil {
		<-c
	}
	return c != nil
}

func (g *gate) freeze() {
	g.mu.Lock()
	g.closed = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) thaw() {
	g.mu.Lock()
	close(g.closed)
	g.closed = nil
	g.mu.Unlock()
}

func (g *gate) Heartbeat(ctx context.Context, l *clusterstore.Lease, ttl time.Duration) error {
	if g.wait() {
		ctx = context.WithoutCancel(ctx)
	}
	return g.Store.Heartbeat(ctx, l, ttl)
}

func (g *gate) Commit(ctx context.Context, l *clusterstore.Lease, u clusterstore.Unit) error {
	if !g.beatsOnly && g.wait() {
		ctx = context.WithoutCancel(ctx)
	}
	return g.Store.Commit(ctx, l, u)
}

func (g *gate) Claim(ctx context.Context, node string, ttl time.Duration) (*clusterstore.Lease, error) {
	if !g.beatsOnly {
		g.wait()
	}
	return g.Store.Claim(ctx, node, ttl)
}

func slowJob(id string) []byte {
	return fmt.Appendf(nil, `{
  "schema_version": 1,
  "job_id": %q,
  "task_description": "Slow.",
  "agents": {
    "worker": {"provider": "script", "script": [
      {"action": "COMPLETED", "summary": "Done slowly.", "cost_usd": 0.5, "delay_ms": 5000}]},
    "supervisor": {"provider": "script", "script": [
      {"action": "COMPLETED", "summary": "Good.", "cost_usd": 0.01}]}
  },
  "metrics": {"cumulative_cost": 0, "cumulative_time_seconds": 0}
}`, id)
}

// TestZombieNodeFenced: node A claims a job and starts its agent call, then
// freezes past its lease (the DBOS zombie: a paused process that wakes
// and carries on). Node B rescues the job, asks the call again and
// finishes it. When A wakes, its heartbeat and its late response are
// refused: the job is B's SUCCESS, every interaction has one response,
// nothing A wrote after B's claim is stored, only B's cost is debited,
// and the history verifies.
func TestZombieNodeFenced(t *testing.T) {
	s, url := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Submit(ctx, s, slowJob("slow")); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	ga := &gate{Store: s}
	a := newNode(t, ga, "a", ttl)
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(ctx) })
	// A has recorded its intent: the agent is running.
	waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Owner == "a" && j.NextSeq >= 2 }, 20*time.Second)
	ga.freeze()
	b := newNode(t, s, "b", ttl)
	wg.Go(func() { _ = b.Run(ctx) })
	js := waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 60*time.Second)
	ga.thaw()
	// A wakes: its agent's answer (the call took 5 s, the freeze longer
	// or not) and its heartbeat meet the fence.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, fenced, _, running := a.Stats.Snapshot(); fenced >= 1 && running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node a was not fenced: %+v", &a.Stats)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	after, err := s.Job(context.Background(), "slow")
	if err != nil {
		t.Fatal(err)
	}
	if after.Status != lifecycle.Success || after.NextSeq != js[0].NextSeq || after.Rescues != 1 {
		t.Fatalf("job after the zombie woke: %+v (was %+v)", after, js[0])
	}
	if after.SpentMicros != 510_000 {
		t.Fatalf("spent %d µ$, want 510000 (B's calls only)", after.SpentMicros)
	}
	// Every interaction has exactly one response; the records after B's
	// claim are all B's epoch.
	lines, err := s.History(context.Background(), "slow")
	if err != nil {
		t.Fatal(err)
	}
	responses := map[int]int{}
	for _, line := range lines {
		e, err := history.ParseLine(line)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == history.TypeResponse && e.Interaction != nil {
			responses[*e.Interaction]++
		}
	}
	if len(responses) != 2 {
		t.Fatalf("responses by interaction: %v, want 2 interactions", responses)
	}
	for i, n := range responses {
		if n != 1 {
			t.Fatalf("interaction %d has %d responses", i, n)
		}
	}
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var bad int
	if err := c.QueryRow(context.Background(), `SELECT count(*) FROM logist_history h1 JOIN logist_history h2
		ON h1.job_id = h2.job_id AND h2.seq > h1.seq AND h2.epoch < h1.epoch`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Fatalf("%d records of an older epoch after a newer one", bad)
	}
	verifyExport(t, s, "slow")
}

// TestReclaimOwnJob: a node whose heartbeats stall past its lease claims
// its own job again while its first run is still on it. The first run is
// fenced off and ends before the job's folder is rewritten, so only the
// second run writes: one response per interaction, a history that
// verifies.
func TestReclaimOwnJob(t *testing.T) {
	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Submit(ctx, s, slowJob("slow")); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	g := &gate{Store: s, beatsOnly: true}
	a := newNode(t, g, "a", ttl)
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(ctx) })
	waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Owner == "a" && j.NextSeq >= 2 }, 20*time.Second)
	g.freeze()
	// The lease runs out; the node's own claim loop takes the job again.
	waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Epoch >= 2 }, 20*time.Second)
	time.Sleep(500 * time.Millisecond)
	g.thaw()
	waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 60*time.Second)
	cancel()
	wg.Wait()
	lines, err := s.History(context.Background(), "slow")
	if err != nil {
		t.Fatal(err)
	}
	responses := map[int]int{}
	for _, line := range lines {
		e, err := history.ParseLine(line)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == history.TypeResponse && e.Interaction != nil {
			responses[*e.Interaction]++
		}
	}
	for i, n := range responses {
		if n != 1 {
			t.Fatalf("interaction %d has %d responses", i, n)
		}
	}
	if claims, _, _, _, _ := a.Stats.Snapshot(); claims < 2 {
		t.Fatalf("node claimed %d times, want its own job again", claims)
	}
	verifyExport(t, s, "slow")
}
