package steward

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// Set changes a stopped job's (or a paused schedule's) configuration the
// way a steward can record:
// an agent that cannot start, a prompt file, a limit. Guidance cannot fix
// a wrong argv; hand-editing job.json leaves no trace and races the
// daemon. Set runs as one transaction: the job must be stopped, the
// fields must be configuration a steward may change (settable), and the
// manifest with the change must pass the same validation as a new one
// (schema, semantics, the agents' programs on this shell's PATH) before
// anything is saved. The change is a signed steward record holding, per
// field, the old and the new value and the hash of the configuration it
// leaves.

// Assignment is one FIELD=VALUE of logist set: a field path, dotted
// (agents.worker.command.argv, argv.0 for an array element) or a JSON
// pointer (/agents/worker/command/argv/0, as validation errors name it),
// and its new value as JSON (null removes the field).
type Assignment struct {
	Path  string
	Value json.RawMessage
}

// settable is every top-level field of a manifest and whether a steward
// may change it on an existing job: "" if so, else why not. A field
// missing here cannot be set either (a test keeps the table complete).
var settable = map[string]string{
	"agents":     "",
	"prompts":    "",
	"limits":     "",
	"secret_env": "",
	// How its processes are contained: a steward's signed choice, e.g. the
	// opt-out of a job whose host has no sandbox (docs/security.md).
	"sandbox":               "",
	"sandbox_network":       "",
	"sandbox_network_allow": "",

	"cost_threshold":         "a budget is raised with the resume that continues the job: logist resume JOB --cost-threshold CENTS",
	"time_threshold_minutes": "a budget is raised with the resume that continues the job: logist resume JOB --time-threshold-minutes M",
	"schedule":               "a schedule is paused and resumed with logist schedules pause|resume NAME, and stopped with logist halt NAME",

	"task_description": "it is what the job is: its history was recorded for it; submit a new job (or give guidance with logist resume --guidance)",
	"description":      "it is what the job is; submit a new job",
	"workflow":         "it is what the job is: its history was recorded under it; submit a new job",
	"context_files":    "it is what the job is; submit a new job (or give guidance with logist resume --guidance)",
	"protocol":         "it is what the job is: its history was recorded under it; submit a new job",
	"game":             "it is what the job is: its history was recorded under it; submit a new job",
	"seed":             "it is what the job is; submit a new job",
	"encrypt_history":  "its history is already written the way it says",
	"workspace":        "it is what the job started from (its base is recorded once made); submit a new job with the right source",

	"schema_version": "Logist keeps it",
	"job_id":         "it names the job's folder",
	"status":         "Logist keeps the status: a steward moves it with resume, halt, activate or rollback",
	"current_phase":  "Logist keeps the phase: logist rollback JOB --to CHECKPOINT goes back to an earlier one",
	"created_at":     "Logist keeps it",
	"scheduled_from": "Logist keeps it",
	"scheduled_at":   "Logist keeps it",
	"metrics":        "Logist keeps the job's spend",
	"history":        "Logist keeps the audit trail",
	"run":            "Logist keeps the run state",
}

// Settable says whether a steward may set the top-level manifest field
// (why, if not); ok is false for a field the table does not know.
func Settable(field string) (why string, ok bool) {
	why, ok = settable[field]
	return why, ok
}

// setCopy copies each settable field from src to dst.
var setCopy = map[string]func(dst, src *manifest.Manifest){
	"agents":     func(d, s *manifest.Manifest) { d.Agents = s.Agents },
	"prompts":    func(d, s *manifest.Manifest) { d.Prompts = s.Prompts },
	"limits":     func(d, s *manifest.Manifest) { d.Limits = s.Limits },
	"secret_env": func(d, s *manifest.Manifest) { d.SecretEnv = s.SecretEnv },
	"sandbox":    func(d, s *manifest.Manifest) { d.Sandbox = s.Sandbox },
	"sandbox_network": func(d, s *manifest.Manifest) {
		d.SandboxNetwork = s.SandboxNetwork
	},
	"sandbox_network_allow": func(d, s *manifest.Manifest) {
		d.SandboxNetworkAllow = s.SandboxNetworkAllow
	},
}

// SetError is an assignment Set refuses (a field a steward may not set, a
// path that leads nowhere): the command is wrong, not the job's state.
type SetError struct {
	Path   string
	Reason string
}

func (e *SetError) Error() string { return fmt.Sprintf("cannot set %s: %s", e.Path, e.Reason) }

