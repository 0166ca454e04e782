// Package runner is the engine: it drives one job through its workflow, one
// agent call at a time, with the request recorded before the call and the
// response after it, answers validated, the escalation matrix applied, and
// budgets enforced. Scheduler runs many jobs in parallel.
//
// A step is two transactions around a call: prepare (prepare.go) records
// the intent, the call runs without the job's lock, finish (finish.go)
// judges what came back. When a plain agent call follows at once, the
// transaction that judged the call goes on to prepare the next one, and
// the outcome is committed with the next intent (Engine.chains): one
// transaction and one history fsync per call. Both decide by building outcome values
// (outcome.go) that one function, apply, performs and commits; the rules
// they decide by live below the engine (response.Judge for answers,
// workflow.Decide for the escalation matrix), where logist verify's replay
// uses them too.
package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/effect"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/snapshot"
)

// Causes of a cancelled call.
var (
	ErrShutdown = errors.New("daemon shutting down")
	ErrHalted   = errors.New("job halted by a steward")
)

// Engine runs jobs.
type Engine struct {
	Env *jobtx.Env
	// NewProvider builds a role's agent (agent.New unless a test swaps it).
	NewProvider func(manifest.AgentConfig) (agent.Provider, error)
	// Sleep waits for backoff; tests make it instant.
	Sleep func(ctx context.Context, d time.Duration) error
	// LookPath finds a command agent's program on the daemon's PATH
	// (exec.LookPath unless a test swaps it): checked as a job is taken
	// up, before any call (programs.go).
	LookPath func(string) (string, error)
	// WriteRequest writes a command agent's request file
	// (agent.WriteRequest unless a test swaps it: it injects errors such
	// as ENOSPC).
	WriteRequest func(jobDir string, n int, body []byte) error

	// Meter, if set, meters the model traffic of the calls that talk to a
	// model API themselves (CLI presets, the http provider) through the
	// daemon's metering proxy: its figures are their cost of record, and
	// it cuts a call whose job's cost budget is spent (internal/meter).
	Meter agent.Meter

	// Contain gives a job's processes (agents, presets, tools, checks)
	// their executor from its sandbox setting: the daemon's
	// agent.Containment, which fails closed. Nil runs them uncontained
	// with no record of a layer (the engine's own unit tests).
	Contain Containment

	// Draining stops runs from starting another call (graceful shutdown);
	// calls in flight go on.
	Draining atomic.Bool
	// Timings, if set, hears what only the engine can time.
	Timings Timings
	// Effects are the phase effects workflows may name: the composition
	// root's registry (internal/builtins).
	Effects effect.Registry
	// Defaults are the budgets of jobs whose manifest sets none (logistd's
	// --default-* settings; NewEngine: manifest.DefaultBudgets). The zero
	// value applies none.
	Defaults manifest.Budgets

	phaseMu    sync.Mutex
	phaseSince map[string]phaseMark
	// led is where each phase's answers led the jobs' runs (predict.go).
	led ledTo

	rngMu sync.Mutex
	rng   *rand.Rand

	// gate orders the runs' transactions in a burst (cpugate.go).
	gate *cpuGate

	// scans are the workspace as each running job's last snapshot saw
	// it, for the call its transaction prepares next (changes.go).
	scansMu sync.Mutex
	scans   map[string]takenScan
}

// Containment resolves a job's sandbox setting to the executor of its
// processes, or an error naming what the host lacks.
type Containment interface {
	For(m *manifest.Manifest) (agent.Executor, error)
}

// jobEnder is a Containment that keeps something per job while its run
// goes on (agent.Containment: the spare sandbox of its next call), ended
// with the run.
type jobEnder interface {
	EndJob(id string)
}

// Timings hears when calls start, how long phases take and what models
// report they used (metrics implement it).
type Timings interface {
	CallStart(jobID string)
	Phase(role string, d time.Duration)
	Tokens(provider string, input, output, cache int64)
}

type phaseMark struct {
	phase, role string
	since       time.Time
}

// markPhase notes when a job's phase started (at its first call there).
func (e *Engine) markPhase(id string, c *call) {
	e.phaseMu.Lock()
	defer e.phaseMu.Unlock()
	if e.phaseSince == nil {
		e.phaseSince = map[string]phaseMark{}
	}
	if m, ok := e.phaseSince[id]; !ok || m.phase != c.phase {
		e.phaseSince[id] = phaseMark{c.phase, c.role, time.Now()}
	}
}

