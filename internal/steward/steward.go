// Package steward applies a human steward's commands to a job: submit,
// activate, resume, halt. Each runs as one job transaction (internal/jobtx)
// under the job's lock, checks the status first and records itself in the
// history before the manifest changes, so a command takes effect exactly
// once and never races the daemon, whether or not the daemon runs. The
// daemon sees the new manifest through its watcher and acts on it (starts
// the job, or kills the call in flight of a halted one).
package steward

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/effect"
	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/snapshot"
	"github.com/logist/logist/internal/workflow"
)

// Steward runs commands for one person.
type Steward struct {
	Env  *jobtx.Env
	User string
	// Effects are the workflows' effects (the composition root's registry,
	// internal/builtins): halting a job lets its phase's effect record what
	// its workflow records (effect.Halter), and a decision goes to the
	// effect that awaits it (effect.Decider).
	Effects effect.Registry
}

// New returns a steward acting as the current OS user.
func New(env *jobtx.Env, effects effect.Registry) *Steward {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return &Steward{Env: env, User: name, Effects: effects}
}

// phaseEffect is the effect of the phase job m is in, with m's workflow:
// nil if the phase names none or one this Logist does not have.
func (s *Steward) phaseEffect(id string, m *manifest.Manifest) (effect.Effect, *workflow.Workflow, error) {
	wf, err := m.ResolveWorkflow()
	if err != nil {
		return nil, nil, err
	}
	ph, ok := wf.Phases[m.Phase()]
	if !ok {
		return nil, wf, fmt.Errorf("job %s is in no phase of workflow %s", id, wf.Name)
	}
	return s.Effects[ph.Effect], wf, nil
}

func commandID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// ExistsError says a submitted job id is taken.
type ExistsError struct{ ID string }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("job %s already exists; choose another job_id or file name", e.ID)
}

// Submit validates a manifest file and places it in the jobs folder as a
// new job, with the prompt files it names (PromptFiles). It returns the
// job id.
func (s *Steward) Submit(file string) (string, *manifest.Manifest, error) {
	m, err := manifest.ReadFile(file)
	if err != nil {
		return "", nil, err
	}
	if es := ShellPrograms("").Check(file, m); len(es) > 0 {
		return "", nil, es
	}
	if es := CheckSource(file, m); len(es) > 0 {
		return "", nil, es
	}
	if es := CheckEffects(file, m, s.Effects); len(es) > 0 {
		return "", nil, es
	}
	id := m.JobID
	if id == "" {
		base := filepath.Base(file)
		if base == "job.json" {
			id = filepath.Base(filepath.Dir(file))
		} else {
			id = strings.TrimSuffix(base, filepath.Ext(base))
		}
	}
	if err := manifest.ValidID(id); err != nil {
		return "", nil, &manifest.Error{File: file, Pointer: "/job_id", Reason: err.Error() + "; set job_id in the manifest"}
	}
	if !m.Status.Valid() || (m.Status != lifecycle.Draft && m.Status != lifecycle.Pending) {
		return "", nil, &manifest.Error{File: file, Pointer: "/status", Reason: fmt.Sprintf("a new job starts as DRAFT or PENDING, not %s", m.Status)}
	}
	if es := keptState(file, m); len(es) > 0 {
		return "", nil, es
	}
	prompts, es := PromptFiles(file, m)
	if len(es) > 0 {
		return "", nil, es
	}
	m.JobID = id
	if err := s.Env.Store.CheckDir(); err != nil {
		return "", nil, err
	}
	if err := s.Env.Store.CreateWith(m, prompts); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", nil, &ExistsError{ID: id}
		}
		return "", nil, err
	}
	return id, m, nil
}

// CheckEffects refuses a manifest whose workflow has a phase with an
// effect the registry (the composition root's, internal/builtins) does
// not have, naming the phase's field: the job would stop when it reached
// the phase. logist validate and submit apply it with the registry the
// daemon runs.
func CheckEffects(file string, m *manifest.Manifest, effects effect.Registry) manifest.Errors {
	wf, err := m.ResolveWorkflow()
	if err != nil {
		return nil // the manifest's own check reports it
	}
	phase, err := effects.Check(wf)
	if err == nil {
		return nil
	}
	ptr := "/workflow"
	if m.InlineWorkflow() {
		ptr += workflow.PhasePointer(phase, "effect")
	}
	return manifest.Errors{{File: file, Pointer: ptr, Reason: fmt.Sprintf("phase %q: %v", phase, err)}}
}

