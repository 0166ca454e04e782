package cluster

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/testkit"
)

// slowEnd is a node's view of the store whose commit that stops a job
// (a status the daemon does not run: the lease ends with it) returns
// late, as on a loaded machine: the run's heartbeats go on meanwhile and
// meet the lease its own commit ended.
type slowEnd struct {
	clusterstore.Store
	wait time.Duration
}

func (s *slowEnd) Commit(ctx context.Context, l *clusterstore.Lease, u clusterstore.Unit) error {
	err := s.Store.Commit(ctx, l, u)
	if err == nil && u.Status != "" && !u.Status.Active() {
		time.Sleep(s.wait)
	}
	return err
}

// TestJobEndIsNoFence: a job that simply ends (SUCCESS) or waits for a
// human has no lease left, and the node's heartbeat that finds so is no
// fence: no CLUSTER_FENCED line, no lost lease counted, no CLUSTER_RUN
// error. A real fence (a steward's halt moving the epoch on) still logs
// CLUSTER_FENCED.
func TestJobEndIsNoFence(t *testing.T) {
	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Submit(ctx, s, scripted("ends", 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := Submit(ctx, s, humanJob("waits")); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second // longer than a heartbeat late under CI load
	var logs testkit.SyncBuffer
	n := newNode(t, &slowEnd{Store: s, wait: ttl}, "n1", ttl)
	n.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.Run(ctx) })
	waitAll(t, s, 2, func(j *clusterstore.Job) bool { return !j.Status.Active() }, 60*time.Second)
	// Each run has ended (its slow last commit returned).
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, _, _, _, running := n.Stats.Snapshot(); running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("runs did not end")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, code := range []string{"CLUSTER_FENCED", "CLUSTER_RUN", "CLUSTER_LEASE_LOST"} {
		if strings.Contains(logs.String(), code) {
			t.Fatalf("a job that ended normally logged %s:\n%s", code, logs.String())
		}
	}
	if _, _, fenced, lost, _ := n.Stats.Snapshot(); fenced != 0 || lost != 0 {
		t.Fatalf("fenced %d, lost %d leases; want none", fenced, lost)
	}
	if j, err := s.Job(ctx, "waits"); err != nil || j.Status != lifecycle.InterventionRequired {
		t.Fatalf("waits: %+v %v", j, err)
	}

	// A real fence is still one: a steward halts a running job.
	if _, err := Submit(ctx, s, scripted("halted", 30_000)); err != nil {
		t.Fatal(err)
	}
	waitAll(t, s, 3, func(j *clusterstore.Job) bool { return j.ID != "halted" || j.Owner == "n1" && j.NextSeq > 2 }, 60*time.Second)
	st := stewardOf(t, s)
	if _, err := Steer(ctx, s, Steering{Job: "halted", Key: "h1", Command: "halt halted", Apply: func(dir string) error {
		_, err := st(dir).Halt("halted", "stop")
		return err
	}}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), `"error_code":"CLUSTER_FENCED"`) {
		if time.Now().After(deadline) {
			t.Fatalf("a steward's halt of a running job logged no CLUSTER_FENCED:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
}
