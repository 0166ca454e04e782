// Package runner is the engine: it drives one job through its workflow, one
// agent call at a time, with the request recorded before the call and the
// response after it, answers validated, the escalation matrix applied, and
// budgets enforced. Scheduler runs many jobs in parallel.
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
	"github.com/logist/logist/internal/deliberation/play"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/protocol/phases"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/snapshot"
	"github.com/logist/logist/internal/workflow"
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

	// Draining stops runs from starting another call (graceful shutdown);
	// calls in flight go on.
	Draining atomic.Bool
	// Timings, if set, hears what only the engine can time.
	Timings Timings
	// Effects are the phase effects workflows may name (effect.go).
	Effects map[string]Effect

	phaseMu    sync.Mutex
	phaseSince map[string]phaseMark

	rngMu sync.Mutex
	rng   *rand.Rand
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

// NewEngine returns an engine with the real providers and clock.
func NewEngine(env *jobtx.Env) *Engine {
	if env.Obs == nil {
		env.Obs = jobtx.Nop{}
	}
	effects := map[string]Effect{}
	for name, p := range phases.Effects() {
		effects[name] = p
	}
	for name, p := range play.Effects() {
		effects[name] = p
	}
	return &Engine{Env: env, NewProvider: agent.New, Sleep: sleepCtx, Effects: effects, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))}
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
func (e *Engine) Run(ctx context.Context, id string) error {
	// The history and the lock file stay open across the steps.
	var keep jobtx.Kept
	defer keep.Close()
	for {
		if ctx.Err() != nil || e.Draining.Load() {
			return nil
		}
		next, err := e.step(ctx, id, &keep)
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
	// work, if set, is what Logist does itself in place of an agent call
	// (a phase played by workflow.RoleLogist).
	work work
	// turns, if set, are the calls of a turn step (turns.go).
	turns []*turnCall
	teff  TurnEffect
}

// step does one unit of work: prepare and record a call, make it, record
// its outcome and the transition it implies.
func (e *Engine) step(ctx context.Context, id string, keep *jobtx.Kept) (stepResult, error) {
	tx, err := jobtx.Begin(e.Env, id, keep)
	if err != nil {
		return stepResult{done: true}, err
	}
	c, res, err := e.prepare(tx)
	tx.Close()
	if err != nil || c == nil {
		return res, err
	}
	if len(c.turns) > 0 {
		e.markPhase(id, c)
		e.playTurns(ctx, tx, c)
		tx, err = jobtx.Begin(e.Env, id, keep)
		if err != nil {
			return stepResult{done: true}, err
		}
		defer tx.Close()
		res, err = e.finishTurns(ctx, tx, c, c.teff)
		if err == nil {
			e.endPhase(id, tx.M)
		}
		return res, err
	}

	cfg := tx.M.Agents[c.role]
	if cfg.Command != nil && len(tx.M.SecretEnv) > 0 {
		// Secret variables reach the agent (and only the agent).
		cmd := *cfg.Command
		cmd.EnvAllow = append(append([]string{}, cmd.EnvAllow...), tx.M.SecretEnv...)
		cfg.Command = &cmd
	}
	var prov agent.Provider
	var perr error
	if c.work != nil {
		prov = c.work
	} else {
		prov, perr = e.NewProvider(cfg)
	}
	e.markPhase(id, c)
	if e.Timings != nil {
		e.Timings.CallStart(id)
	}
	start := time.Now()
	var out *agent.Result
	var callErr error
	cctx, cancel := context.WithTimeout(ctx, c.deadline)
	if perr != nil {
		callErr = perr
	} else {
		out, callErr = prov.Call(cctx, c.req)
	}
	elapsed := time.Since(start)
	// An answer that arrived just as the deadline passed still counts.
	timedOut := callErr != nil && errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()

	tx, err = jobtx.Begin(e.Env, id, keep)
	if err != nil {
		return stepResult{done: true}, err
	}
	defer tx.Close()
	res, err = e.finish(ctx, tx, c, out, callErr, elapsed, timedOut)
	if err == nil {
		e.endPhase(id, tx.M)
		if out != nil && out.Tokens != nil && e.Timings != nil {
			e.Timings.Tokens(c.provider, out.Tokens.Input, out.Tokens.Output, out.Tokens.Cache)
		}
	}
	return res, err
}

// prepare runs under the job lock before a call: start the job, enforce
// budgets, and write the request (intent) durably. It returns nil call when
// there is nothing to call.
func (e *Engine) prepare(tx *jobtx.Tx) (*call, stepResult, error) {
	m := tx.M
	done := stepResult{done: true}
	if !m.Status.Active() || m.Schedule != nil {
		return nil, done, nil // a template never runs itself; its runs do
	}
	wf, err := m.ResolveWorkflow()
	if err != nil {
		return nil, done, err
	}
	// Never run an agent in a workspace that is not the job's own folder
	// (a symlink out of the job folder, a file): a steward must fix it.
	// Checked before anything touches the workspace.
	if err := checkWorkspace(tx.Dir); err != nil {
		var unsafe *unsafeWorkspaceError
		if !errors.As(err, &unsafe) {
			return nil, done, err
		}
		m.Run.ErrorCode = CodeWorkspaceUnsafe
		tx.LogError(CodeWorkspaceUnsafe, "SYSTEM", 0, err.Error())
		if terr := tx.Transition(lifecycle.EvAgentFailed, lifecycle.InterventionRequired, "", "SYSTEM", err.Error()); terr != nil {
			return nil, done, terr
		}
		return nil, done, tx.Commit()
	}
	if m.Status == lifecycle.Pending {
		if halted, err := e.enforceBudgets(tx); halted || err != nil {
			return nil, done, err
		}
		phase := m.Phase()
		if phase == "" {
			phase = wf.Start
		}
		if m.Run.StartedAt == "" {
			m.Run.StartedAt = tx.Now().UTC().Format(time.RFC3339Nano)
			// The workspace as the job found it: rollback can always return here.
			if err := tx.Store().EnsureWorkspace(tx.ID); err != nil {
				return nil, done, err
			}
			cp := &history.RecoveryPoint{CheckpointID: "cp-start", Sequence: -1, ResumePhase: phase, CanResumeFrom: true,
				Description: "workspace before the first phase", RollbackFiles: []string{}}
			e.snapshot(tx, cp)
			if err := tx.Append(&history.Record{Type: history.TypeRecoveryPoint, Phase: phase, Role: "SYSTEM", RecoveryPoint: cp}); err != nil {
				return nil, done, err
			}
			m.Run.CheckpointID = cp.CheckpointID
		}
		if err := tx.Transition(lifecycle.EvStart, wf.Phases[phase].Status, phase, "SYSTEM", ""); err != nil {
			return nil, done, err
		}
		// A plain agent phase (no effect, not Logist's own, no cut-off call
		// to resume) records its intent next with nothing in between that
		// needs the start on disk: the start's unit then takes the intent
		// with it (CommitWithIntent below), one history fsync fewer before
		// the agent starts. Every other way out of prepare commits it.
		if ph, ok := wf.Phases[phase]; !ok || ph.Effect != "" || ph.Role == workflow.RoleLogist || tx.Log.State().OpenIntent != nil {
			if err := tx.Commit(); err != nil {
				return nil, done, err
			}
		}
	}
	if halted, err := e.enforceBudgets(tx); halted || err != nil {
		return nil, done, err
	}
	phase := m.Phase()
	ph, ok := wf.Phases[phase]
	if !ok {
		return nil, done, fmt.Errorf("job %s: phase %q is not in workflow %s", tx.ID, phase, wf.Name)
	}
	c := &call{phase: phase, role: ph.Role, provider: m.Agents[ph.Role].Provider, stateBefore: m.Status}
	if ph.Role == workflow.RoleLogist {
		c.provider = workflow.RoleLogist
	}
	c.deadline, c.budgetBound = callDeadline(m, ph.Role)

	// The phase's effect may record events, add what the agent must see,
	// do the phase itself, find nothing to do, or stop the workflow.
	var prep *workflow.Prep
	if eff, err := e.effectFor(ph); err != nil {
		return nil, done, e.failWorkflow(tx, ph.Role, &workflow.Failure{Code: CodeWorkflowEffect, Reason: fmt.Sprintf("phase %s: %v", phase, err)})
	} else if eff != nil {
		if prep, err = eff.Prepare(tx, phase); err != nil {
			return nil, done, err
		}
		for _, r := range prep.Records {
			if err := tx.Append(r); err != nil {
				return nil, done, err
			}
		}
		if prep.State != "" && prep.State != m.Run.WorkflowState && prep.Fail == nil && prep.Skip == "" {
			// Saved before the intent, which may not wait for a manifest change.
			m.Run.WorkflowState = prep.State
			if err := tx.Commit(); err != nil {
				return nil, done, err
			}
		}
		if prep.Fail != nil {
			return nil, done, e.failWorkflow(tx, ph.Role, prep.Fail)
		}
		if prep.Wait != "" {
			m.Run.ErrorCode = CodeAwaitingSteward
			if err := tx.Transition(lifecycle.EvAwait, lifecycle.InterventionRequired, "", "SYSTEM", prep.Wait); err != nil {
				return nil, done, err
			}
			return nil, done, tx.Commit()
		}
		if prep.Skip == workflow.OutcomeContinue {
			// Only records this step (a chair's announcement): more to come.
			return nil, stepResult{}, tx.Commit()
		}
		if len(prep.Turns) > 0 || len(prep.Abandon) > 0 {
			te, ok := eff.(TurnEffect)
			if !ok {
				return nil, done, e.failWorkflow(tx, ph.Role, &workflow.Failure{Code: CodeWorkflowEffect, Reason: fmt.Sprintf("phase %s asks for turns but its effect cannot finish them", phase)})
			}
			if len(prep.Turns) == 0 {
				return nil, stepResult{}, e.prepareTurns(tx, c, prep)
			}
			c.teff = te
			if err := e.prepareTurns(tx, c, prep); err != nil {
				return nil, done, err
			}
			return c, stepResult{}, nil
		}
		if prep.Skip != "" {
			res, err := e.skipPhase(tx, wf, phase, prep.Skip, prep.State)
			return nil, res, err
		}
		if prep.Work != nil {
			c.work = prep.Work
		}
	}
	if ph.Role == workflow.RoleLogist && c.work == nil {
		return nil, done, e.failWorkflow(tx, ph.Role, &workflow.Failure{Code: CodeWorkflowEffect, Reason: fmt.Sprintf("phase %s is Logist's own but its effect gave it nothing to do", phase)})
	}

	st := tx.Log.State()
	if oi := st.OpenIntent; oi != nil && oi.Phase == phase && oi.Request != nil && oi.Interaction != nil {
		// The last call was cut off (crash, shutdown): ask again with the
		// same stored request, never a new one, and never record a
		// half-finished answer.
		stored, err := tx.Reveal(oi)
		if err != nil {
			return nil, done, fmt.Errorf("job %s: open the interrupted request: %w", tx.ID, err)
		}
		c.interaction, c.attempt, c.hreq = *oi.Interaction, oi.Attempt+1, stored.Request
		if agent.KillOrphan(tx.Dir, c.interaction) {
			tx.LogError("AGENT_ORPHAN_KILLED", c.role, c.attempt, fmt.Sprintf("killed the agent of interaction %d left running by a previous daemon", c.interaction))
		}
		c.req = requestFromHistory(tx, c, oi.Request)
		if err := tx.RecordError(agent.CodeInterrupted, c.role, c.attempt,
			fmt.Sprintf("re-attempting interrupted interaction %d with its stored request", c.interaction)); err != nil {
			return nil, done, err
		}
		return c, stepResult{}, nil
	}
	extra := ""
	if prep != nil {
		extra = prep.Context
	}
	sys, err := systemPrompt(m, tx.Dir, ph.Role)
	if ph.Role == workflow.RoleLogist {
		sys, err = "Logist plays this phase itself; this request records what it does.", nil
	}
	if err != nil {
		// A broken prompt override is the manifest's fault: a steward fixes it.
		m.Run.ErrorCode = agent.CodeConfig
		if terr := tx.Transition(lifecycle.EvAgentFailed, lifecycle.InterventionRequired, "", "SYSTEM", err.Error()); terr != nil {
			return nil, done, terr
		}
		return nil, done, tx.Commit()
	}
	c.interaction = st.NextInteraction
	c.attempt = m.Run.APIFailures + 1
	files := append(append([]string{}, m.ContextFiles...), m.Run.Evidence...)
	files = dedupe(files)
	meta := map[string]any{
		"role":             ph.Role,
		"phase":            phase,
		"provider":         c.provider,
		"accepted_formats": []string{workflow.ActionCompleted, workflow.ActionStuck, workflow.ActionRetry},
		"attempt":          c.attempt,
		"interaction":      c.interaction,
	}
	if m.Agents[ph.Role].Model != "" {
		meta["model"] = m.Agents[ph.Role].Model
	}
	if ph.Schema != "" {
		// Providers that ask for structured output ask for this one.
		meta[agent.MetaAnswerSchema] = ph.Schema
	}
	// An agent CLI that keeps sessions continues the one it had in this
	// phase (a RETRY sent the work back, or a steward resumed with
	// guidance) unless the manifest asks for a fresh start each time.
	if cmd := m.Agents[ph.Role].Command; cmd != nil && cmd.Preset != "" && cmd.Session != "fresh" {
		if sid := st.Sessions[history.SessionKey(phase, ph.Role)]; sid != "" {
			meta[agent.MetaResumeSession] = sid
		}
	}
	if m.CostThreshold != nil {
		meta["cost_threshold"] = *m.CostThreshold
	}
	if m.TimeThresholdMinutes != nil {
		meta["time_threshold_minutes"] = *m.TimeThresholdMinutes
	}
	if m.Seed != nil {
		meta["seed"] = *m.Seed
	}
	c.hreq = &history.Request{
		Prompt:          renderPrompt(sys, m.TaskDescription, ph, files, m.Run, extra),
		FilesContext:    files,
		Metadata:        meta,
		SystemPrompt:    sys,
		TaskDescription: m.TaskDescription,
		WorkspacePath:   tx.Store().Workspace(tx.ID),
	}
	c.req = requestFromHistory(tx, c, c.hreq)
	if err := tx.Store().EnsureWorkspace(tx.ID); err != nil {
		return nil, done, err
	}
	n := c.interaction
	// A command agent's request file is written while the intent's fsync
	// runs: neither needs the other, and the agent starts after both.
	var written chan error
	if cfg := m.Agents[ph.Role]; c.work == nil && cfg.Provider == "command" && cfg.Command != nil && cfg.Command.Preset == "" {
		body := agent.RequestBody(c.req)
		written = make(chan error, 1)
		go func() { written <- agent.WriteRequest(tx.Dir, n, body) }()
	}
	// With the start still uncommitted, the intent joins its unit.
	err = tx.CommitWithIntent(&history.Record{Type: history.TypeIntent, Interaction: &n, Phase: phase, Role: ph.Role,
		Attempt: c.attempt, StateBefore: string(m.Status), Request: c.hreq})
	if written != nil {
		// On failure the provider writes it again and reports why.
		c.req.FileWritten = <-written == nil
	}
	if err != nil {
		return nil, done, err
	}
	return c, stepResult{}, nil
}

func requestFromHistory(tx *jobtx.Tx, c *call, h *history.Request) *agent.Request {
	return &agent.Request{
		JobID: tx.ID, Phase: c.phase, Role: c.role, ContextFiles: h.FilesContext, SystemPrompt: h.SystemPrompt,
		TaskDescription: h.TaskDescription, Prompt: h.Prompt, Metadata: h.Metadata,
		Workspace: tx.Store().Workspace(tx.ID), JobDir: tx.Dir, Interaction: c.interaction,
		CallIndex: tx.Log.State().Responses[c.role],
	}
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// callDeadline is the smaller of the role's call timeout and what is left
// of the job's time budget.
func callDeadline(m *manifest.Manifest, role string) (time.Duration, bool) {
	d := m.CallTimeout(role)
	if b := m.TimeBudget(); b > 0 {
		left := b - time.Duration(m.Metrics.CumulativeTimeSeconds*float64(time.Second))
		if left < d {
			return max(left, time.Millisecond), true
		}
	}
	return d, false
}

// enforceBudgets halts a job at or over its cost or time budget. It runs
// before every call, so a budget is overshot by at most one call.
func (e *Engine) enforceBudgets(tx *jobtx.Tx) (bool, error) {
	m := tx.M
	switch {
	case m.OverCost():
		reason := fmt.Sprintf("cost %.2f cents reached the budget of %.2f cents; raise it with logist resume %s --cost-threshold CENTS", m.Metrics.CumulativeCost, *m.CostThreshold, tx.ID)
		m.Run.ErrorCode = "COST_BUDGET"
		if err := tx.Transition(lifecycle.EvCostExceeded, lifecycle.HaltedCost, "", "SYSTEM", reason); err != nil {
			return true, err
		}
		e.Env.Obs.Halt("cost")
		return true, tx.Commit()
	case m.OverTime():
		reason := fmt.Sprintf("time %.1fs reached the budget of %.1f minutes; raise it with logist resume %s --time-threshold-minutes M", m.Metrics.CumulativeTimeSeconds, *m.TimeThresholdMinutes, tx.ID)
		m.Run.ErrorCode = "TIME_BUDGET"
		if err := tx.Transition(lifecycle.EvTimeExceeded, lifecycle.HaltedTime, "", "SYSTEM", reason); err != nil {
			return true, err
		}
		e.Env.Obs.Halt("time")
		return true, tx.Commit()
	}
	return false, nil
}

// finish runs under the job lock after a call: account its cost and time,
// record the response exactly once, and apply the escalation matrix.
func (e *Engine) finish(ctx context.Context, tx *jobtx.Tx, c *call, out *agent.Result, callErr error, elapsed time.Duration, timedOut bool) (stepResult, error) {
	m := tx.M
	done := stepResult{done: true}
	cost := 0.0
	if out != nil {
		cost = out.CostUSD
	} else if ae, ok := agent.AsError(callErr); ok {
		cost = ae.CostUSD
	}
	m.Metrics.CumulativeCost += cost * 100
	m.Metrics.CumulativeTimeSeconds += elapsed.Seconds()
	resp := &history.Response{EvidenceFiles: []string{}, ExecutionTimeSeconds: round3(elapsed.Seconds()), CostUSD: cost}
	if out != nil {
		resp.RawResponse = string(out.Raw)
		resp.SessionID, resp.Tokens, resp.Stderr = out.SessionID, out.Tokens, truncate(out.Stderr, 4096)
	}
	n := c.interaction
	// agent_calls counts calls with a recorded outcome, one per response
	// record; an interrupted call is asked again and counted then.
	record := func() error {
		m.Metrics.AgentCalls++
		return tx.Append(&history.Record{Type: history.TypeResponse, Interaction: &n, Phase: c.phase, Role: c.role,
			Attempt: c.attempt, StateBefore: string(c.stateBefore), Response: resp})
	}
	outcome := func(o string) { e.Env.Obs.AgentCall(c.role, c.provider, o, elapsed, cost) }

	// Cancelled by a steward: the job changed under us; record what the
	// call produced and leave the status as the steward set it.
	if !m.Status.Active() || m.Phase() != c.phase {
		resp.Status, resp.ErrorCode, resp.Error = history.StatusError, agent.CodeCanceled, fmt.Sprintf("job became %s during the call", m.Status)
		outcome("canceled")
		if err := record(); err != nil {
			return done, err
		}
		// The steward's command already wrote jobHistory.json; refresh it
		// so the parked job's record includes this response.
		tx.MarkParked()
		return done, tx.Commit()
	}
	// Daemon shutdown: no response is written, so the next start asks again
	// with the same request.
	if ctx.Err() != nil {
		outcome("interrupted")
		if err := tx.RecordError(agent.CodeInterrupted, c.role, c.attempt, "agent call interrupted by shutdown; it will be re-attempted with the same request"); err != nil {
			return done, err
		}
		return done, tx.Commit()
	}
	if timedOut {
		resp.Status, resp.ErrorCode = history.StatusTimeout, agent.CodeTimeout
		outcome("timeout")
		if c.budgetBound {
			resp.Error = fmt.Sprintf("time budget ran out after %.1fs; agent killed", elapsed.Seconds())
			if err := record(); err != nil {
				return done, err
			}
			tx.LogError(agent.CodeTimeout, c.role, c.attempt, resp.Error)
			m.Run.ErrorCode = "TIME_BUDGET"
			reason := fmt.Sprintf("time budget of %.1f minutes ran out during the %s call; raise it with logist resume %s --time-threshold-minutes M", *m.TimeThresholdMinutes, c.role, tx.ID)
			if err := tx.Transition(lifecycle.EvTimeExceeded, lifecycle.HaltedTime, "", "SYSTEM", reason); err != nil {
				return done, err
			}
			e.Env.Obs.Halt("time")
			return done, tx.Commit()
		}
		resp.Error = fmt.Sprintf("call exceeded its timeout of %s; agent killed", c.deadline)
		return done, e.escalate(tx, c, resp, record, lifecycle.EvAgentFailed, agent.CodeTimeout, resp.Error)
	}
	if ae, ok := agent.AsError(callErr); ok && ae.Code == agent.CodeAwaitingReply {
		// A role played by a human: the intent stays open until logist
		// reply files the answer; the job waits where everyone sees it.
		m.Run.ErrorCode = CodeAwaitingReply
		reason := fmt.Sprintf("%s (the %s's answer, validated like an agent's)", ae.Msg, c.role)
		if err := tx.Transition(lifecycle.EvAwait, lifecycle.InterventionRequired, "", "SYSTEM", reason); err != nil {
			return done, err
		}
		return done, tx.Commit()
	}
	if callErr != nil {
		ae, ok := agent.AsError(callErr)
		if !ok {
			ae = &agent.Error{Code: agent.CodeAPIError, Transient: true, Msg: callErr.Error()}
		}
		resp.Status, resp.ErrorCode, resp.Error = history.StatusError, ae.Code, ae.Msg
		resp.RawResponse, resp.Stderr = truncate(string(ae.Partial), 64<<10), truncate(ae.Stderr, 4096)
		if ae.Retake {
			resp.RawResponse = "" // partial generation is never recorded
		}
		if ae.Transient {
			outcome("error")
			m.Run.APIFailures++
			if m.Run.APIFailures <= m.MaxAPIRetries() {
				if ae.Retake {
					// A cut stream: no partial text is written as a response;
					// the intent stays open, so the next step asks the same
					// turn again with the same stored request.
					if err := tx.RecordError("AGENT_STREAM_FAIL", c.role, c.attempt, ae.Code+": "+ae.Msg); err != nil {
						return done, err
					}
				} else if err := record(); err != nil {
					return done, err
				} else {
					tx.LogError(ae.Code, c.role, c.attempt, ae.Msg)
				}
				e.Env.Obs.Retry("api_error")
				if err := tx.Commit(); err != nil {
					return done, err
				}
				// A server that said when to come back (HTTP Retry-After)
				// is not asked sooner.
				return stepResult{backoff: max(e.backoff(m.BackoffInitial(), m.Run.APIFailures), min(ae.RetryAfter, 5*time.Minute))}, nil
			}
			reason := fmt.Sprintf("%s after %d automatic retries: %s", ae.Code, m.MaxAPIRetries(), ae.Msg)
			return done, e.escalate(tx, c, resp, record, lifecycle.EvAgentFailed, ae.Code, reason)
		}
		outcome("error")
		return done, e.escalate(tx, c, resp, record, lifecycle.EvAgentFailed, ae.Code, ae.Msg)
	}

	wf, err := m.ResolveWorkflow()
	if err != nil {
		return done, err
	}
	ph := wf.Phases[c.phase]
	v := response.Judge(out.Raw, response.Contract{Schema: ph.Schema, Workspace: response.Dir(tx.Store().Workspace(tx.ID))})
	if v.Err != nil {
		resp.Status, resp.ErrorCode, resp.Error = history.StatusError, v.Err.Code, v.Err.Reason
		resp.Violations = v.Record()
		outcome("invalid")
		e.Env.Obs.Violation(v.Err.Code)
		for _, x := range v.Violations {
			if x != v.Err {
				// Every violation is audited, not only the one the answer
				// is refused for.
				tx.LogError(x.Code, c.role, c.attempt, "invalid agent answer (also): "+x.Explain())
			}
		}
		return done, e.escalate(tx, c, resp, record, lifecycle.EvInvalid, v.Err.Code, "invalid agent answer: "+v.Err.Explain())
	}
	ans, warns, obj := v.Answer, v.Warnings, v.Object
	outcome("ok")
	resp.Status, resp.Action, resp.EvidenceFiles, resp.Summary = history.StatusSuccess, ans.Action, ans.EvidenceFiles, ans.Summary
	for _, w := range warns {
		resp.Warnings = append(resp.Warnings, w.Detail)
		tx.LogError(w.Code, c.role, c.attempt, w.Detail)
	}
	oc := &workflow.Outcome{Name: ans.Action}
	if eff, err := e.effectFor(ph); err != nil {
		return done, err
	} else if eff != nil {
		if oc, err = eff.Finish(tx, c.phase, ans, obj); err != nil {
			return done, err
		}
	}
	if oc.Fail != nil {
		resp.NewStatus = string(lifecycle.InterventionRequired)
		resp.Outcome = workflow.OutcomeFailed
		if err := record(); err != nil {
			return done, err
		}
		if err := appendAll(tx, oc.Records); err != nil {
			return done, err
		}
		if oc.State != "" {
			m.Run.WorkflowState = oc.State
		}
		return done, e.failWorkflow(tx, c.role, oc.Fail)
	}
	return e.apply(tx, c, ans, resp, record, oc)
}

func appendAll(tx *jobtx.Tx, recs []*history.Record) error {
	for _, r := range recs {
		if err := tx.Append(r); err != nil {
			return err
		}
	}
	return nil
}

// escalate records a failed response and moves the job to
// INTERVENTION_REQUIRED with the reason (the seed's STUCK rows).
func (e *Engine) escalate(tx *jobtx.Tx, c *call, resp *history.Response, record func() error, ev lifecycle.Event, code, reason string) error {
	resp.NewStatus = string(lifecycle.InterventionRequired)
	if err := record(); err != nil {
		return err
	}
	tx.LogError(code, c.role, c.attempt, reason)
	tx.M.Run.ErrorCode = code
	tx.M.Run.APIFailures = 0
	tx.M.Audit(tx.Now(), c.role, "STUCK", code+": "+truncate(reason, 300), nil)
	if err := tx.Transition(ev, lifecycle.InterventionRequired, "", c.role, reason); err != nil {
		return err
	}
	return tx.Commit()
}

// apply follows a valid answer along the workflow.
func (e *Engine) apply(tx *jobtx.Tx, c *call, ans *response.Answer, resp *history.Response, record func() error, oc *workflow.Outcome) (stepResult, error) {
	m := tx.M
	done := stepResult{done: true}
	wf, err := m.ResolveWorkflow()
	if err != nil {
		return done, err
	}
	target, err := wf.Next(c.phase, oc.Name)
	if err != nil {
		return done, err
	}
	// An effect's outcome other than the answer's action: a move forward
	// (like COMPLETED) unless it sends work back (like RETRY).
	retry := ans.Action == workflow.ActionRetry || oc.Retry
	advance := !retry && oc.Name != workflow.ActionStuck && target != workflow.TargetIntervention
	m.Run.APIFailures = 0
	m.Run.LastSummary = ans.Summary
	m.Audit(tx.Now(), c.role, ans.Action, truncate(ans.Summary, 300), ans.EvidenceFiles)

	var ev lifecycle.Event
	var to lifecycle.Status
	toPhase := ""
	reason := ""
	switch {
	case target == workflow.TargetIntervention:
		ev, to = lifecycle.EvStuck, lifecycle.InterventionRequired
		reason = fmt.Sprintf("%s answered %s: %s", c.role, ans.Action, ans.Summary)
		m.Run.ErrorCode = "AGENT_STUCK"
		if oc.Name != ans.Action {
			reason = fmt.Sprintf("%s: %s", oc.Name, oc.Feedback)
			m.Run.ErrorCode = oc.Name
		}
	case target == workflow.TargetSuccess:
		ev, to = lifecycle.EvSucceed, lifecycle.Success
	case retry:
		m.Run.PhaseRetries++
		if m.Run.PhaseRetries > m.MaxRetries() {
			ev, to = lifecycle.EvRetryLimit, lifecycle.InterventionRequired
			reason = fmt.Sprintf("RETRY limit of %d reached in phase %s; last summary: %s", m.MaxRetries(), c.phase, ans.Summary)
			m.Run.ErrorCode = "RETRY_LIMIT"
		} else {
			ev, to, toPhase = lifecycle.EvRetry, wf.Phases[target].Status, target
			e.Env.Obs.Retry("agent_retry")
		}
	default:
		ev, to, toPhase = lifecycle.EvAdvance, wf.Phases[target].Status, target
	}
	resp.NewStatus = string(to)
	if oc.Name != ans.Action {
		resp.Outcome, resp.SentBack = oc.Name, oc.Retry
	}
	if err := record(); err != nil {
		return done, err
	}
	if err := appendAll(tx, oc.Records); err != nil {
		return done, err
	}
	if oc.State != "" {
		m.Run.WorkflowState = oc.State
	}

	// Context for whoever plays next.
	switch {
	case oc.Retry:
		m.Run.Feedback = oc.Feedback
		if m.Run.Feedback == "" {
			m.Run.Feedback = ans.Summary
		}
	case advance:
		// PhaseRetries is not reset here: a supervisor RETRY sends the work
		// back after the worker's COMPLETED, and resetting on COMPLETED
		// would let that loop run forever. Only a steward resets it.
		m.Run.PreviousSummary, m.Run.Feedback = ans.Summary, oc.Feedback
		m.Run.Evidence = ans.EvidenceFiles
	case ans.Action == workflow.ActionRetry:
		m.Run.Feedback = ans.Summary
		if len(ans.EvidenceFiles) > 0 {
			m.Run.Evidence = ans.EvidenceFiles
		}
	}
	if to.Active() || to == lifecycle.Success {
		m.Run.Guidance = "" // delivered in this call's prompt
	}

	// A phase boundary is a safe place to resume from.
	if advance {
		n := c.interaction
		cp := &history.RecoveryPoint{
			CheckpointID: fmt.Sprintf("cp-%04d-%s", n, c.phase), Sequence: n, ResumePhase: toPhase, CanResumeFrom: true,
			Description:   fmt.Sprintf("%s completed phase %s: %s", c.role, c.phase, truncate(ans.Summary, 200)),
			RollbackFiles: ans.EvidenceFiles,
			Metadata:      map[string]any{"evidence_count": len(ans.EvidenceFiles), "role": c.role, "phase": c.phase, "summary": ans.Summary},
		}
		e.snapshot(tx, cp)
		if err := tx.Append(&history.Record{Type: history.TypeRecoveryPoint, Phase: c.phase, Role: c.role, RecoveryPoint: cp}); err != nil {
			return done, err
		}
		// jobHistory.json is refreshed when the job stops running (the
		// transition marks that), not at every phase boundary: rebuilding
		// it costs the whole history, and logist history --format json
		// always builds a current one.
		m.Run.CheckpointID = cp.CheckpointID
	}
	if err := tx.Transition(ev, to, toPhase, c.role, reason); err != nil {
		return done, err
	}
	if err := tx.Commit(); err != nil {
		return done, err
	}
	return stepResult{done: !to.Active()}, nil
}

// snapshot copies the workspace for a recovery point. A failure is logged
// and leaves the point without a snapshot: the job goes on, only rollback
// to this point is lost.
func (e *Engine) snapshot(tx *jobtx.Tx, cp *history.RecoveryPoint) {
	info, err := snapshot.Take(tx.Store().Workspace(tx.ID), tx.Dir, cp.CheckpointID)
	if err != nil {
		tx.LogError("SNAPSHOT_FAILED", "SYSTEM", 0, err.Error())
		return
	}
	cp.Snapshot = &history.SnapshotRef{Listing: info.Listing, Files: info.Files, Bytes: info.Bytes, New: info.New}
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…[truncated]"
}