// keptState refuses, in a manifest submitted as a new job, the state
// Logist keeps (metrics, the audit history, the run's state): a new job
// has none, and what it said would count (spending already at its budget
// halts it before any call). A manifest copied from a job that ran says
// so; the error names each field to remove.
func keptState(file string, m *manifest.Manifest) manifest.Errors {
	var es manifest.Errors
	const why = "a new job starts without it (Logist keeps it as the job runs; copied from a job that ran?): remove it"
	if m.Metrics != (manifest.Metrics{}) {
		es = append(es, &manifest.Error{File: file, Pointer: "/metrics", Reason: why})
	}
	if len(m.History) > 0 {
		es = append(es, &manifest.Error{File: file, Pointer: "/history", Reason: why})
	}
	if !reflect.DeepEqual(m.Run, manifest.RunState{}) {
		es = append(es, &manifest.Error{File: file, Pointer: "/run", Reason: why})
	}
	return es
}

// ShellPrograms checks command agents' programs (agent.ProgramCheck) as a
// steward's command can before logistd runs the job: on the PATH of the
// shell it runs in, which may not be logistd's (the messages say so;
// logistd checks again with its own before any call). workspace resolves
// relative program paths ("" leaves them to logistd). logistd meters every
// call, so a model its proxy would refuse is checked too.
func ShellPrograms(workspace string) agent.ProgramCheck {
	return agent.ProgramCheck{Workspace: workspace, Metered: true,
		Where: "the PATH of this shell (logistd looks on its own PATH when it runs the job)"}
}

// ResumeOptions are resume's optional changes.
type ResumeOptions struct {
	Guidance             string
	CostThreshold        *float64
	TimeThresholdMinutes *float64
	// MaxAgentCalls raises the calls budget (limits.max_agent_calls).
	MaxAgentCalls *int
}

// OptionError is a steward's option that cannot be taken: Field is its
// name in the manifest (cost_threshold, …), Reason why. Each front end
// names the field its own way (logist's flags, the console's JSON).
type OptionError struct{ Field, Reason string }

func (e *OptionError) Error() string { return e.Field + " " + e.Reason }

// Check is the one rule for a resume's options, whoever asks (logist,
// the console, a cluster node): guidance within its limit (CheckText);
// each new budget a finite number (an infinite one would turn the budget
// off), a cost of at least 0 cents, a time of more than 0 minutes, at
// least 1 call.
func (o ResumeOptions) Check() error {
	if err := CheckText("guidance", o.Guidance); err != nil {
		return err
	}
	switch {
	case o.CostThreshold != nil && !(*o.CostThreshold >= 0 && *o.CostThreshold <= math.MaxFloat64):
		return &OptionError{Field: "cost_threshold", Reason: "must be a finite number of cents, at least 0"}
	case o.TimeThresholdMinutes != nil && !(*o.TimeThresholdMinutes > 0 && *o.TimeThresholdMinutes <= math.MaxFloat64):
		return &OptionError{Field: "time_threshold_minutes", Reason: "must be a finite number of minutes, more than 0"}
	case o.MaxAgentCalls != nil && *o.MaxAgentCalls < 1:
		return &OptionError{Field: "max_agent_calls", Reason: "must be at least 1"}
	}
	return nil
}

