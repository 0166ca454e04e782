package runner

import (
	"errors"
	"fmt"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/effect"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/workflow"
)

// prepare runs under the job lock before a call: start the job, enforce
// budgets, let the phase's effect prepare it, and write the request
// (intent) durably. It returns nil call when there is nothing to call.
// What it decides are outcomes that apply performs; only a turn step's
// intents are appended as they are made (turns.go).
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
	stop := func(o outcome) (*call, stepResult, error) {
		res, err := e.apply(tx, o)
		return nil, res, err
	}
	// Never run an agent in a workspace that is not the job's own folder
	// (a symlink out of the job folder, a file): a steward must fix it.
	// Checked before anything touches the workspace.
	ws, err := checkWorkspace(tx.Dir)
	if err != nil {
		var unsafe *unsafeWorkspaceError
		if !errors.As(err, &unsafe) {
			return nil, done, err
		}
		return stop(outcome{code: codes.WorkspaceUnsafe, logs: []logEntry{{code: codes.WorkspaceUnsafe, actor: "SYSTEM", msg: err.Error()}},
			transition: &transition{lifecycle.EvAgentFailed, lifecycle.InterventionRequired, "", "SYSTEM", err.Error()}})
	}
	if o := e.gitRefused(tx); o != nil {
		return stop(*o)
	}
	exec, o := e.containment(tx)
	if o != nil {
		return stop(*o)
	}
	if m.Status == lifecycle.Pending {
		if o := e.checkPrograms(tx); o != nil {
			return stop(*o)
		}
		if o := e.overBudget(tx); o != nil {
			return stop(*o)
		}
		if o := e.makeWorkspace(tx); o != nil {
			return stop(*o)
		}
		if m.Workspace != nil {
			ws = seenNothing // made from its source, maybe
		}
		o, err := e.start(tx, wf, &ws)
		if err != nil {
			return nil, done, err
		}
		if _, err := e.apply(tx, o); err != nil {
			return nil, done, err
		}
		// The new folder's entries (placement, history, workspace, the
		// start's snapshot) are all made: their fsyncs start now, beside
		// the request and the unit's encoding, and the unit's append
		// waits for them (history.Log.SettleStart).
		_ = tx.Log.SettleStart()
	}
	if o := e.overBudget(tx); o != nil {
		return stop(*o)
	}
	phase := m.Phase()
	ph, ok := wf.Phases[phase]
	if !ok {
		return nil, done, fmt.Errorf("job %s: phase %q is not in workflow %s", tx.ID, phase, wf.Name)
	}
	c := &call{phase: phase, role: ph.Role, provider: m.Agents[ph.Role].Provider, stateBefore: m.Status, exec: exec,
		meter: e.Meter, budget: costLeft(m, e.defaults(m))}
	if ph.Role == workflow.RoleLogist {
		c.provider = workflow.RoleLogist
	}
	c.deadline, c.budgetBound = callDeadline(m, e.defaults(m), ph.Role)

	// The phase's effect may record events, add what the agent must see,
	// do the phase itself, find nothing to do, or stop the workflow.
	extra := ""
	eff, err := e.effectFor(ph)
	if err != nil {
		return stop(workflowFailed(ph.Role, &workflow.Failure{Code: codes.WorkflowEffect, Reason: fmt.Sprintf("phase %s: %v", phase, err)}))
	}
	if eff != nil {
		prep, err := eff.Prepare(tx, phase)
		if err != nil {
			return nil, done, err
		}
		o, err := e.prepared(tx, wf, c, eff, prep)
		if err != nil {
			return nil, done, err
		}
		if o != nil {
			return stop(*o)
		}
		if len(c.turns) > 0 {
			return c, stepResult{}, nil
		}
		extra = prep.Context
	}
	if ph.Role == workflow.RoleLogist && c.work == nil {
		return stop(workflowFailed(ph.Role, &workflow.Failure{Code: codes.WorkflowEffect, Reason: fmt.Sprintf("phase %s is Logist's own but its effect gave it nothing to do", phase)}))
	}

	if oi := tx.State().OpenIntent; oi != nil && oi.Phase == phase && oi.Request != nil && oi.Interaction != nil {
		// The last call was cut off (crash, shutdown): ask again with the
		// same stored request, never a new one, and never record a
		// half-finished answer. The agent gets it as it was before the
		// history sealed it (encrypt_history), never the ciphertext.
		stored, err := tx.Reveal(oi)
		if err != nil {
			return nil, done, fmt.Errorf("job %s: open the interrupted request: %w", tx.ID, err)
		}
		c.interaction, c.attempt, c.hreq = *oi.Interaction, oi.Attempt+1, stored.Request
		e.reconcileGit(tx)
		if c.work == nil {
			c.prov, c.perr = e.providerFor(m, c.role)
		}
		if agent.KillOrphan(tx.Dir, c.interaction) {
			// Logged now: a run the disk stalls below has none to kill
			// the next time.
			tx.LogCode(codes.AgentOrphanKilled, c.role, c.attempt,
				fmt.Sprintf("killed the agent of interaction %d left running by a previous daemon", c.interaction))
		}
		// The agent gets the request as first sent: opened where the
		// history seals it, byte for byte (history lists are never null).
		c.req = requestFromHistory(tx, c, stored.Request)
		c.req.Next = e.nextCall(tx, wf, c)
		msg := fmt.Sprintf("interrupted interaction %d: asking the agent again with its stored request", c.interaction)
		if agent.Adopts(tx.Dir, c.interaction) {
			// Its request file is left as it is: the adopted agent may
			// still be reading it, and a rewrite truncates it first.
			msg = fmt.Sprintf("interrupted interaction %d: its call outlived the previous daemon under its launcher and is adopted: its answer is taken, the agent is not asked again", c.interaction)
		} else if err := e.writeRequestFile(tx, c)(); err != nil {
			// Written again before anything is recorded: a disk that
			// still refuses it stalls the run with nothing added to the
			// history (writeRequestFile).
			return nil, done, err
		}
		var o outcome
		o.logs = append(o.logs, logEntry{code: codes.AgentInterrupted, actor: c.role, attempt: c.attempt, record: true, msg: msg})
		o.hold = true // nothing changed but the record, written at once
		if _, err := e.apply(tx, o); err != nil {
			return nil, done, err
		}
		return c, stepResult{}, nil
	}

	sys, err := systemPrompt(m, tx.Dir, ph.Role)
	if ph.Role == workflow.RoleLogist {
		sys, err = "Logist plays this phase itself; this request records what it does.", nil
	}
	if err != nil {
		// A broken prompt override is the manifest's fault: a steward fixes it.
		return stop(outcome{code: codes.AgentConfig,
			transition: &transition{lifecycle.EvAgentFailed, lifecycle.InterventionRequired, "", "SYSTEM", err.Error()}})
	}
	c.interaction = tx.State().NextInteraction
	c.attempt = m.Run.APIFailures + 1
	var params agent.Params
	if c.work == nil {
		c.prov, c.perr = e.providerFor(m, c.role)
		if c.perr == nil {
			params = agent.SentParams(c.prov)
		}
	}
	c.hreq = newRequest(tx, c, ph, sys, extra, params)
	c.req = requestFromHistory(tx, c, c.hreq)
	c.req.Next = e.nextCall(tx, wf, c)
	if err := ensureWorkspace(tx, &ws); err != nil {
		return nil, done, err
	}
	if eff == nil {
		c.before = e.takeScan(tx) // a snapshot in this transaction walked it (changes.go)
	}
	wait := e.writeRequestFile(tx, c)
	_, err = e.apply(tx, outcome{intent: c.intent(), more: true})
	if werr := wait(); err == nil {
		// The intent is recorded and its call not made: the run asks
		// again with the stored request once the disk takes the file.
		err = werr
	}
	if err != nil {
		return nil, done, err
	}
	return c, stepResult{}, nil
}

