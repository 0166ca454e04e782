package cluster

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/testkit"
)

// A run that panics (a fault of Logist's on the job's input) ends that run,
// not the node: the job is given back with a lease's backoff, so that no
// node meets the fault again at once in a loop, and the node's log has the
// stack. Once the fault is gone the job runs to its end.
func TestRunFaultIsGivenBackWithABackoff(t *testing.T) {
	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Submit(ctx, s, scripted("faulty", 0)); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	n := newNode(t, s, "n1", ttl)
	logs := &testkit.SyncBuffer{}
	n.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var faults atomic.Int32
	var faulted atomic.Int64 // UnixNano
	n.engine.NewProvider = func(cfg manifest.AgentConfig) (agent.Provider, error) {
		p, err := agent.New(cfg)
		if err != nil {
			return nil, err
		}
		return callFunc(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
			if req.Role == "worker" && faults.Add(1) == 1 {
				faulted.Store(time.Now().UnixNano())
				var none []string
				return nil, errors.New(none[len(req.Role)])
			}
			return p.Call(ctx, req)
		}), nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.Run(ctx) })
	js := waitAll(t, s, 1, func(j *clusterstore.Job) bool { return !j.Status.Active() }, 60*time.Second)
	took := time.Since(time.Unix(0, faulted.Load()))
	cancel()
	wg.Wait()
	if js[0].Status != lifecycle.Success || js[0].Rescues != 0 {
		t.Fatalf("job %s, %d rescues: want SUCCESS, given back, never rescued", js[0].Status, js[0].Rescues)
	}
	if took < ttl*3/4 {
		t.Errorf("the job ended %s after the fault: claimed again without the backoff of %s", took, ttl)
	}
	log := logs.String()
	for _, want := range []string{`"msg":"cluster run ended"`, "fault of Logist's (panic: runtime error: index out of range [6] with length 0)", "claimable again in 2s", `"stack":"goroutine`} {
		if !strings.Contains(log, want) {
			t.Errorf("the node's log does not say %s:\n%s", want, log)
		}
	}
}