// Resume continues a job waiting for a steward (INTERVENTION_REQUIRED,
// HALTED_COST, HALTED_TIME) at the phase where it stopped.
func (s *Steward) Resume(id string, o ResumeOptions) (*manifest.Manifest, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	tx, err := jobtx.Begin(s.Env, id, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Close()
	m := tx.M
	if !m.Status.Waiting() {
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "only INTERVENTION_REQUIRED, HALTED_COST or HALTED_TIME jobs can be resumed", Hint: HintFor(m, id)}
	}
	changes := map[string]any{}
	if o.CostThreshold != nil {
		m.CostThreshold = o.CostThreshold
		changes["cost_threshold"] = *o.CostThreshold
	}
	if o.TimeThresholdMinutes != nil {
		m.TimeThresholdMinutes = o.TimeThresholdMinutes
		changes["time_threshold_minutes"] = *o.TimeThresholdMinutes
	}
	if o.MaxAgentCalls != nil {
		if m.Limits == nil {
			m.Limits = &manifest.Limits{}
		}
		m.Limits.MaxAgentCalls = o.MaxAgentCalls
		changes["limits.max_agent_calls"] = *o.MaxAgentCalls
	}
	// Every budget, the daemon's defaults included (as the engine last
	// applied them), must leave room for another call.
	if b := m.Exhausted(m.Run.DefaultBudgets); b != nil {
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: budgetText(b), Hint: budgetHint(m, id)}
	}
	// The manifest changes first, so the command's record is committed
	// with its effect as one unit (jobtx): never one without the other.
	if o.Guidance != "" {
		m.Run.Guidance = o.Guidance
	}
	m.Audit(tx.Now(), "Steward", "RESUME", o.Guidance, nil)
	record := s.record
	if len(changes) > 0 {
		record = s.recordChange
	}
	if err := record(tx, history.CommandResume, o.Guidance, "", changes); err != nil {
		return nil, err
	}
	if err := s.transition(tx, history.CommandResume, lifecycle.EvResume, lifecycle.Pending, "", "resumed by "+s.User); err != nil {
		return nil, err
	}
	return m, tx.Commit()
}

// budgetText says that a budget is still used up, and where its limit
// comes from.
func budgetText(b *manifest.Budget) string {
	from := ""
	if b.Default {
		from = " (logistd's default)"
	}
	switch b.Kind {
	case manifest.BudgetCost:
		return fmt.Sprintf("its cost %.2f cents is still at or over the budget of %.2f cents%s", b.Used, b.Limit, from)
	case manifest.BudgetTime:
		return fmt.Sprintf("its time %.1fs is still at or over the budget of %s%s", b.Used*60, b.LimitText(), from)
	}
	return fmt.Sprintf("its %.0f agent calls are still at or over the calls budget of %.0f%s", b.Used, b.Limit, from)
}

// Halt cancels a job; the daemon kills its call in flight.
func (s *Steward) Halt(id, reason string) (*manifest.Manifest, error) {
	if err := CheckText("reason", reason); err != nil {
		return nil, err
	}
	tx, err := jobtx.Begin(s.Env, id, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Close()
	m := tx.M
	if !lifecycle.Allows(m.Status, lifecycle.EvHalt) {
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "a finished job cannot be halted"}
	}
	if reason == "" {
		reason = "halted by " + s.User
	}
	m.Audit(tx.Now(), "Steward", "HALT", reason, nil)
	if err := s.record(tx, history.CommandHalt, "", reason, nil); err != nil {
		return nil, err
	}
	// The workflow records the halt its own way (a protocol session's
	// abort event). A job in no phase of its workflow (not started yet, or
	// a workflow that no longer resolves) has no effect to ask: the halt
	// goes on, since stopping a job must not depend on its workflow.
	if eff, _, err := s.phaseEffect(id, m); err == nil {
		if h, ok := eff.(effect.Halter); ok {
			evs, state, err := h.Halt(tx, s.User, reason)
			if err != nil {
				return nil, err
			}
			for _, r := range evs {
				if err := tx.Append(r); err != nil {
					return nil, err
				}
			}
			if state != "" {
				m.Run.WorkflowState = state
			}
		}
	}
	if err := s.transition(tx, history.CommandHalt, lifecycle.EvHalt, lifecycle.Canceled, "", reason); err != nil {
		return nil, err
	}
	if codes.KindOf(m.Run.ErrorCode) == codes.Info {
		// What the job waited for (a reply, a decision) is no longer
		// awaited; an error code that says what went wrong stays.
		m.Run.ErrorCode = ""
	}
	return m, tx.Commit()
}

// RollbackOptions are rollback's optional changes.
type RollbackOptions struct {
	Guidance string
	Reason   string
}

