package runner

import (
	"fmt"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/workflow"
)

// Requests: what an agent is asked, built from the manifest (prompt,
// context files, metadata), recorded as the call's intent, and handed to
// the agent (a command agent also gets it as a file).

// newRequest is the request of a new call c of phase ph: sys is the role's
// system prompt, extra what the phase's effect adds to the prompt, params
// the model parameters c's provider sends (recorded as sent, not as the
// manifest wrote them).
func newRequest(tx *jobtx.Tx, c *call, ph workflow.Phase, sys, extra string, params agent.Params) *history.Request {
	m := tx.M
	files := dedupe(append(append([]string{}, m.ContextFiles...), m.Run.Evidence...))
	meta := map[string]any{
		"role":             ph.Role,
		"phase":            c.phase,
		"provider":         c.provider,
		"accepted_formats": []string{workflow.ActionCompleted, workflow.ActionStuck, workflow.ActionRetry},
		"attempt":          c.attempt,
		"interaction":      c.interaction,
	}
	params.Record(meta)
	if ph.Schema != "" {
		// Providers that ask for structured output ask for this one.
		meta[history.MetaAnswerSchema] = ph.Schema
	}
	// An agent CLI that keeps sessions continues the one it had in this
	// phase (a RETRY sent the work back, or a steward resumed with
	// guidance) unless the manifest asks for a fresh start each time.
	if cmd := m.Agents[ph.Role].Command; cmd != nil && cmd.Preset != "" && cmd.Session != "fresh" {
		if sid := tx.State().Sessions[history.SessionKey(c.phase, ph.Role)]; sid != "" {
			meta[agent.MetaResumeSession] = sid
		}
	}
	// The budgets the job runs under, its own or logistd's defaults
	// (manifest.Budgets, the one rule; seed 002's request metadata).
	for _, b := range m.Budgets(m.Run.DefaultBudgets) {
		switch b.Kind {
		case manifest.BudgetCost:
			meta["cost_threshold"] = b.Limit
		case manifest.BudgetTime:
			meta["time_threshold_minutes"] = b.Limit
		}
	}
	if m.Seed != nil {
		meta["seed"] = *m.Seed
	}
	return &history.Request{
		Prompt:          renderPrompt(sys, m.TaskDescription, ph, files, m.Run, extra),
		FilesContext:    files,
		Metadata:        meta,
		SystemPrompt:    sys,
		TaskDescription: m.TaskDescription,
		WorkspacePath:   tx.Store().Workspace(tx.ID),
	}
}

// requestFromHistory is the agent's request for c from its recorded one.
func requestFromHistory(tx *jobtx.Tx, c *call, h *history.Request) *agent.Request {
	return &agent.Request{
		JobID: tx.ID, Phase: c.phase, Role: c.role, ContextFiles: h.FilesContext, SystemPrompt: h.SystemPrompt,
		TaskDescription: h.TaskDescription, Prompt: h.Prompt, Metadata: h.Metadata,
		Workspace: tx.Store().Workspace(tx.ID), JobDir: tx.Dir, Interaction: c.interaction,
		CallIndex: tx.State().Responses[c.role],
	}
}

// intent is c's intent record: its request, written before the call.
func (c *call) intent() *history.Record {
	n := c.interaction
	return &history.Record{Type: history.TypeIntent, Interaction: &n, Phase: c.phase, Role: c.role,
		Attempt: c.attempt, StateBefore: string(c.stateBefore), Request: c.hreq}
}

// writeRequestFile starts writing a command agent's request file, if the
// agent reads one Logist writes, and returns what waits for it: the file
// is written while the intent's fsync runs (neither needs the other, and
// the agent starts after both). A write the job's storage refused
// (storageRefused: a full disk or quota, a read-only file system, an I/O
// error, access denied) is the job's storage failing, not its agent: wait
// returns it, the step ends with it before the agent is called (nothing
// asked, counted or paid), and the scheduler stalls the job and runs it
// again as for any write the storage refuses (STORAGE_WRITE,
// STORAGE_DENIED). On another failure the provider writes the file again
// and reports why.
func (e *Engine) writeRequestFile(tx *jobtx.Tx, c *call) (wait func() error) {
	if c.work != nil {
		return func() error { return nil }
	}
	return e.writeRequest(tx, c.role, c.req)
}

// writeRequest is writeRequestFile for request req of role (a call's, or
// a turn's), through the one seam (Engine.WriteRequest).
func (e *Engine) writeRequest(tx *jobtx.Tx, role string, req *agent.Request) (wait func() error) {
	cfg := tx.M.Agents[role]
	if cfg.Provider != "command" || cfg.Command == nil || cfg.Command.Preset != "" {
		return func() error { return nil }
	}
	body := agent.RequestBody(req)
	written := make(chan error, 1)
	go func() { written <- e.WriteRequest(tx.Dir, req.Interaction, body) }()
	return func() error {
		err := <-written
		req.FileWritten = err == nil
		if storageRefused(err) {
			// Named before the first colon for runErrorCode: no history
			// or manifest write, so STORAGE_WRITE (or STORAGE_DENIED).
			return fmt.Errorf("write the request file of interaction %d: %w", req.Interaction, err)
		}
		return nil
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