// Set applies as to stopped job id's configuration (see above) and
// returns the manifest and the changes, by dotted field.
func (s *Steward) Set(id string, as []Assignment, reason string) (*manifest.Manifest, map[string]Change, error) {
	if len(as) == 0 {
		return nil, nil, &SetError{Reason: "no FIELD=VALUE given"}
	}
	if err := CheckText("reason", reason); err != nil {
		return nil, nil, err
	}
	tx, err := jobtx.Begin(s.Env, id, nil)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Close()
	m := tx.M
	switch st := m.ScheduleState(); {
	case st == manifest.ScheduleActive:
		return nil, nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "a schedule is reconfigured while paused (the runs it creates next get the change)",
			Hint: "logist schedules pause " + id + " first"}
	case st == manifest.SchedulePaused:
	case m.Status != lifecycle.Draft && !m.Status.Waiting():
		return nil, nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status,
			Want: "only a stopped job (INTERVENTION_REQUIRED, HALTED_COST, HALTED_TIME, DRAFT) or a paused schedule can be reconfigured", Hint: HintFor(m, id)}
	}
	doc, err := toDoc(m)
	if err != nil {
		return nil, nil, err
	}
	touched := map[string]bool{}
	for _, a := range as {
		top, err := assign(doc, a)
		if err != nil {
			return nil, nil, err
		}
		touched[top] = true
	}
	// The whole manifest as it would be saved passes what a new one must.
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, err
	}
	file := filepath.Join(tx.Store().JobDir(id), jobstore.ManifestFile)
	nm, err := manifest.Decode(file, data)
	if err != nil {
		return nil, nil, err
	}
	before := m.Clone()
	for _, top := range slices.Sorted(maps.Keys(touched)) {
		setCopy[top](m, nm)
	}
	changes, err := configDiff(before, m)
	if err != nil {
		return nil, nil, err
	}
	if len(changes) == 0 {
		return nil, nil, &SetError{Path: as[0].Path, Reason: "the job's configuration already says so; nothing to change"}
	}
	fields := slices.Sorted(maps.Keys(changes))
	// The programs of the agents this changes (only those: another
	// role's may be on logistd's PATH and not this shell's).
	changed := &manifest.Manifest{Agents: map[string]manifest.AgentConfig{}}
	for _, f := range fields {
		if role, ok := strings.CutPrefix(f, "agents."); ok {
			role, _, _ = strings.Cut(role, ".")
			if a, ok := m.Agents[role]; ok {
				changed.Agents[role] = a
			}
		}
	}
	if es := ShellPrograms(tx.Store().Workspace(id)).Check(file, changed); len(es) > 0 {
		return nil, nil, es
	}
	note := reason
	if note == "" {
		note = "set " + strings.Join(fields, ", ")
	}
	m.Audit(tx.Now(), "Steward", "SET", note, nil)
	if err := s.recordChange(tx, history.CommandSet, "", note, changesRecord(changes)); err != nil {
		return nil, nil, err
	}
	return m, changes, tx.Commit()
}

// assign sets a.Path in doc to a.Value, creating objects on the way, and
// returns the top-level field it changed.
func assign(doc map[string]any, a Assignment) (string, error) {
	segs := fieldPath(a.Path)
	if len(segs) == 0 || slices.Contains(segs, "") {
		return "", &SetError{Path: a.Path, Reason: "not a field path (write agents.worker.command.argv, or /agents/worker/command/argv)"}
	}
	top := segs[0]
	why, known := settable[top]
	switch {
	case !known:
		return "", &SetError{Path: a.Path, Reason: fmt.Sprintf("a manifest has no field %q (a steward may set: %s)", top, strings.Join(settableFields(), ", "))}
	case why != "":
		return "", &SetError{Path: a.Path, Reason: why}
	}
	if err := roleKnown(doc, segs, a.Path); err != nil {
		return "", err
	}
	var v any
	if err := decodeValue(a.Value, &v); err != nil {
		return "", &SetError{Path: a.Path, Reason: fmt.Sprintf("the value is not JSON (%v); a string needs quotes: %s='\"text\"'", err, a.Path)}
	}
	var cur any = doc
	for i, seg := range segs {
		last := i == len(segs)-1
		switch node := cur.(type) {
		case map[string]any:
			if last {
				if v == nil {
					delete(node, seg)
				} else {
					node[seg] = v
				}
				return top, nil
			}
			next, ok := node[seg]
			if !ok || next == nil {
				next = map[string]any{}
				node[seg] = next
			}
			cur = next
		case []any:
			j, ok := index(seg, len(node))
			if !ok {
				return "", &SetError{Path: a.Path, Reason: fmt.Sprintf("%q is not an element of %s (it has %d)", seg, strings.Join(segs[:i], "."), len(node))}
			}
			if last {
				if v == nil {
					return "", &SetError{Path: a.Path, Reason: "an array element cannot be removed; set the whole array"}
				}
				node[j] = v
				return top, nil
			}
			cur = node[j]
		default:
			return "", &SetError{Path: a.Path, Reason: fmt.Sprintf("%s is not an object or array", strings.Join(segs[:i], "."))}
		}
	}
	return top, nil
}

// roleKnown refuses a field inside an agent the job does not have
// (agents.wrker.command.argv, a role misspelt): made up on the way, the
// agent would fail the schema three ways (no provider, no script, no
// http) and never say that the role is the mistake. A new role is set
// whole (agents.ROLE={...}).
func roleKnown(doc map[string]any, segs []string, path string) error {
	if segs[0] != "agents" || len(segs) < 3 {
		return nil
	}
	agents, _ := doc["agents"].(map[string]any)
	if _, ok := agents[segs[1]]; ok {
		return nil
	}
	roles := slices.Sorted(maps.Keys(agents))
	return &SetError{Path: path, Reason: fmt.Sprintf("the job has no role %q (its roles: %s); a new role is set whole: agents.%s='{\"provider\": ...}'",
		segs[1], strings.Join(roles, ", "), segs[1])}
}

// decodeValue decodes one JSON value, numbers kept exact.
func decodeValue(raw []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one value")
	}
	return nil
}

// settableFields lists the top-level fields a steward may set.
func settableFields() []string {
	var out []string
	for k, why := range settable {
		if why == "" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
