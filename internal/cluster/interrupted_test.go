package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// unreachableBeats is a node's view of the store whose heartbeats fail
// while down is set (the database slow or away for the heartbeat alone,
// as on a machine at a load of 40), every other call going through.
type unreachableBeats struct {
	clusterstore.Store
	down atomic.Bool
}

func (u *unreachableBeats) Heartbeat(ctx context.Context, l *clusterstore.Lease, ttl time.Duration) error {
	if u.down.Load() {
		return errors.New("heartbeat: database unreachable (test)")
	}
	return u.Store.Heartbeat(ctx, l, ttl)
}

// storedCost is what the responses of job id's stored history cost, in
// micro-dollars, and how many there are per interaction.
func storedCost(t *testing.T, s clusterstore.Store, id string) (int64, map[int]int) {
	t.Helper()
	lines, err := s.History(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var spent int64
	responses := map[int]int{}
	for _, line := range lines {
		e, err := history.ParseLine(line)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == history.TypeResponse && e.Response != nil {
			spent += int64(e.Response.CostUSD*1e6 + 0.5)
			if e.Interaction != nil {
				responses[*e.Interaction]++
			}
		}
	}
	return spent, responses
}

// TestLeaseLostAsCallAnswersDebitsOnce: the node's heartbeats fail while
// the worker's first call runs, so the node stops the run (its lease may
// be taken) just as the call answers, with its cost. The call is
// interrupted: no response recorded, asked again. The database must debit
// what the recorded responses cost, not the interrupted call's cost on top
// (the chaos run's "responses cost 60000 µ$, the database debited 80000
// µ$", and TestTwoNodesRunJobs' 80000 for 60000 under load).
func TestLeaseLostAsCallAnswersDebitsOnce(t *testing.T) {
	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Submit(ctx, s, scripted("cut", 10)); err != nil {
		t.Fatal(err)
	}
	store := &unreachableBeats{Store: s}
	n := newNode(t, store, "n1", 1500*time.Millisecond)
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var once atomic.Bool
	waited := make(chan error, 1)
	n.engine.NewProvider = func(cfg manifest.AgentConfig) (agent.Provider, error) {
		p, err := agent.New(cfg)
		if err != nil {
			return nil, err
		}
		return callFunc(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
			out, err := p.Call(ctx, req)
			if req.Role != "worker" || err != nil || !once.CompareAndSwap(false, true) {
				return out, err
			}
			// The answer is in; the lease is lost before it is recorded.
			store.down.Store(true)
			defer store.down.Store(false)
			select {
			case <-ctx.Done():
				waited <- nil
			case <-time.After(60 * time.Second):
				waited <- errors.New("the run was not stopped by its failing heartbeats")
			}
			return out, nil
		}), nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.Run(ctx) })
	js := waitAll(t, s, 1, func(j *clusterstore.Job) bool { return !j.Status.Active() }, 90*time.Second)
	cancel()
	wg.Wait()
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	j := js[0]
	if j.Status != lifecycle.Success {
		t.Fatalf("job ended %s", j.Status)
	}
	spent, responses := storedCost(t, s, "cut")
	for i, c := range responses {
		if c != 1 {
			t.Errorf("interaction %d has %d responses", i, c)
		}
	}
	if spent != 60_000 || j.SpentMicros != spent {
		t.Fatalf("responses cost %d µ$ (want 60000), the database debited %d µ$", spent, j.SpentMicros)
	}
	if _, _, _, lost, _ := n.Stats.Snapshot(); lost < 1 {
		t.Fatalf("the node never lost its lease (lost %d)", lost)
	}
	verifyExport(t, s, "cut")
}

// callFunc is an agent.Provider made of a function.
type callFunc func(ctx context.Context, req *agent.Request) (*agent.Result, error)

func (f callFunc) Call(ctx context.Context, req *agent.Request) (*agent.Result, error) {
	return f(ctx, req)
}

// lostAnswer fails, once, the first unit carrying a debit: committed
// first (a deadline that passed after PostgreSQL's COMMIT: the database
// holds the unit, the node's folder does not), or not at all (the
// database unreachable).
type lostAnswer struct {
	clusterstore.Store
	committed bool
	once      atomic.Bool
}

func (s *lostAnswer) Commit(ctx context.Context, l *clusterstore.Lease, u clusterstore.Unit) error {
	fail := u.DebitMicros > 0 && s.once.CompareAndSwap(false, true)
	if fail && !s.committed {
		return errors.New("commit: database unreachable (test)")
	}
	if err := s.Store.Commit(ctx, l, u); err != nil {
		return err
	}
	if fail {
		return context.DeadlineExceeded
	}
	return nil
}

// TestFailedCommitDebitsOnce: a unit carrying a debit fails, committed
// by the database but unacknowledged, or not committed. Either ends the
// run (the append failed: the engine keeps nothing of it and writes
// nothing more); the job is claimed again from the database: a call whose
// response the database holds is not asked again, one it lacks is, and
// the debit is what the recorded responses cost.
func TestFailedCommitDebitsOnce(t *testing.T) {
	for _, committed := range []bool{true, false} {
		t.Run(fmt.Sprintf("committed=%v", committed), func(t *testing.T) { testFailedCommit(t, committed) })
	}
}

func testFailedCommit(t *testing.T, committed bool) {
	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Submit(ctx, s, scripted("unacked", 10)); err != nil {
		t.Fatal(err)
	}
	store := &lostAnswer{Store: s, committed: committed}
	n := newNode(t, store, "n1", 5*time.Second)
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.Run(ctx) })
	js := waitAll(t, s, 1, func(j *clusterstore.Job) bool { return !j.Status.Active() }, 90*time.Second)
	cancel()
	wg.Wait()
	if !store.once.Load() {
		t.Fatal("no unit with a debit was committed")
	}
	if js[0].Status != lifecycle.Success {
		t.Fatalf("job ended %s", js[0].Status)
	}
	spent, responses := storedCost(t, s, "unacked")
	if len(responses) != 4 {
		t.Errorf("%d interactions answered, want 4", len(responses))
	}
	for i, c := range responses {
		if c != 1 {
			t.Errorf("interaction %d has %d responses", i, c)
		}
	}
	if spent != 60_000 || js[0].SpentMicros != spent {
		t.Fatalf("responses cost %d µ$ (want 60000), the database debited %d µ$", spent, js[0].SpentMicros)
	}
	if claims, _, _, _, _ := n.Stats.Snapshot(); claims < 2 {
		t.Fatalf("node claimed %d times, want the job again after the lost answer", claims)
	}
	verifyExport(t, s, "unacked")
}