// endPhase observes a phase that the job has left (or stopped in).
func (e *Engine) endPhase(id string, m *manifest.Manifest) {
	e.phaseMu.Lock()
	defer e.phaseMu.Unlock()
	mark, ok := e.phaseSince[id]
	if !ok || (m.Status.Active() && m.Phase() == mark.phase) {
		return
	}
	delete(e.phaseSince, id)
	if e.Timings != nil {
		e.Timings.Phase(mark.role, time.Since(mark.since))
	}
}

// NewEngine returns an engine with the real providers and clock that
// plays the effects of the registry it is handed.
func NewEngine(env *jobtx.Env, effects effect.Registry) *Engine {
	if env.Obs == nil {
		env.Obs = jobtx.Nop{}
	}
	e := &Engine{Env: env, NewProvider: agent.New, WriteRequest: agent.WriteRequest, Sleep: sleepCtx, Effects: effects, Defaults: manifest.DefaultBudgets(), rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))}
	e.gate = newCPUGate(gateSize())
	return e
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Run drives job id until it leaves the active statuses (finished, waiting
// for a steward, halted) or ctx ends. Cancel ctx with cause ErrHalted to
// kill the call in flight because a steward halted the job, or ErrShutdown
// to interrupt it so that the next start re-attempts the same turn.
func (e *Engine) Run(ctx context.Context, id string) error { return e.RunFrom(ctx, id, nil) }

// RunFrom is Run for a job whose manifest the caller has just read and
// checked as l (the daemon's intake; nil if not): its first transaction
// takes it rather than read job.json again, while the file is still the
// one read (jobtx.Kept.Start).
func (e *Engine) RunFrom(ctx context.Context, id string, l *jobstore.Loaded) (err error) {
	defer e.keepFault(&err) // first deferred: runs after the run's own clean-ups
	// The history and the lock file stay open across the steps.
	var keep jobtx.Kept
	defer keep.Close()
	keep.Start(l)
	defer e.forgetLed(id)
	defer e.forgetScan(id)
	// The pid log of its uncontained calls stays open while it runs.
	pids := agent.NewPidFile(e.Env.Store.JobDir(id))
	defer pids.Close() //nolint:errcheck // appended lines are in the page cache; closing loses none
	ctx = agent.WithPidFile(ctx, pids)
	je, spares := e.Contain.(jobEnder)
	if spares {
		defer je.EndJob(id) // its spare sandbox dies with the run
	}
	// With spares, what a daemon that died made for a predicted call goes
	// first (agent.ClearPredicted).
	e.prune(id, spares)
	pr := &pruner{e: e, id: id} // a long run is pruned as it goes, not only at its start
	for steps := 1; ; steps++ {
		if ctx.Err() != nil || e.Draining.Load() {
			return nil
		}
		next, err := e.step(ctx, id, &keep, pr, steps == 1)
		if err != nil {
			return err
		}
		if next.done {
			return nil
		}
		if next.backoff > 0 {
			if err := e.Sleep(ctx, next.backoff); err != nil {
				return nil
			}
		}
	}
}

type stepResult struct {
	done    bool
	backoff time.Duration
}

// call is what the pre-call transaction hands to the call.
type call struct {
	req         *agent.Request
	hreq        *history.Request
	interaction int
	attempt     int
	phase       string
	role        string
	provider    string
	stateBefore lifecycle.Status
	deadline    time.Duration
	budgetBound bool // the deadline is the job's remaining time budget
	// prov plays the call (perr: why it could not be built, recorded as
	// the call's failure); built before the request, whose metadata
	// records the parameters it sends (agent.SentParams).
	prov agent.Provider
	perr error
	// before is the workspace as the agent found it (nil if not scanned):
	// what the call changed is recorded with its response (changes.go).
	before snapshot.Stats
	// work, if set, is what Logist does itself in place of an agent call
	// (a phase played by workflow.RoleLogist).
	work work
	// turns, if set, are the calls of a turn step (turns.go).
	turns []*turnCall
	teff  effect.TurnEffect
	// exec runs the call's processes (nil: the engine has no Contain).
	exec agent.Executor
	// meter meters its model traffic (nil: not metered), debiting budget
	// (what the job's cost budget has left; nil: none).
	meter  agent.Meter
	budget agent.Budget
}

// contained is ctx carrying the call's executor and meter.
func (c *call) contained(ctx context.Context) context.Context {
	ctx = agent.WithMeter(ctx, c.meter, c.budget)
	if c.exec == nil {
		return ctx
	}
	return agent.WithExecutor(ctx, c.exec)
}

// step does one unit of work: prepare and record a call, make it, record
// its outcome and the transition it implies. When the run goes straight on
// to another plain agent call (chains), the outcome is not committed on
// its own: the same transaction prepares the next call, and the next
// intent's commit takes the outcome into its unit, so that a call costs
// one transaction and one history fsync (the response of call n and the
// intent of call n+1 are one durable unit; a crash before it leaves call
// n's intent open, asked again with its stored request, exactly as a crash
// just before the response's own commit did).
func (e *Engine) step(ctx context.Context, id string, keep *jobtx.Kept, pr *pruner, first bool) (stepResult, error) {
	gh := &gateHold{g: e.gate}
	defer gh.leave()
	if first {
		gh.enter(prioStart)
	} else {
		gh.enter(prioNext)
	}
	tx, err := jobtx.Begin(e.Env, id, keep)
	if err != nil {
		return stepResult{done: true}, err
	}
	var held *call // the call whose outcome tx holds for the next intent's unit
	for {
		c, res, err := e.prepare(tx)
		if held != nil {
			err = e.settle(tx, held, err)
		}
		tx.Close()
		if err != nil || c == nil {
			return res, err
		}
		if len(c.turns) > 0 {
			return e.stepTurns(ctx, id, keep, pr, tx, c, gh)
		}
		var o outcome
		var out *agent.Result
		tx, o, out, err = e.callAndFinish(ctx, id, keep, pr, tx, c, gh)
		if err != nil {
			return stepResult{done: true}, err
		}
		if !o.more {
			leaveSlot(ctx) // the run's last call: its end is recorded outside the slot
			gh.leave()     // and waits behind the transactions agents wait for
			gh.enter(prioEnd)
		}
		chain := e.chains(ctx, tx, o)
		o.hold = o.hold || chain
		res, err = e.apply(tx, o)
		if err == nil {
			e.endPhase(id, tx.M)
			e.noteLed(id, c.phase, tx.M)
			if out != nil && out.Tokens != nil && e.Timings != nil {
				e.Timings.Tokens(c.provider, out.Tokens.Input, out.Tokens.Output, out.Tokens.Cache)
			}
		}
		if err != nil || !chain {
			if err == nil {
				e.forgetCalls(tx, c)
			}
			tx.Close()
			return res, err
		}
		held = c
	}
}

// stepTurns plays a turn step's calls and records their outcome.
func (e *Engine) stepTurns(ctx context.Context, id string, keep *jobtx.Kept, pr *pruner, tx *jobtx.Tx, c *call, gh *gateHold) (stepResult, error) {
	gh.leave()
	e.markPhase(id, c)
	pruned := pr.beside(len(c.turns))
	e.playTurns(c.contained(ctx), tx, c)
	pruned()
	gh.enter(prioNext)
	tx, err := jobtx.Begin(e.Env, id, keep)
	if err != nil {
		return stepResult{done: true}, err
	}
	defer tx.Close()
	o, err := e.finishTurns(ctx, tx, c, c.teff)
	if err != nil {
		return stepResult{done: true}, err
	}
	for _, tc := range c.turns {
		o.logs = append(o.logs, refusedLogs(tc.refused, tc.turn.Role, tc.attempt(), tc.interaction)...)
	}
	if !o.more {
		leaveSlot(ctx)
		gh.leave()
		gh.enter(prioEnd)
	}
	res, err := e.apply(tx, o)
	if err == nil {
		e.endPhase(id, tx.M)
		e.forgetCalls(tx, c)
	}
	return res, err
}

// callAndFinish makes call c (prepared by tx, now closed) without the
// job's lock, then begins the transaction that judges it and returns it
// open with the outcome finish decided.
func (e *Engine) callAndFinish(ctx context.Context, id string, keep *jobtx.Kept, pr *pruner, tx *jobtx.Tx, c *call, gh *gateHold) (*jobtx.Tx, outcome, *agent.Result, error) {
	prov, perr := c.prov, c.perr
	if c.work != nil {
		prov, perr = c.work, nil
	} else if c.before == nil {
		c.before = scanWorkspace(tx)
	}
	gh.leave()
	e.markPhase(id, c)
	if e.Timings != nil {
		e.Timings.CallStart(id)
	}
	start := time.Now()
	var out *agent.Result
	var callErr error
	cctx, cancel := context.WithTimeout(c.contained(ctx), c.deadline)
	cctx, refused := agent.WithEgressLog(cctx)
	pruned := pr.beside(1)
	if perr != nil {
		callErr = perr
	} else {
		out, callErr = prov.Call(cctx, c.req)
	}
	elapsed := time.Since(start)
	pruned()
	// An answer that arrived just as the deadline passed still counts.
	timedOut := callErr != nil && errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()

	gh.enter(prioNext)
	tx, err := jobtx.Begin(e.Env, id, keep)
	if err != nil {
		return nil, outcome{}, nil, err
	}
	o, err := e.finish(ctx, tx, c, out, callErr, elapsed, timedOut)
	if err != nil {
		tx.Close()
		return nil, outcome{}, nil, err
	}
	o.logs = append(o.logs, refusedLogs(refused, c.role, c.attempt, c.interaction)...)
	return tx, o, out, nil
}

// chains says whether outcome o, decided in tx, is held for the next
// call's intent instead of committed on its own: it answers a call, the
// run goes on at once (no backoff, not shutting down), and the next phase
// is a plain agent call (plainCall), whose intent is the first thing
// written after it. Every other way out of the next prepare commits it too
// (settle covers its errors).
func (e *Engine) chains(ctx context.Context, tx *jobtx.Tx, o outcome) bool {
	if len(o.responses) == 0 || !o.more || o.backoff > 0 || o.intent != nil || ctx.Err() != nil || e.Draining.Load() {
		return false
	}
	wf, err := tx.M.ResolveWorkflow()
	if err != nil {
		return false
	}
	phase := tx.M.Phase()
	if o.transition != nil && o.transition.phase != "" {
		phase = o.transition.phase
	}
	// The responses close the open intent (the call they answer).
	return plainPhase(wf, phase)
}

// settle commits what tx still holds of a chained outcome after the next
// prepare (which commits it with the next intent, or with whatever stops
// the run) failed or returned without a commit, and then forgets the held
// call's kept run: only once its outcome is in the history (a run kept on
// disk is what a re-attempt of the same interaction adopts).
func (e *Engine) settle(tx *jobtx.Tx, held *call, err error) error {
	if tx.Holding() {
		if cerr := tx.Commit(); cerr != nil {
			if err == nil {
				err = cerr
			}
			return err
		}
	}
	if tx.Holding() {
		return err
	}
	e.forgetCalls(tx, held)
	return err
}

// forgetCalls drops what contained calls kept of their runs once their
// outcomes are committed to the history (the history is the record now;
// a call still on disk would be adopted by the next run of its number).
// A folder that cannot go is logged; it is harmless until its number is
// asked again, which only an interrupted call is.
//
// A job with encrypt_history keeps none of its calls' request and answer
// files either: they hold the prompt and the answer in the clear (the
// agent reads and writes them so), and the history has both sealed; an
// interrupted call's request is written again from the history.
func (e *Engine) forgetCalls(tx *jobtx.Tx, c *call) {
	ns := []int{c.interaction}
	for _, tc := range c.turns {
		ns = append(ns, tc.interaction)
	}
	if tx.M.EncryptHistory {
		for _, n := range ns {
			if err := agent.ForgetRequest(tx.Dir, n); err != nil {
				tx.LogCode(codes.StorageWrite, "SYSTEM", 0, fmt.Sprintf("remove the request files of interaction %d: %v", n, err))
			}
		}
	}
	if c.exec == nil {
		return
	}
	for _, n := range ns {
		if err := agent.ForgetCall(tx.Dir, n); err != nil {
			tx.LogCode(codes.StorageWrite, "SYSTEM", 0, fmt.Sprintf("remove the kept run of interaction %d: %v", n, err))
		}
	}
}

// providerFor builds the agent that plays role in job m: the manifest's
// configuration, with the job's secret variables let through to a command
// agent (and only to it).
func (e *Engine) providerFor(m *manifest.Manifest, role string) (agent.Provider, error) {
	cfg := m.Agents[role]
	if cfg.Command != nil && len(m.SecretEnv) > 0 {
		cmd := *cfg.Command
		cmd.EnvAllow = append(append([]string{}, cmd.EnvAllow...), m.SecretEnv...)
		cfg.Command = &cmd
	}
	return e.NewProvider(cfg)
}

// backoff is initial·2^(n-1) with ±50% jitter, capped at five minutes.
func (e *Engine) backoff(initial time.Duration, n int) time.Duration {
	d := float64(initial) * math.Pow(2, float64(n-1))
	d = math.Min(d, float64(5*time.Minute))
	e.rngMu.Lock()
	j := 0.5 + e.rng.Float64()
	e.rngMu.Unlock()
	return time.Duration(d * j)
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func truncate(s string, n int) string { return manifest.Excerpt(s, n) }
