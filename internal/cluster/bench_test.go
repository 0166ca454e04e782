package cluster

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/testkit"
)

// BenchmarkOwnScriptJob is runner's BenchmarkScriptJob (scenario 3's
// two-call scripted job in the engine alone) with every unit committed
// through the jobs folder's store as logistd wires it (OwnCommit): the
// owner's check of each unit (clusterstore.Apply) is in each op, as in
// the daemon. cpu-us/job is the process's user and system time in Run
// per job (getrusage), user-us/job its user time alone (the system's
// share follows the file system's state more than the code: ext4 after
// many deletions); -benchmem's allocations are per job, its placement
// and check included.
func BenchmarkOwnScriptJob(b *testing.B) {
	k := testkit.New(b)
	k.Env.Store.InPlace = true // as logistd saves manifests
	k.Env.History.Commit = OwnCommit(k.Env)
	e := runner.NewEngine(k.Env, builtins.Effects())
	k.Runner = e
	script := func(summary string) map[string]any {
		return map[string]any{"provider": "script", "script": []any{map[string]any{"action": "COMPLETED", "summary": summary}}}
	}
	var cpu, user time.Duration
	var ru0, ru1 syscall.Rusage
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		id := fmt.Sprintf("j%d", i)
		k.WriteJob(id, map[string]any{"agents": map[string]any{"worker": script("done"), "supervisor": script("ok")}})
		b.StartTimer()
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		if err := e.Run(context.Background(), id); err != nil {
			b.Fatal(err)
		}
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		b.StopTimer()
		u := time.Duration(syscall.TimevalToNsec(ru1.Utime) - syscall.TimevalToNsec(ru0.Utime))
		user += u
		cpu += u + time.Duration(syscall.TimevalToNsec(ru1.Stime)-syscall.TimevalToNsec(ru0.Stime))
		if m := k.Load(id); m.Status != "SUCCESS" || m.Metrics.AgentCalls != 2 {
			b.Fatalf("job %s: %s after %d calls (%s)", id, m.Status, m.Metrics.AgentCalls, m.Run.Reason)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/job")
	b.ReportMetric(float64(user.Microseconds())/float64(b.N), "user-us/job")
}