// Check refuses a rollback's reason or guidance over its limit
// (CheckText).
func (o RollbackOptions) Check() error { return CheckTexts(o.Reason, o.Guidance) }

// Rollback restores the workspace of checkpoint cp and makes the job
// PENDING at the phase that checkpoint resumes. The history keeps
// everything that happened after cp (append-only) and records the rollback.
func (s *Steward) Rollback(id, cp string, o RollbackOptions) (*manifest.Manifest, *history.RecoveryPoint, error) {
	if err := o.Check(); err != nil {
		return nil, nil, err
	}
	tx, err := jobtx.Begin(s.Env, id, nil)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Close()
	m := tx.M
	if !lifecycle.Allows(m.Status, lifecycle.EvRollback) {
		return nil, nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "only a stopped job (INTERVENTION_REQUIRED, HALTED_*, SUCCESS) can be rolled back", Hint: HintFor(m, id)}
	}
	recs, err := history.ReadAll(tx.Dir)
	if err != nil {
		return nil, nil, err
	}
	var point *history.RecoveryPoint
	var known []string
	for _, r := range recs {
		if r.Type == history.TypeRecoveryPoint && r.RecoveryPoint != nil {
			known = append(known, r.RecoveryPoint.CheckpointID)
			if r.RecoveryPoint.CheckpointID == cp {
				point = r.RecoveryPoint
			}
		}
	}
	if point == nil {
		return nil, nil, fmt.Errorf("job %s has no checkpoint %q (it has: %s): %w", id, cp, strings.Join(known, ", "), jobstore.ErrNotFound)
	}
	if err := point.Restorable(); err != nil {
		return nil, nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: err.Error()}
	}
	// A damaged snapshot (an object that no longer matches its hash) is
	// refused before the command is recorded: recorded, the command makes
	// cp the job's checkpoint although its files never came back.
	checked, err := snapshot.Check(tx.Dir, cp, point.Snapshot.Listing)
	if err != nil {
		rerr := tx.RecordError(codes.RollbackFailed, "STEWARD", 0, err.Error())
		return nil, nil, errors.Join(fmt.Errorf("restore %s: %w", cp, err), rerr)
	}
	remade, lost, err := s.gitBack(tx, cp, point)
	if err != nil {
		return nil, nil, err
	}
	if remade != nil {
		defer remade.Discard()
	}
	// The command is recorded before the workspace changes, so a crash in
	// between leaves a trace of why files moved.
	changes := map[string]any{"checkpoint_id": cp, "resume_phase": point.ResumePhase}
	abandoned := ""
	if g := point.Git; g != nil {
		// The job branch goes back to the point's commit; the commit it
		// leaves stays named here, and kept by a ref of its own
		// (git_abandoned_ref, below) that moves with the repository.
		changes["git_commit"] = g.Commit
		if tip, err := gitws.Tip(context.Background(), tx.Store().Workspace(id), g.Branch); err == nil {
			changes["git_abandoned"], abandoned = tip, tip
		}
		if remade != nil {
			changes["git_remade_from"] = g.Repo
		}
	}
	rec := s.command(tx, history.CommandRollback, o.Guidance, o.Reason, changes)
	switch {
	case abandoned != "" && remade == nil:
		changes["git_abandoned_ref"] = gitws.AbandonedRef(rec.Steward.CommandID)
	case abandoned != "":
		// A repository made again without the job's commits may still
		// have a job branch: its tip moves into the remade repository
		// under its ref, before the lost one goes (Install).
		if err := remade.KeepAbandoned(context.Background(), rec.Steward.CommandID, abandoned); err != nil {
			changes["git_abandoned_not_kept"] = fmt.Sprintf("the commit the rollback leaves (%s), in the lost repository, could not be kept: %v", abandoned, err)
		} else {
			changes["git_abandoned_ref"] = gitws.AbandonedRef(rec.Steward.CommandID)
		}
	case remade != nil:
		// The job's commits went with the repository: nothing is left
		// to keep, and the record says so rather than naming nothing.
		changes["git_abandoned_not_kept"] = fmt.Sprintf("the workspace's repository was lost (%s) and has no job branch: no commit the rollback leaves is left to keep", lost)
	}
	keepDiscarded(tx, rec.Steward.CommandID, changes)
	// The job's current checkpoint is now cp (history.Record.Checkpoint):
	// what logs and records name from here on, and the base of the next
	// recovery point's changes.
	rec.Steward.Snapshot = point.Snapshot
	if err := tx.Append(rec); err != nil {
		return nil, nil, err
	}
	if err := checked.Restore(tx.Store().Workspace(id)); err != nil {
		rerr := tx.RecordError(codes.RollbackFailed, "STEWARD", 0, err.Error())
		return nil, nil, errors.Join(fmt.Errorf("restore %s: %w", cp, err), rerr)
	}
	if remade != nil {
		if err := remade.Install(context.Background()); err != nil {
			rerr := tx.RecordError(codes.RollbackFailed, "STEWARD", 0, err.Error())
			return nil, nil, errors.Join(fmt.Errorf("make %s's repository again: %w", cp, err), rerr)
		}
	} else if g := point.Git; g != nil {
		if abandoned != "" {
			if err := gitws.KeepAbandoned(context.Background(), tx.Store().Workspace(id), rec.Steward.CommandID, abandoned); err != nil {
				rerr := tx.RecordError(codes.RollbackFailed, "STEWARD", 0, err.Error())
				return nil, nil, errors.Join(fmt.Errorf("rollback to %s: %w", cp, err), rerr)
			}
		}
		if err := gitws.Restore(context.Background(), tx.Store().Workspace(id), g.Branch, g.Commit); err != nil {
			rerr := tx.RecordError(codes.RollbackFailed, "STEWARD", 0, err.Error())
			return nil, nil, errors.Join(fmt.Errorf("restore %s's commit: %w", cp, err), rerr)
		}
	}
	m.SetPhase(point.ResumePhase)
	summary, _ := point.Metadata["summary"].(string)
	m.Run.PreviousSummary, m.Run.Feedback, m.Run.Guidance = summary, "", o.Guidance
	m.Run.Evidence = point.Evidence()
	m.Audit(tx.Now(), "Steward", "ROLLBACK", cp+": "+o.Reason, nil)
	if err := s.transition(tx, history.CommandRollback, lifecycle.EvRollback, lifecycle.Pending, point.ResumePhase, "rolled back to "+cp+" by "+s.User); err != nil {
		return nil, nil, err
	}
	return m, point, tx.Commit()
}

