// Package workflow describes workflows as data: phases, the role that plays
// each, and where each answer (COMPLETED, RETRY, STUCK) leads. The engine in
// internal/runner interprets them; adding a workflow needs no engine change.
package workflow

import (
	"embed"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/schemas"
)

// Terminal targets an answer can lead to instead of a phase.
const (
	TargetSuccess      = "SUCCESS"
	TargetIntervention = "INTERVENTION_REQUIRED"
)

// RoleLogist is the role of phases Logist plays itself (running tools,
// verifying a trace): they need an effect and no agent.
const RoleLogist = "logist"

// Actions an agent can answer.
const (
	ActionCompleted = "COMPLETED"
	ActionRetry     = "RETRY"
	ActionStuck     = "STUCK"
)

// Actions in the order of the response schema's enum.
var Actions = []string{ActionCompleted, ActionStuck, ActionRetry}

// Phase is one step of a workflow.
type Phase struct {
	Role        string           `json:"role"`
	Status      lifecycle.Status `json:"status,omitempty"`
	Description string           `json:"description,omitempty"`
	Task        string           `json:"task,omitempty"`
	// On maps each answer (COMPLETED, RETRY, STUCK) and each outcome the
	// phase's effect can report (upper-case names such as REJECTED) to the
	// next phase or a terminal.
	On map[string]string `json:"on"`
	// Schema names the answer schema (a file in schemas/) the role's answer
	// must also satisfy, beyond the base answer contract.
	Schema string `json:"schema,omitempty"`
	// Effect names what the engine does around the phase beyond following
	// the answer (record protocol events, run tools, verify); see
	// internal/runner's effects.
	Effect string `json:"effect,omitempty"`
	// State is the workflow's own name for where the job is (the protocol
	// session state), shown by logist status.
	State string `json:"state,omitempty"`
}

// outcomeName reports whether o may name an outcome an effect reports
// besides the three actions: ^[A-Z][A-Z_]{1,39}$, as a loop rather than a
// regular expression compiled by every check of a workflow (logist
// status's too).
func outcomeName(o string) bool {
	if len(o) < 2 || len(o) > 40 {
		return false
	}
	for i := 0; i < len(o); i++ {
		if c := o[i]; !('A' <= c && c <= 'Z') && (i == 0 || c != '_') {
			return false
		}
	}
	return true
}

// Workflow is a named graph of phases.
type Workflow struct {
	Name        string           `json:"name"`
	Description string           `json:"description,omitempty"`
	Start       string           `json:"start"`
	Phases      map[string]Phase `json:"phases"`
}

//go:embed builtin/*.json
var builtinFS embed.FS

//go:embed prompts/*.md
var promptFS embed.FS

// builtins caches the parsed built-in workflows: every transaction resolves
// its job's workflow, and parsing and checking it each time was a few
// percent of the daemon's CPU.
var builtins sync.Map // name -> *Workflow, never handed out itself

// Builtin returns a built-in workflow by name: the caller's own copy.
func Builtin(name string) (*Workflow, error) {
	if w, ok := builtins.Load(name); ok {
		return w.(*Workflow).clone(), nil
	}
	w, err := parseBuiltin(name)
	if err != nil {
		return nil, err
	}
	builtins.Store(name, w)
	return w.clone(), nil
}

func (w *Workflow) clone() *Workflow {
	c := *w
	c.Phases = make(map[string]Phase, len(w.Phases))
	for k, p := range w.Phases {
		p.On = maps.Clone(p.On)
		c.Phases[k] = p
	}
	return &c
}

func parseBuiltin(name string) (*Workflow, error) {
	b, err := builtinFS.ReadFile("builtin/" + name + ".json")
	if err != nil {
		return nil, fmt.Errorf("unknown workflow %q (built-in: %s)", name, strings.Join(BuiltinNames(), ", "))
	}
	var w Workflow
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("built-in workflow %s: %w", name, err)
	}
	if err := w.Check(); err != nil {
		return nil, fmt.Errorf("built-in workflow %s: %w", name, err)
	}
	return &w, nil
}

// BuiltinNames lists the built-in workflows.
func BuiltinNames() []string {
	ents, _ := builtinFS.ReadDir("builtin")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), path.Ext(e.Name())))
	}
	sort.Strings(out)
	return out
}

// DefaultPrompt returns the embedded system prompt for a role, or "" if
// there is none.
func DefaultPrompt(role string) string {
	b, err := promptFS.ReadFile("prompts/" + role + ".md")
	if err != nil {
		return ""
	}
	return string(b)
}