// start enters the job's first phase (a PENDING job): at its very first
// start, with a recovery point of the workspace as the job found it (ws:
// what the transaction has seen of it). A
// plain agent phase (no effect, not Logist's own, no cut-off call to
// resume) records its intent next with nothing in between that needs the
// start on disk: the start's unit then takes the intent with it
// (outcome.hold, then outcome.intent), one history fsync fewer before the
// agent starts. Every other way out of prepare commits it.
func (e *Engine) start(tx *jobtx.Tx, wf *workflow.Workflow, ws *workspaceSeen) (outcome, error) {
	m := tx.M
	phase := m.Phase()
	if phase == "" {
		phase = wf.Start
	}
	var o outcome
	if m.Run.StartedAt == "" {
		if err := ensureWorkspace(tx, ws); err != nil {
			return o, err
		}
		o.start, o.point = true, startPoint(phase)
	}
	ph := wf.Phases[phase]
	o.transition = &transition{lifecycle.EvStart, ph.Status, phase, "SYSTEM", ""}
	if e.Contain != nil {
		// The history says which containment the job (re)started under.
		o.transition.reason = "processes contained by sandbox " + m.Run.Sandbox
		o.contained = m.Run.Sandbox
	}
	o.hold = plainPhase(wf, phase) && tx.State().OpenIntent == nil
	o.more = true
	return o, nil
}

