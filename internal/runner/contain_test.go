package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/testkit"
)

// fakeContain resolves every setting to one executor or one error, and
// remembers what it was asked.
type fakeContain struct {
	ex    agent.Executor
	err   error
	asked []string
}

func (c *fakeContain) For(m *manifest.Manifest) (agent.Executor, error) {
	c.asked = append(c.asked, m.Sandbox)
	return c.ex, c.err
}

// countingExec is Direct that counts its runs and names a layer.
type countingExec struct{ runs int }

func (e *countingExec) Run(ctx context.Context, s agent.ProcSpec) (*agent.ProcResult, error) {
	e.runs++
	return agent.Direct{}.Run(ctx, s)
}
func (e *countingExec) Layer() string { return "test-layer" }

// Fail closed: a job whose sandbox does not work on the host stops before
// any intent is recorded or any program runs, with SANDBOX_UNAVAILABLE and
// the reason the containment gave.
func TestJobRefusesToStartWithoutItsSandbox(t *testing.T) {
	f := newFixture(t)
	c := &fakeContain{err: &agent.Error{Code: codes.SandboxUnavailable, Msg: "sandbox unavailable: no sandbox layer works on this host: bwrap not installed; landlock not supported by kernel"}}
	f.Engine.Contain = c
	f.WriteJob("j", job(command(0, "sh", "-c", "echo ran > ran.txt"), okSupervisor()))
	f.Run("j")
	m := f.Load("j")
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.SandboxUnavailable {
		t.Fatalf("status %s code %s (%s), want INTERVENTION_REQUIRED SANDBOX_UNAVAILABLE", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	if !strings.Contains(m.Run.Reason, "bwrap not installed") {
		t.Errorf("reason %q does not say what is missing", m.Run.Reason)
	}
	recs := f.Records("j")
	if n := len(testkit.OfType(recs, history.TypeIntent)); n != 0 || m.Metrics.AgentCalls != 0 {
		t.Errorf("%d intents, %d calls: nothing may run uncontained", n, m.Metrics.AgentCalls)
	}
	if errs := testkit.OfType(recs, history.TypeError); len(errs) != 1 || errs[0].Error.Code != codes.SandboxUnavailable {
		t.Errorf("error records %+v, want one SANDBOX_UNAVAILABLE", errs)
	}
	if len(c.asked) == 0 || c.asked[0] != "" {
		t.Errorf("containment asked for %q, want the job's setting (none: \"\")", c.asked)
	}
}

// The job's setting reaches the containment; every process of its calls
// runs through the executor it gives; the layer is kept in run.sandbox
// and said by the start's transition in the history.
func TestJobProcessesRunThroughItsExecutor(t *testing.T) {
	f := newFixture(t)
	ex := &countingExec{}
	c := &fakeContain{ex: ex}
	f.Engine.Contain = c
	j := job(command(0, "sh", "-c", `echo '{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"done"}'`), okSupervisor())
	j["sandbox"] = "landlock"
	f.WriteJob("j", j)
	f.Run("j")
	m := f.Load("j")
	if m.Status != lifecycle.Success {
		t.Fatalf("status %s (%s %s)", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	if ex.runs != 1 {
		t.Errorf("executor ran %d processes, want the worker's 1", ex.runs)
	}
	if len(c.asked) == 0 || c.asked[0] != "landlock" {
		t.Errorf("containment asked for %q, want the job's landlock", c.asked)
	}
	if m.Run.Sandbox != "test-layer" {
		t.Errorf("run.sandbox %q, want test-layer", m.Run.Sandbox)
	}
	found := false
	for _, r := range testkit.OfType(f.Records("j"), history.TypeTransition) {
		if r.Transition.Event == string(lifecycle.EvStart) && strings.Contains(r.Transition.Reason, "sandbox test-layer") {
			found = true
		}
	}
	if !found {
		t.Error("no start transition names the sandbox layer")
	}
}

// The red team's budget raise (issue 19): an agent that can reach its
// job.json (here uncontained) rewrites cost_threshold during its call and
// reports a $5 call on a $1 budget. The committed budget wins: the job
// halts on cost instead of ending SUCCESS at $5.
func TestAgentCannotRaiseItsOwnBudget(t *testing.T) {
	f := newFixture(t)
	script := `sed -i 's/"cost_threshold": 100,/"cost_threshold": 100000000,/' ../job.json
grep -q 100000000 ../job.json || exit 9
echo '{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"done","cost_usd":5}'`
	j := job(command(0, "sh", "-c", script), okSupervisor())
	j["cost_threshold"] = 100
	f.WriteJob("j", j)
	f.Run("j")
	m := f.Load("j")
	if m.Status != lifecycle.HaltedCost {
		t.Fatalf("status %s (%s: %s), want HALTED_COST", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	if m.CostThreshold == nil || *m.CostThreshold != 100 {
		t.Errorf("cost_threshold %v, want the committed 100", m.CostThreshold)
	}
}

// endingContain is fakeContain that keeps something per job's run (as
// agent.Containment keeps a spare sandbox): it hears each run's end.
type endingContain struct {
	fakeContain
	ended []string
}

func (c *endingContain) EndJob(id string) { c.ended = append(c.ended, id) }

// A containment that keeps something per job hears the run's end, and a
// run's start clears what a dead daemon made for a predicted call (an
// empty request file and answer folder of a call that never started).
func TestRunEndsTheJobInItsContainment(t *testing.T) {
	f := newFixture(t)
	c := &endingContain{fakeContain: fakeContain{ex: &countingExec{}}}
	f.Engine.Contain = c
	f.WriteJob("j", job(command(0, "sh", "-c", `echo '{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"done"}'`), okSupervisor()))
	reqs := filepath.Join(f.Engine.Env.Store.JobDir("j"), "requests")
	if err := os.MkdirAll(filepath.Join(reqs, "000099.answer"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(reqs, "000099.json"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("status %s (%s %s)", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	if len(c.ended) == 0 || c.ended[len(c.ended)-1] != "j" {
		t.Errorf("ended %v, want the run of j to end in its containment", c.ended)
	}
	for _, p := range []string{"000099.json", "000099.answer"} {
		if _, err := os.Lstat(filepath.Join(reqs, p)); err == nil {
			t.Errorf("%s, made for a predicted call that never started, is left", p)
		}
	}
}

// Each contained call is told the call expected after it (its phase, its
// role and the agent that plays it), from the workflow and where the
// phase's answers have led in this run: the worker's call expects the
// supervisor's; the supervisor's first call expects none (COMPLETED ends
// the job); once it has sent the work back, its next calls expect the
// worker's again. The run's end forgets what it learnt; an uncontained
// call is told nothing.
func TestEachCallIsToldTheNextExpected(t *testing.T) {
	f := newFixture(t)
	f.Engine.Contain = &fakeContain{ex: &countingExec{}}
	f.Engine.LookPath = func(name string) (string, error) { return "/opt/" + name, nil } // never run
	f.WriteJob("j", job(command(0, "worker-program"), command(0, "supervisor-program")))
	type seen struct {
		role, next string
		prov       agent.Provider
	}
	var mu sync.Mutex
	var calls []seen
	supervisor := 0
	provs := map[string]agent.Provider{}
	f.Engine.NewProvider = func(cfg manifest.AgentConfig) (agent.Provider, error) {
		name := cfg.Command.Argv[0]
		mu.Lock()
		defer mu.Unlock()
		if p, ok := provs[name]; ok {
			return p, nil
		}
		var p providerFunc = func(_ context.Context, req *agent.Request) (*agent.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			s := seen{role: req.Role}
			if req.Next != nil {
				s.next, s.prov = req.Next.Phase+"/"+req.Next.Role, req.Next.Provider
			}
			calls = append(calls, s)
			if req.Role == "supervisor" {
				supervisor++
				if supervisor <= 2 {
					return answer("RETRY", "again"), nil
				}
			}
			return answer("COMPLETED", req.Role+" done"), nil
		}
		provs[name] = &p
		return &p, nil
	}
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("status %s (%s %s)", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	want := []struct{ role, next, program string }{
		{"worker", "review/supervisor", "supervisor-program"}, {"supervisor", "", ""}, // no answer seen yet: COMPLETED expected
		{"worker", "review/supervisor", "supervisor-program"}, {"supervisor", "work/worker", "worker-program"}, // it sent the work back last time
		{"worker", "review/supervisor", "supervisor-program"}, {"supervisor", "work/worker", "worker-program"},
	}
	if len(calls) != len(want) {
		t.Fatalf("calls %+v, want %d", calls, len(want))
	}
	for i, w := range want {
		if calls[i].role != w.role || calls[i].next != w.next {
			t.Errorf("call %d: %s told next %q, want %s told %q", i+1, calls[i].role, calls[i].next, w.role, w.next)
		}
		if w.program != "" && calls[i].prov != provs[w.program] {
			t.Errorf("call %d: the next call's agent is not %s, the one its role's configuration builds", i+1, w.program)
		}
	}
	if _, ok := f.Engine.lastLed("j", "review"); ok {
		t.Error("the run's end left what it learnt of the job's answers")
	}

	// Uncontained, nothing is predicted.
	f.Engine.Contain = &fakeContain{ex: agent.Direct{}}
	calls = nil
	f.WriteJob("k", job(command(0, "worker-program"), command(0, "supervisor-program")))
	supervisor = 2
	f.Run("k")
	for i, c := range calls {
		if c.next != "" {
			t.Errorf("uncontained call %d (%s) told next %q", i+1, c.role, c.next)
		}
	}
}