// Problem is what is wrong (an error of Check) or doubtful (a warning of
// Warnings) in a workflow's definition: Pointer is the JSON pointer of the
// field within the workflow ("/phases/a/on/COMPLETED"; a manifest puts its
// own "/workflow" before it), Reason says what and why.
type Problem struct {
	Pointer string
	Reason  string
}

func (p *Problem) Error() string {
	if p.Pointer == "" {
		return p.Reason
	}
	return p.Pointer + ": " + p.Reason
}

// PhasePointer is the JSON pointer, within a workflow, of phase name or
// of field (a path of names) below it.
func PhasePointer(name string, field ...string) string {
	p := "/phases/" + pointerToken(name)
	for _, f := range field {
		p += "/" + pointerToken(f)
	}
	return p
}

// pointerToken escapes a JSON pointer's reference token (RFC 6901).
func pointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// Terminals are the ends an answer can lead to instead of a phase.
var Terminals = []string{TargetSuccess, TargetIntervention}

// Routing is the one rule of where an answer may lead (seed 002: STUCK
// means a human is needed; RETRY, that the work is not done yet), for
// the refusals and the warnings alike (Routes). It returns what is wrong with action (or an
// effect's outcome) of a phase leading to target, and whether that is
// refused ("" when nothing is): STUCK or RETRY can never end a job in
// SUCCESS (refused), and STUCK led to a phase asks an agent again what
// its agent said needs a person (a warning: the built-in workflows send
// STUCK to INTERVENTION_REQUIRED, and a workflow may hand it to a role of
// its own on purpose, but a phase that leads back to itself on STUCK asks
// the same agent until a budget stops the job).
func Routing(action, target string) (reason string, refused bool) {
	switch {
	case (action == ActionStuck || action == ActionRetry) && target == TargetSuccess:
		what := "the work is not done yet"
		if action == ActionStuck {
			what = "a human is needed"
		}
		return fmt.Sprintf("%s leads to SUCCESS, but an agent answers %s when %s: lead it to a phase or to %s", action, action, what, TargetIntervention), true
	case action == ActionStuck && target != TargetIntervention:
		return fmt.Sprintf("STUCK leads to phase %q, not to %s: an agent answers STUCK when a human is needed, and the job goes on without one (a phase that leads to itself asks the same agent again until a budget stops the job)", target, TargetIntervention), false
	}
	return "", false
}

// Check verifies the graph as the engine needs it to play a job: the
// start phase exists, every target is a phase or a terminal, every phase
// declares all three answers. The error is a *Problem naming the field.
// Where answers may lead (Routing) is a manifest's validation's to refuse
// (Routes), not Check's: a history recorded on a workflow since refused
// must still be replayed with it.
func (w *Workflow) Check() error {
	if _, ok := w.Phases[w.Start]; !ok {
		return &Problem{"/start", fmt.Sprintf("start phase %q is not defined (phases: %s)", w.Start, strings.Join(w.PhaseNames(), ", "))}
	}
	for _, name := range w.PhaseNames() {
		p := w.Phases[name]
		if p.Role == "" {
			return &Problem{PhasePointer(name, "role"), fmt.Sprintf("phase %q: role is empty", name)}
		}
		if p.Role == RoleLogist && p.Effect == "" {
			return &Problem{PhasePointer(name, "effect"), fmt.Sprintf("phase %q: role %s (Logist itself) needs an effect", name, RoleLogist)}
		}
		if p.Schema != "" {
			if !slices.Contains(AnswerSchemas(), p.Schema) {
				return &Problem{PhasePointer(name, "schema"), fmt.Sprintf("phase %q: schema %q is not one of Logist's answer schemas (%s)", name, p.Schema, strings.Join(AnswerSchemas(), ", "))}
			}
		}
		switch p.Status {
		case "":
			p.Status = lifecycle.Running
			w.Phases[name] = p
		case lifecycle.Running, lifecycle.Reviewing:
		default:
			return &Problem{PhasePointer(name, "status"), fmt.Sprintf("phase %q: status must be RUNNING or REVIEWING, not %q", name, p.Status)}
		}
		for _, a := range Actions {
			if _, ok := p.On[a]; !ok {
				return &Problem{PhasePointer(name, "on"), fmt.Sprintf("phase %q: no target for %s (every phase says where COMPLETED, STUCK and RETRY lead)", name, a)}
			}
		}
		for _, o := range slices.Sorted(maps.Keys(p.On)) {
			t := p.On[o]
			if !outcomeName(o) {
				return &Problem{PhasePointer(name, "on", o), fmt.Sprintf("phase %q: outcome %q is not an upper-case name", name, o)}
			}
			if _, ok := w.Phases[t]; !ok && !slices.Contains(Terminals, t) {
				return &Problem{PhasePointer(name, "on", o), fmt.Sprintf("phase %q: %s leads to unknown phase %q: name a phase (%s) or an end (%s)",
					name, o, t, strings.Join(w.PhaseNames(), ", "), strings.Join(Terminals, ", "))}
			}
		}
	}
	return nil
}

