package runner

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/testkit"
)

// BenchmarkCallLoop is the engine's own cost per agent call: jobs whose
// supervisor answers RETRY until the job has made 200 calls, with an
// in-process agent that answers at once (no process, no request file), so
// what is left is the transaction per call (history records, signing, the
// manifest's encoding and file) and the engine's bookkeeping. cpu-us/call
// is the process's user and system time per call (getrusage), which the
// machine's other work inflates less than the wall time, and user-us/call
// its user time alone, which the disk's other work (fsync) inflates less
// still. Each job's end
// (jobHistory.json) is counted in its calls' share.
func BenchmarkCallLoop(b *testing.B) {
	const perJob = 200
	k := testkit.New(b)
	k.Env.Store.InPlace = true // as logistd saves manifests
	k.Sign()                   // as logistd signs every record and head
	e := NewEngine(k.Env, builtins.Effects())
	k.Runner = e
	e.NewProvider = func(manifest.AgentConfig) (agent.Provider, error) {
		return providerFunc(func(_ context.Context, req *agent.Request) (*agent.Result, error) {
			if req.Role == "supervisor" && req.Interaction < perJob {
				return answer("RETRY", "again"), nil
			}
			return answer("COMPLETED", "done"), nil
		}), nil
	}
	var ru0, ru1 syscall.Rusage
	calls := 0
	b.ResetTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for i := 0; calls < b.N; i++ {
		b.StopTimer()
		id := fmt.Sprintf("j%d", i)
		j := job(map[string]any{"provider": "command", "command": map[string]any{"argv": []string{"true"}}},
			map[string]any{"provider": "command", "command": map[string]any{"argv": []string{"true"}}})
		j["limits"] = map[string]any{"max_retries": 1000}
		k.WriteJob(id, j)
		b.StartTimer()
		if err := e.Run(context.Background(), id); err != nil {
			b.Fatal(err)
		}
		m := k.Load(id)
		if m.Status != "SUCCESS" || m.Metrics.AgentCalls < perJob {
			b.Fatalf("job %s: %s after %d calls (%s)", id, m.Status, m.Metrics.AgentCalls, m.Run.Reason)
		}
		calls += m.Metrics.AgentCalls
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	b.StopTimer()
	cpu := time.Duration(syscall.TimevalToNsec(ru1.Utime) - syscall.TimevalToNsec(ru0.Utime) +
		syscall.TimevalToNsec(ru1.Stime) - syscall.TimevalToNsec(ru0.Stime))
	user := time.Duration(syscall.TimevalToNsec(ru1.Utime) - syscall.TimevalToNsec(ru0.Utime))
	b.ReportMetric(float64(cpu.Microseconds())/float64(calls), "cpu-us/call")
	b.ReportMetric(float64(user.Microseconds())/float64(calls), "user-us/call")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(calls), "wall-us/call")
}

// BenchmarkScriptJob is scenario 3's two-call scripted job in the engine
// alone (testkit's BenchScriptJobs says what each op and metric is).
func BenchmarkScriptJob(b *testing.B) {
	k := testkit.New(b)
	k.Env.Store.InPlace = true // as logistd saves manifests
	k.Sign()                   // as logistd signs every record and head
	e := NewEngine(k.Env, builtins.Effects())
	k.Runner = e
	k.BenchScriptJobs(b)
}