// DiscardedPrefix begins the name of every snapshot a rollback keeps of
// the work it discards (keepDiscarded: rollback-ID, ID the command's).
const DiscardedPrefix = "rollback-"

// keepDiscarded keeps, before a rollback restores an earlier point, what
// it would discard that no recovery point holds: the workspace's changes
// since the job's current checkpoint (an answer that stopped the job,
// STUCK or refused, leaves its work there). The workspace is snapshotted
// as "rollback-ID" (ID the command's; its objects are kept like every
// listing's), and changes names the files (discarded_files) and the
// snapshot (discarded_snapshot). Nothing changed: no listing is kept. A
// snapshot that fails (the size cap) does not stop the rollback, which
// the steward asked for: changes says why nothing was kept.
func keepDiscarded(tx *jobtx.Tx, commandID string, changes map[string]any) {
	name := DiscardedPrefix + commandID
	info, err := snapshot.Take(tx.Store().Workspace(tx.ID), tx.Dir, name)
	if err != nil {
		changes["discarded_not_kept"] = err.Error()
		return
	}
	cur, ref := tx.CheckpointRef()
	listing := ""
	if ref != nil {
		listing = ref.Listing
	}
	was, err := snapshot.Entries(tx.Dir, cur, listing)
	if err != nil {
		changes["discarded_not_kept"] = fmt.Sprintf("the changes since %s are not known: %v", cur, err)
		return
	}
	ch := snapshot.Diff(was, info.Entries)
	if ch.Empty() {
		_ = os.Remove(snapshot.ListingPath(tx.Dir, name)) // its objects are the checkpoint's
		return
	}
	changes["discarded_files"] = ch.Paths()
	if info.Listing != "" {
		changes["discarded_snapshot"] = name
	}
}

