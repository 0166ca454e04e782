package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/testkit"
)

// A panic in one job's run (a fault of Logist's on that job's input) ends
// that run only: the job is refused with RUN_FAILED, logged with the
// stack and noted for logist status, its files as a crash there would
// leave them; the scheduler runs the other jobs, and the job once the
// fault is gone.
func TestRunPanicEndsThatJobOnly(t *testing.T) {
	t.Parallel()
	f, s, lb := faultFixture(t)
	obs := &faultCount{}
	f.Env.Obs = obs
	f.WriteJob("boom", job(okSupervisor(), okSupervisor()))
	f.WriteJob("other", job(okSupervisor(), okSupervisor()))
	var faulty atomic.Bool
	faulty.Store(true)
	f.fake(func(_ context.Context, req *agent.Request) (*agent.Result, error) {
		if req.JobID == "boom" && req.Role == "supervisor" && faulty.Load() {
			var none []int
			_ = none[len(req.Role)] // the kind of fault a run could meet
		}
		return answer("COMPLETED", "done"), nil
	})
	s.Nudge("boom")
	testkit.WaitFor(t, "the run to be refused", 10*time.Second, func() bool { return lb.count("boom", codes.RunFailed, "job run failed") == 1 })
	waitIdle(t, s, 5*time.Second)

	line := lb.line(t, "boom", codes.RunFailed)
	if msg, _ := line["err"].(string); !strings.Contains(msg, "fault of Logist's (panic: runtime error: index out of range [10] with length 0)") {
		t.Errorf("logged err %q", msg)
	}
	if st, _ := line["stack"].(string); !strings.Contains(st, "fault_test.go") || !strings.Contains(st, "runner.(*Engine)") {
		t.Errorf("logged stack does not show where:\n%s", st)
	}
	if n := obs.n.Load(); n != 1 {
		t.Errorf("%d run faults observed, want 1", n)
	}
	stall, ok := f.Env.Store.ReadStall("boom")
	if !ok || !stall.Refused || stall.Code != codes.RunFailed || !strings.Contains(stall.Reason, "panic") {
		t.Errorf("refusal noted for logist status: %+v %v", stall, ok)
	}
	if m := f.Load("boom"); m.Status != lifecycle.Reviewing {
		t.Errorf("status %s, want REVIEWING: the point it stopped at", m.Status)
	}
	checkIntact(t, f, "boom")

	s.Nudge("other")
	testkit.WaitFor(t, "the other job to succeed", 10*time.Second, func() bool { return f.Load("other").Status == lifecycle.Success })
	waitIdle(t, s, 5*time.Second)
	faulty.Store(false)
	s.Nudge("boom")
	testkit.WaitFor(t, "the job to succeed once the fault is gone", 10*time.Second, func() bool { return f.Load("boom").Status == lifecycle.Success })
	if n := len(testkit.OfType(f.Records("boom"), history.TypeResponse)); n != 2 {
		t.Errorf("%d responses, want 2: the worker's once, the supervisor's asked again", n)
	}
}

// line is the first log line of job id with error_code code.
func (l *logBuffer) line(t *testing.T, id, code string) map[string]any {
	t.Helper()
	for _, b := range bytes.Split(l.bytes(), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(b, &m) == nil && m["job_id"] == id && m["error_code"] == code {
			return m
		}
	}
	t.Fatalf("no %s line for %s", code, id)
	return nil
}

// faultCount is an observer that counts run faults.
type faultCount struct {
	jobtx.Nop
	n atomic.Int32
}

func (c *faultCount) RunFault() { c.n.Add(1) }
