package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/signing"
)

// callJob is a job whose worker's one call takes delayMS.
func callJob(id string, delayMS int) []byte {
	return fmt.Appendf(nil, `{
  "schema_version": 1,
  "job_id": %q,
  "task_description": "One long call.",
  "agents": {
    "worker": {"provider": "script", "script": [
      {"action": "COMPLETED", "summary": "Done.", "cost_usd": 0.5, "delay_ms": %d}]},
    "supervisor": {"provider": "script", "script": [
      {"action": "COMPLETED", "summary": "Good.", "cost_usd": 0.01}]}
  },
  "metrics": {"cumulative_cost": 0, "cumulative_time_seconds": 0}
}`, id, delayMS)
}

// interrupted counts the AGENT_INTERRUPTED records of job id's history.
func interrupted(t *testing.T, s clusterstore.Store, id string) int {
	t.Helper()
	lines, err := s.History(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range lines {
		e, err := history.ParseLine(line)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(e.Body), "AGENT_INTERRUPTED") {
			n++
		}
	}
	return n
}

// runNode runs n until ctx ends (now: RunUntil's), and says when it
// returned.
func runNode(n *Node, ctx context.Context, now chan struct{}) chan error {
	done := make(chan error, 1)
	go func() { done <- n.RunUntil(ctx, now) }()
	return done
}

// TestGracefulStopLetsTheCallAnswer: a node stopped (SIGTERM: its context
// ends) with a grace lets its call in flight answer and commits the
// answer, starts no other call, and gives the job's lease back at once:
// another node finishes the job long before the lease would have expired,
// and no call was interrupted or asked twice.
func TestGracefulStopLetsTheCallAnswer(t *testing.T) {
	s, _ := openStore(t)
	bg := context.Background()
	if _, err := Submit(bg, s, callJob("drain", 3000)); err != nil {
		t.Fatal(err)
	}
	const ttl = time.Minute // expiry would take a minute: the test must not wait for it
	a := newNode(t, s, "a", ttl)
	a.Grace = 2 * time.Minute
	ctx, stop := context.WithCancel(bg)
	defer stop()
	done := runNode(a, ctx, nil)
	waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Owner == "a" && j.NextSeq >= 2 }, 30*time.Second)
	stop() // SIGTERM
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the stopped node did not return once its call answered")
	}
	j, err := s.Job(bg, "drain")
	if err != nil {
		t.Fatal(err)
	}
	if j.Owner != "" || !j.Status.Active() || j.SpentMicros != 500_000 {
		t.Fatalf("after the graceful stop: %+v; want the lease given back, the worker's answer debited", j)
	}
	if n := interrupted(t, s, "drain"); n != 0 {
		t.Fatalf("%d calls interrupted by a graceful stop", n)
	}
	b := newNode(t, s, "b", ttl)
	ctxB, stopB := context.WithCancel(bg)
	doneB := runNode(b, ctxB, nil)
	waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 30*time.Second)
	stopB()
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	spent, responses := storedCost(t, s, "drain")
	for i, c := range responses {
		if c != 1 {
			t.Errorf("interaction %d has %d responses", i, c)
		}
	}
	if len(responses) != 2 || spent != 510_000 {
		t.Fatalf("%d interactions answered, costing %d µ$; want 2 and 510000", len(responses), spent)
	}
	if n := interrupted(t, s, "drain"); n != 0 {
		t.Fatalf("%d calls interrupted", n)
	}
	verifyExport(t, s, "drain")
}

// TestGracefulStopEnds: a call that outlasts the grace, or a second
// SIGTERM (now), is killed: the node returns without waiting for it, the
// call is recorded as interrupted (to be asked again) and its lease is
// given back.
func TestGracefulStopEnds(t *testing.T) {
	for _, second := range []bool{false, true} {
		t.Run(fmt.Sprintf("second=%v", second), func(t *testing.T) {
			s, _ := openStore(t)
			bg := context.Background()
			if _, err := Submit(bg, s, callJob("long", 120_000)); err != nil {
				t.Fatal(err)
			}
			a := newNode(t, s, "a", time.Minute)
			a.Grace = time.Second
			if second {
				a.Grace = 10 * time.Minute
			}
			ctx, stop := context.WithCancel(bg)
			defer stop()
			now := make(chan struct{})
			done := runNode(a, ctx, now)
			waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Owner == "a" && j.NextSeq >= 2 }, 30*time.Second)
			stop()
			if second {
				close(now)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("the node waited for its call")
			}
			j, err := s.Job(bg, "long")
			if err != nil {
				t.Fatal(err)
			}
			if j.Owner != "" || !j.Status.Active() || j.SpentMicros != 0 {
				t.Fatalf("after the stop: %+v", j)
			}
			if n := interrupted(t, s, "long"); n != 1 {
				t.Fatalf("%d interrupted calls recorded, want 1", n)
			}
		})
	}
}

// TestRestartTakesBackOwnLeases: a node whose process died (its working
// folder's lock released) is started again with the same id and folder:
// it takes back its job at once, at a new epoch, not after the lease
// expired; the dead process's late writes are fenced. While the first
// process lives (holds the lock), a second one on the folder is refused.
func TestRestartTakesBackOwnLeases(t *testing.T) {
	s, _ := openStore(t)
	bg := context.Background()
	if _, err := Submit(bg, s, callJob("back", 3000)); err != nil {
		t.Fatal(err)
	}
	const ttl = 5 * time.Minute // the test ends long before it expires
	g := &gate{Store: s}
	a := newNode(t, g, "a", ttl)
	ctx, stop := context.WithCancel(bg)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(ctx) })
	first := waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Owner == "a" && j.NextSeq >= 2 }, 30*time.Second)[0]

	twin := newNode(t, s, "a", ttl)
	twin.Dir = a.Dir
	if err := twin.Start(bg); err == nil || !strings.Contains(err.Error(), "one process per node") {
		t.Fatalf("a second live process of node a started: %v", err)
	}

	// The process dies: it reaches the store no more; the kernel drops
	// its locks. (In this test's one process the frozen run still holds
	// its job's lock in the folder: the node starts again on a copy of
	// the folder's key, the node's identity, instead.)
	g.freeze()
	if err := a.lock.Unlock(); err != nil {
		t.Fatal(err)
	}
	a2 := newNode(t, s, "a", ttl)
	for _, f := range []string{signing.PrivateFile, signing.PublicFile} {
		b, err := os.ReadFile(filepath.Join(a.Dir, signing.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(a2.Dir, signing.Dir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(a2.Dir, signing.Dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx2, stop2 := context.WithCancel(bg)
	defer stop2()
	done2 := runNode(a2, ctx2, nil)
	js := waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 90*time.Second)
	if js[0].Epoch != first.Epoch+1 {
		t.Fatalf("job at epoch %d after the take-back, want %d", js[0].Epoch, first.Epoch+1)
	}
	g.thaw()
	stop()
	wg.Wait()
	stop2()
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
	after, err := s.Job(bg, "back")
	if err != nil || after.NextSeq != js[0].NextSeq || after.Status != lifecycle.Success {
		t.Fatalf("the dead process's late writes: %+v %v (was %+v)", after, err, js[0])
	}
	_, responses := storedCost(t, s, "back")
	for i, c := range responses {
		if c != 1 {
			t.Errorf("interaction %d has %d responses", i, c)
		}
	}
	verifyExport(t, s, "back")
}