// gitBack says whether job tx's branch can go back to point's commit
// (cp), before the rollback records or restores anything. A repository
// that is lost (gitws.Lost: no .git of its own, or one without the
// commit) is made again from the job's source when the point is where
// the job began (cp-start names the source): the clone is returned, to
// be installed once the files are back, with how the repository was lost.
// Otherwise the rollback is refused, and nothing has changed.
func (s *Steward) gitBack(tx *jobtx.Tx, cp string, point *history.RecoveryPoint) (remade *gitws.Remade, lost string, err error) {
	g := point.Git
	if g == nil {
		return nil, "", nil
	}
	ctx, ws := context.Background(), tx.Store().Workspace(tx.ID)
	err = gitws.Restorable(ctx, ws, g.Branch, g.Commit)
	if err == nil {
		return nil, "", nil
	}
	refuse := func(err error, hint string) error {
		return &jobtx.OutOfOrderError{ID: tx.ID, Status: tx.M.Status, Hint: hint,
			Want: fmt.Sprintf("its job branch cannot go back to %s's commit: %v; nothing was changed", cp, err)}
	}
	if !gitws.Lost(err) {
		return nil, "", refuse(err, "")
	}
	if g.Repo == "" {
		return nil, "", refuse(err, "logist rollback "+tx.ID+" --to cp-start makes the repository again from the job's source, at its base")
	}
	r, rerr := gitws.Remake(ctx, ws, g.Repo, g.Commit, g.Branch)
	if rerr != nil {
		return nil, "", refuse(fmt.Errorf("%v, and it cannot be made again from the source: %w", err, rerr), "")
	}
	return r, err.Error(), nil
}

// Activate moves a DRAFT job to PENDING.
func (s *Steward) Activate(id string) (*manifest.Manifest, error) {
	tx, err := jobtx.Begin(s.Env, id, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Close()
	m := tx.M
	if m.Status != lifecycle.Draft {
		return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "only DRAFT jobs can be activated", Hint: HintFor(m, id)}
	}
	m.Audit(tx.Now(), "Steward", "ACTIVATE", "", nil)
	if err := s.record(tx, history.CommandActivate, "", "", nil); err != nil {
		return nil, err
	}
	if err := s.transition(tx, history.CommandActivate, lifecycle.EvActivate, lifecycle.Pending, "", "activated by "+s.User); err != nil {
		return nil, err
	}
	return m, tx.Commit()
}

// transition ends command cmd: the job gets a fresh retry allowance if
// the command gives one (workflow.ResetsRetries, the rule logist verify
// replays), then moves (tx.Transition) as the steward.
func (s *Steward) transition(tx *jobtx.Tx, cmd string, ev lifecycle.Event, to lifecycle.Status, phase, reason string) error {
	if workflow.ResetsRetries(cmd) {
		tx.M.Run.PhaseRetries, tx.M.Run.APIFailures = 0, 0
	}
	return tx.Transition(ev, to, phase, "STEWARD", reason)
}

// record records a steward command that left the job's configuration as
// it was (recordChange records one that changed it).
func (s *Steward) record(tx *jobtx.Tx, cmd, guidance, reason string, changes map[string]any) error {
	return s.append(tx, &history.Steward{Command: cmd, Guidance: guidance, Reason: reason, Changes: changes})
}

// append appends st, by s, as a steward record.
func (s *Steward) append(tx *jobtx.Tx, st *history.Steward) error {
	return tx.Append(s.recordOf(tx, st))
}

// command is the record of a steward command that left the configuration
// as it was, for a caller that adds to it before appending.
func (s *Steward) command(tx *jobtx.Tx, cmd, guidance, reason string, changes map[string]any) *history.Record {
	return s.recordOf(tx, &history.Steward{Command: cmd, Guidance: guidance, Reason: reason, Changes: changes})
}

// recordOf is st, by s, as a history record. It takes no interaction
// number: interactions are agent calls (jobHistory.json lists commands
// among its events).
func (s *Steward) recordOf(tx *jobtx.Tx, st *history.Steward) *history.Record {
	st.CommandID, st.User = commandID(), s.User
	return &history.Record{Type: history.TypeSteward, Phase: tx.M.Phase(), Role: "Steward",
		StateBefore: string(tx.M.Status), Steward: st}
}
