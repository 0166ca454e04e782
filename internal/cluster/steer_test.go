package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/steward"
)

func humanJob(id string) []byte {
	return fmt.Appendf(nil, `{"schema_version": 1, "job_id": %q, "task_description": "t",
 "agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "Wrote it.", "evidence_files": ["a"], "files": {"a": "x"}}]},
  "supervisor": {"provider": "human"}}}`, id)
}

// stewardOf is a steward signing with a key of its own, registered.
func stewardOf(t *testing.T, s clusterstore.Store) func(jobsDir string) *steward.Steward {
	dir := t.TempDir()
	key, err := signing.LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterSteward(context.Background(), "steward-test", key.Public()); err != nil {
		t.Fatal(err)
	}
	return func(jobsDir string) *steward.Steward {
		return steward.New(&jobtx.Env{Store: jobstore.New(jobsDir), Logger: slog.New(slog.DiscardHandler),
			History: history.Options{Signer: key, MaxBytes: -1}}, builtins.Effects())
	}
}

// TestHumanWaitHoldsNoSlot: a node with one slot runs a job that waits
// for a human; the wait holds no lease and no slot (the next job runs),
// and the reply, filed through Steer under a key, makes the job runnable:
// a node takes it and it ends. The same reply again changes nothing;
// another command with its key is refused.
func TestHumanWaitHoldsNoSlot(t *testing.T) {
	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Submit(ctx, s, humanJob("h")); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, s, "n1", 5*time.Second)
	n.MaxParallel = 1
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _ = n.Run(ctx) })
	waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.InterventionRequired }, 60*time.Second)
	if j, _ := s.Job(ctx, "h"); j.Owner != "" {
		t.Fatalf("waiting job holds a lease of %s", j.Owner)
	}
	if _, err := Submit(ctx, s, scripted("next", 10)); err != nil {
		t.Fatal(err)
	}
	waitAll(t, s, 2, func(j *clusterstore.Job) bool {
		return j.ID == "h" || j.Status == lifecycle.Success
	}, 60*time.Second)

	st := stewardOf(t, s)
	answer := []byte(`{"action": "COMPLETED", "summary": "ok", "summary_for_supervisor": "ok", "evidence_files": ["a"]}`)
	reply := Steering{Job: "h", Key: "k1", Command: "reply h as supervisor", Apply: func(dir string) error {
		_, err := st(dir).Reply("h", "supervisor", answer)
		return err
	}}
	out, err := Steer(ctx, s, reply)
	if err != nil || out.Repeat || out.Status != lifecycle.Pending {
		t.Fatalf("reply: %+v %v", out, err)
	}
	again, err := Steer(ctx, s, reply)
	if err != nil || !again.Repeat || again.Epoch != out.Epoch || again.Status != lifecycle.Pending {
		t.Fatalf("same reply again: %+v %v", again, err)
	}
	halt := Steering{Job: "h", Key: "k1", Command: "halt h", Apply: func(dir string) error {
		_, err := st(dir).Halt("h", "")
		return err
	}}
	if _, err := Steer(ctx, s, halt); !errors.Is(err, clusterstore.ErrIdempotency) {
		t.Fatalf("another command with the key: %v", err)
	}
	waitAll(t, s, 2, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 60*time.Second)
	lines, err := s.History(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	replies := 0
	for _, line := range lines {
		e, err := history.ParseLine(line)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == history.TypeSteward && e.Steward.Command == history.CommandReply {
			replies++
		}
	}
	if replies != 1 {
		t.Fatalf("%d replies recorded, want 1", replies)
	}
	verifyExport(t, s, "h")
}

// TestHaltFencesRunningNode: a steward halts a job a node is running;
// the node is fenced at its next heartbeat and stops the run, which
// writes nothing more.
func TestHaltFencesRunningNode(t *testing.T) {
	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Submit(ctx, s, scripted("slow", 30_000)); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, s, "n1", 3*time.Second)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _ = n.Run(ctx) })
	waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Owner == "n1" && j.NextSeq > 2 }, 60*time.Second)
	st := stewardOf(t, s)
	out, err := Steer(ctx, s, Steering{Job: "slow", Key: "h1", Command: "halt slow", Apply: func(dir string) error {
		_, err := st(dir).Halt("slow", "wrong approach")
		return err
	}})
	if err != nil || out.Status != lifecycle.Canceled {
		t.Fatalf("halt: %+v %v", out, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, fenced, _, running := n.Stats.Snapshot()
		if fenced == 1 && running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node not fenced by the halt: fenced %d running %d", fenced, running)
		}
		time.Sleep(50 * time.Millisecond)
	}
	j, err := s.Job(ctx, "slow")
	if err != nil || j.Status != lifecycle.Canceled || j.Owner != "" || j.Epoch != out.Epoch {
		t.Fatalf("after the halt: %+v %v", j, err)
	}
	verifyExport(t, s, "slow")
}
