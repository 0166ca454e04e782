// Package effect is what the engine and the steward know of a workflow's
// effects: the interfaces an effect implements (Effect, and optionally
// TurnEffect, Halter, Decider and Viewer) and the Registry that maps the effect
// names a workflow's data uses (workflow.Phase.Effect) to them.
//
// The engine (internal/runner) and the steward (internal/steward) import no
// concrete workflow: the composition roots — the daemon and the CLI — hand
// them a Registry built from the workflows Logist ships (internal/builtins),
// so adding a workflow changes neither. This package sits below both and
// imports only the job transaction and the types an effect exchanges.
package effect

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/workflow"
)

// Effect gives a workflow's phase meaning beyond following its answer's
// action: the protocol workflow records signed events, runs the tools the
// Executor asked for and verifies the trace. A workflow names an effect per
// phase in its data; the engine finds it in its Registry.
type Effect interface {
	// Prepare runs under the job lock before the phase is played.
	Prepare(tx *jobtx.Tx, phase string) (*workflow.Prep, error)
	// Finish runs under the job lock on a valid answer (base contract and
	// the phase's schema; obj is the answer object). It must not append:
	// the engine appends Outcome.Records after the answer's response.
	Finish(tx *jobtx.Tx, phase string, ans *response.Answer, obj map[string]any) (*workflow.Outcome, error)
}

// TurnEffect is an effect whose steps are turns (workflow.Prep.Turns): a
// chair's speaker, or every member at once. The engine plays the turns
// and hands their results back.
type TurnEffect interface {
	Effect
	// FinishTurns runs under the job lock once every turn of the step has
	// an outcome; its Outcome's records are committed with the responses.
	FinishTurns(tx *jobtx.Tx, phase string, results []workflow.TurnResult) (*workflow.Outcome, error)
}

// Halter is an effect that records something of its own when a steward
// halts a job in its phase (a protocol session records the operator's
// abort). It runs in the steward's transaction, after the halt's own
// record: the steward appends recs and sets the job's workflow state to
// state unless it is "".
type Halter interface {
	Halt(tx *jobtx.Tx, by, reason string) (recs []*history.Record, state string, err error)
}

// Decider is an effect that takes a steward's decision while its job waits
// for one (a parliament's Prime Minister approves or vetoes the bill). It
// returns the records the decision amounts to and the workflow's state
// after them ("" = unchanged); an error says why the decision is not
// acceptable now.
type Decider interface {
	Decide(tx *jobtx.Tx, in deliberation.Input) (recs []*history.Record, state string, err error)
}

// Viewer is an effect whose workflow has participants a person may play
// (a game's parties): View is what one of them may see, and nothing more.
type Viewer interface {
	View(tx *jobtx.Tx, participant string) (*deliberation.View, error)
}

// Checker is an effect whose workflow has a configuration of its own (a
// game's manifest section): CheckConfig refuses what a run would refuse,
// with the same error, so logist validate catches it before the run.
// dir is the job folder (where files the configuration names are);
// agents are the manifest's agent names, which the configuration's role
// references must name.
type Checker interface {
	CheckConfig(game json.RawMessage, seed int64, dir string, agents []string) error
}

// CheckConfig holds a job's own configuration to every effect of its
// workflow that checks one.
func (r Registry) CheckConfig(wf *workflow.Workflow, game json.RawMessage, seed int64, dir string, agents []string) error {
	names := make([]string, 0, len(wf.Phases))
	for _, p := range wf.Phases {
		if p.Effect != "" && !slices.Contains(names, p.Effect) {
			names = append(names, p.Effect)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if c, ok := r[n].(Checker); ok {
			if err := c.CheckConfig(game, seed, dir, agents); err != nil {
				return err
			}
		}
	}
	return nil
}

// Registry maps effect names to effects. Its zero value is an empty
// registry to Add to.
type Registry map[string]Effect

// Lookup returns the effect registered as name, or an error that names
// the effects r has: the engine's, when a phase is played, and Check's,
// when a manifest is validated, are one message.
func (r Registry) Lookup(name string) (Effect, error) {
	if e, ok := r[name]; ok {
		return e, nil
	}
	return nil, fmt.Errorf("effect %q is not known to this Logist (its effects: %s)", name, strings.Join(slices.Sorted(maps.Keys(r)), ", "))
}

// Check refuses a workflow with a phase whose effect r does not have: a
// job on it would stop when it reached that phase. It returns the first
// such phase, by name, and why ("", nil when r has every one).
func (r Registry) Check(wf *workflow.Workflow) (phase string, err error) {
	for _, name := range wf.PhaseNames() {
		if e := wf.Phases[name].Effect; e != "" {
			if _, err := r.Lookup(e); err != nil {
				return name, err
			}
		}
	}
	return "", nil
}

// Add registers effects under their names. Two effects with one name are
// a wiring mistake, caught when the registry is built: Add panics.
func Add[E Effect](r Registry, effects map[string]E) {
	for name, e := range effects {
		if _, dup := r[name]; dup {
			panic(fmt.Sprintf("effect %q registered twice", name))
		}
		r[name] = e
	}
}