// prepared follows what the phase's effect prepared (prep): its records
// and new state are written first, then either the phase stops here (the
// outcome returned), or c is played: by turns (c.turns), by Logist itself
// (c.work), or by the phase's agent.
func (e *Engine) prepared(tx *jobtx.Tx, wf *workflow.Workflow, c *call, eff effect.Effect, prep *workflow.Prep) (*outcome, error) {
	// The effect's records are written at once (the manifest has no
	// change in progress); then a new state is committed, before the
	// intent, which may not wait for a manifest change. A step that ends
	// here (a skip) keeps its state with the outcome that ends it.
	first := outcome{records: prep.Records, marks: prep.Marks, hold: prep.Point == nil}
	if prep.Point != nil {
		// A safe boundary: its recovery point is committed with them.
		first.point = gamePoint(tx, c.phase, prep.Point)
	}
	if _, err := e.apply(tx, first); err != nil {
		return nil, err
	}
	if prep.Fail == nil && prep.Skip == "" && prep.State != tx.M.Run.WorkflowState {
		if _, err := e.apply(tx, outcome{state: prep.State}); err != nil {
			return nil, err
		}
	}
	switch {
	case prep.Fail != nil:
		o := workflowFailed(c.role, prep.Fail)
		return &o, nil
	case prep.Wait != "":
		return &outcome{code: codes.AwaitingSteward,
			transition: &transition{lifecycle.EvAwait, lifecycle.InterventionRequired, "", "SYSTEM", prep.Wait}}, nil
	case prep.Skip == workflow.OutcomeContinue:
		// Only records this step (a chair's announcement) and the state
		// they leave: more to come.
		return &outcome{state: prep.State, more: true}, nil
	case len(prep.Turns) > 0 || len(prep.Abandon) > 0:
		te, ok := eff.(effect.TurnEffect)
		if !ok {
			o := workflowFailed(c.role, &workflow.Failure{Code: codes.WorkflowEffect, Reason: fmt.Sprintf("phase %s asks for turns but its effect cannot finish them", c.phase)})
			return &o, nil
		}
		if err := e.prepareTurns(tx, c, prep); err != nil {
			return nil, err
		}
		if len(prep.Turns) == 0 {
			return &outcome{more: true, hold: true}, nil // written as they were made
		}
		c.teff = te
		return nil, nil
	case prep.Skip != "":
		o, err := skipped(wf, c.phase, prep.Skip, prep.State, prep.Reason)
		return &o, err
	}
	if prep.Work != nil {
		c.work = prep.Work
	}
	return nil, nil
}

// plainPhase says whether phase is played by an agent with nothing in
// between that needs the job's last change on disk first: no effect, not
// Logist's own. With no cut-off call to resume there, the phase's next
// intent can take that change into its unit (one history fsync): the
// start of a job, or the outcome of the call before (Engine.chains).
func plainPhase(wf *workflow.Workflow, phase string) bool {
	ph, ok := wf.Phases[phase]
	return ok && ph.Effect == "" && ph.Role != workflow.RoleLogist
}