// Routes holds every answer of w to Routing: what it refuses, and what it
// warns of, each naming its field.
func (w *Workflow) Routes() (refused, warned []Problem) {
	for _, name := range w.PhaseNames() {
		p := w.Phases[name]
		for _, o := range slices.Sorted(maps.Keys(p.On)) {
			why, refuse := Routing(o, p.On[o])
			switch {
			case why == "":
			case refuse:
				refused = append(refused, Problem{PhasePointer(name, "on", o), fmt.Sprintf("phase %q: %s", name, why)})
			default:
				warned = append(warned, Problem{PhasePointer(name, "on", o), fmt.Sprintf("phase %q: %s", name, why)})
			}
		}
	}
	return refused, warned
}

// Warnings are what a manifest's validation lets pass but is likely a
// mistake: answers Routing warns of, and cycles with no exit (Loops).
func (w *Workflow) Warnings() []Problem {
	_, out := w.Routes()
	for _, l := range w.Loops() {
		// A cycle is of several phases' fields: it names them itself.
		out = append(out, Problem{Reason: l})
	}
	return out
}

// AnswerSchemas are the schemas (files in schemas/) a phase may hold its
// COMPLETED answers to: Logist's answer schemas, "*-answer-*.json".
func AnswerSchemas() []string {
	var out []string
	for _, n := range schemas.Names() {
		if strings.Contains(n, "-answer-") {
			out = append(out, n)
		}
	}
	return out
}

// Loops warns of cycles with no exit: phases from which answering
// COMPLETED every time never reaches SUCCESS but comes back round (each
// phase's COMPLETED has one target, so the path is one line). A job on
// such a workflow whose agents keep succeeding runs until a budget stops
// it. One warning per cycle, naming it.
func (w *Workflow) Loops() []string {
	var out []string
	seen := map[string]bool{} // phases on a cycle already reported
	for _, start := range w.PhaseNames() {
		pos := map[string]int{}
		var path []string
		for p := start; ; p = w.Phases[p].On[ActionCompleted] {
			if _, ok := w.Phases[p]; !ok {
				break // SUCCESS, INTERVENTION_REQUIRED (or unknown: Check's error)
			}
			if i, ok := pos[p]; ok {
				cycle := path[i:]
				if !seen[cycle[0]] && !w.effectExit(cycle) {
					for _, c := range cycle {
						seen[c] = true
					}
					out = append(out, fmt.Sprintf("workflow %s: answering COMPLETED never reaches SUCCESS from phase %q (%s → %s): a job whose agents keep succeeding runs until a budget stops it",
						w.Name, start, strings.Join(cycle, " → "), cycle[0]))
				}
				break
			}
			pos[p] = len(path)
			path = append(path, p)
		}
	}
	return out
}

// effectExit reports whether a phase of cycle has an outcome of its
// effect (a name besides the three actions) that leaves the cycle: the
// effect decides when the loop ends (the protocol's executing ⇄ tools).
func (w *Workflow) effectExit(cycle []string) bool {
	for _, p := range cycle {
		for o, t := range w.Phases[p].On {
			if !slices.Contains(Actions, o) && !slices.Contains(cycle, t) {
				return true
			}
		}
	}
	return false
}

// PhaseNames returns phase names sorted for stable output.
func (w *Workflow) PhaseNames() []string {
	out := make([]string, 0, len(w.Phases))
	for n := range w.Phases {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Roles returns the roles the workflow needs agents for (not Logist's own).
func (w *Workflow) Roles() []string {
	set := map[string]bool{}
	for _, p := range w.Phases {
		if p.Role != RoleLogist {
			set[p.Role] = true
		}
	}
	out := make([]string, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// Next says where an action in phase leads: a phase name, or a terminal.
func (w *Workflow) Next(phase, action string) (string, error) {
	p, ok := w.Phases[phase]
	if !ok {
		return "", fmt.Errorf("phase %q is not in workflow %s", phase, w.Name)
	}
	t, ok := p.On[action]
	if !ok {
		return "", fmt.Errorf("phase %q has no target for action %q", phase, action)
	}
	return t, nil
}
