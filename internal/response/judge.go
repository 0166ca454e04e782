package response

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/pathguard"
	"github.com/logist/logist/internal/workflow"
	"github.com/logist/logist/schemas"
)

// Contract is what an answer is held to.
type Contract struct {
	// Turn marks the answer of a deliberation's turn: it is held to Schema
	// alone, not to the base contract (turns answer in their own shape).
	Turn bool
	// Schema is the phase's own schema, which a COMPLETED answer must
	// satisfy beyond the base contract, or the turn's schema ("" = none).
	Schema string
	// Workspace tells what only the workspace can: where an evidence path
	// really leads and whether it exists. Nil judges the answer's text
	// alone (its paths may still not be absolute, empty or climb out).
	Workspace Workspace
}

// Workspace answers for an evidence path that pathguard.Lexical passed.
type Workspace interface {
	// Resolve says whether rel exists, or why it may not be used (it
	// leads out through a symlink, it cannot be resolved).
	Resolve(rel string) (exists bool, err error)
}

// Repository is a Workspace that can also say whether its git
// repository, if it has one, is one Logist may commit in: a COMPLETED
// answer completes its phase, and in a git workspace the phase's recovery
// point is a commit on the job branch (docs/security.md). An answer that
// leaves the repository so that Logist will not run git there, or that
// leaves one that is no longer the job's, is refused (PROTOCOL_VIOLATION,
// decided by the workspace): accepted, its phase would end, or the job
// would end SUCCESS, without its work on the branch.
type Repository interface {
	Workspace
	// Repository is why the repository may not be used, nil if it may
	// (or there is none).
	Repository() error
}

// Dir is a workspace folder as it is now.
type Dir string

// Repo is a workspace folder and the check of its repository (gitws's:
// this package runs no git).
type Repo struct {
	Dir
	Check func(dir string) error
}

// In is the workspace folder dir an answer is judged in, its repository
// held to check when there is one (gitws.AnswerCheck).
func In(dir string, check func(dir string) error) Workspace {
	if check == nil {
		return Dir(dir)
	}
	return Repo{Dir: Dir(dir), Check: check}
}

// Repository runs the check on the folder.
func (r Repo) Repository() error { return r.Check(string(r.Dir)) }

// Resolve resolves rel inside the folder (pathguard.Resolve).
func (d Dir) Resolve(rel string) (bool, error) {
	_, exists, err := pathguard.Resolve(string(d), rel)
	return exists, err
}

// Recorded is the workspace as a response record says the engine found it
// when it judged the answer (the violations marked Workspace); every other
// path was inside it and existed, or the answer would say so. logist
// verify replays with it: the workspace may have changed since.
func Recorded(vs []history.Violation) Workspace {
	r := recorded{}
	for _, v := range vs {
		switch {
		case !v.Workspace:
		case v.Path == "" && strings.HasPrefix(v.Detail, repositoryField):
			// The repository's verdict: no evidence path is empty
			// (pathguard.Lexical refuses one before Resolve).
			r[""] = strings.TrimPrefix(v.Detail, repositoryField)
		default:
			r[v.Path] = strings.TrimPrefix(v.Detail, evidenceField)
		}
	}
	return r
}

type recorded map[string]string

func (r recorded) Resolve(rel string) (bool, error) {
	if why, ok := r[rel]; ok {
		return false, errors.New(why)
	}
	return true, nil
}

func (r recorded) Repository() error {
	if why, ok := r[""]; ok {
		return errors.New(why)
	}
	return nil
}

const (
	evidenceField   = "evidence_files: "
	repositoryField = "workspace repository: "
)

// Verdict is what Judge made of an answer.
type Verdict struct {
	// Answer is the accepted answer of the base contract (nil for a turn,
	// and when refused).
	Answer *Answer
	// Object is the answer object with null members dropped (an agent held
	// to a strict schema says null for an optional field it leaves out);
	// nil when no object could be read.
	Object map[string]any
	// Warnings are accepted but recorded (missing evidence files).
	Warnings []Warning
	// Err is the violation the answer is refused for (the first of Codes
	// among Violations); nil when it is accepted.
	Err *Error
	// Violations is every violation found, in seed 002's layer order
	// (schema, action, evidence, summary; then the phase's schema).
	Violations []*Error
}

// Record is the verdict's violations as a response record lists them.
func (v Verdict) Record() []history.Violation {
	if len(v.Violations) == 0 {
		return nil
	}
	out := make([]history.Violation, len(v.Violations))
	for i, e := range v.Violations {
		out[i] = history.Violation{Code: e.Code, Detail: e.Reason, Path: e.Path, Workspace: e.Workspace}
	}
	return out
}

// Judge holds raw output to contract c. Every layer runs, so that every
// violation is found and can be audited (a path out of the workspace is
// reported even when the summary is missing too); the answer is refused
// for the first of them in Codes' order.
func Judge(raw []byte, c Contract) Verdict {
	var v Verdict
	obj, err := Extract(raw)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			e = &Error{Code: codes.NotJSON, Reason: err.Error()}
		}
		v.add(e)
		return v.settle()
	}
	v.Object = obj
	if c.Turn {
		DropNulls(obj)
		v.schema(c.Schema, obj)
		return v.settle()
	}

	// 1. JSON Schema.
	schemaOK := true
	if err := schemas.Validate(schemas.Response, obj); err != nil {
		schemaOK = false
		reason := err.Error()
		var se *schemas.Error
		if errors.As(err, &se) {
			parts := make([]string, len(se.Violations))
			for i, x := range se.Violations {
				parts[i] = x.String()
			}
			reason = strings.Join(parts, "; ")
		}
		v.add(&Error{Code: codes.SchemaInvalid, Reason: reason})
	}
	// 2. Action enumeration.
	if a, ok := obj["action"]; ok {
		if s, isStr := a.(string); !isStr || !slices.Contains(workflow.Actions, s) {
			v.add(&Error{Code: codes.ActionInvalid, Reason: fmt.Sprintf("action %s is not one of %s", jsonText(a), strings.Join(workflow.Actions, ", "))})
		}
	}
	// 3. Evidence paths inside the workspace.
	warns := v.evidence(obj, c.Workspace)
	// 4. Summary constraints.
	sumOK := true
	if sum, ok := obj["summary_for_supervisor"]; !ok {
		sumOK = false
		v.add(&Error{Code: codes.SummaryMissing, Reason: "summary_for_supervisor is missing"})
	} else if s, isStr := sum.(string); isStr && strings.TrimSpace(s) == "" {
		sumOK = false
		v.add(&Error{Code: codes.SummaryMissing, Reason: "summary_for_supervisor is empty"})
	}
	if schemaOK && sumOK {
		b, _ := json.Marshal(obj)
		var ans Answer
		if err := json.Unmarshal(b, &ans); err != nil {
			v.add(&Error{Code: codes.SchemaInvalid, Reason: err.Error()})
		} else if n := len([]rune(ans.Summary)); n > MaxSummary {
			v.add(&Error{Code: codes.SchemaInvalid, Reason: fmt.Sprintf("summary_for_supervisor has %d characters, at most %d", n, MaxSummary)})
		} else {
			if ans.EvidenceFiles == nil {
				ans.EvidenceFiles = []string{}
			}
			v.Answer = &ans
		}
	}
	DropNulls(obj)
	if len(v.Violations) == 0 && v.Answer.Action == workflow.ActionCompleted {
		// The phase's own contract (e.g. the Planner's proposals); RETRY
		// and STUCK need only the base contract.
		v.schema(c.Schema, obj)
	}
	if obj["action"] == workflow.ActionCompleted {
		v.repository(c.Workspace)
	}
	v = v.settle()
	if v.Err == nil {
		v.Warnings = warns
	}
	return v
}

// evidence runs layer 3 on every path the answer names (those that are not
// strings are the schema layer's): what the path's text decides, then
// what the workspace says. Missing files are warnings.
func (v *Verdict) evidence(obj map[string]any, ws Workspace) []Warning {
	list, _ := obj["evidence_files"].([]any)
	var warns []Warning
	for _, item := range list {
		p, ok := item.(string)
		if !ok {
			continue
		}
		if err := pathguard.Lexical(p); err != nil {
			v.add(&Error{Code: codes.ProtocolViolation, Reason: evidenceField + err.Error(), Path: p})
			continue
		}
		if ws == nil {
			continue
		}
		exists, err := ws.Resolve(p)
		if err != nil {
			v.add(&Error{Code: codes.ProtocolViolation, Reason: evidenceField + err.Error(), Path: p, Workspace: true})
		} else if !exists {
			warns = append(warns, Warning{Code: codes.EvidenceMissing, Detail: fmt.Sprintf("evidence file %q does not exist in the workspace", p)})
		}
	}
	return warns
}

// repository holds a COMPLETED answer to the workspace's repository
// (Repository), where the workspace can say.
func (v *Verdict) repository(ws Workspace) {
	r, ok := ws.(Repository)
	if !ok {
		return
	}
	if err := r.Repository(); err != nil {
		v.add(&Error{Code: codes.ProtocolViolation, Reason: repositoryField + err.Error(), Workspace: true})
	}
}

// schema holds obj to a phase's or turn's own schema.
func (v *Verdict) schema(name string, obj map[string]any) {
	if name == "" {
		return
	}
	if err := schemas.Validate(name, obj); err != nil {
		v.add(&Error{Code: codes.SchemaInvalid, Reason: err.Error(), Schema: name})
	}
}

func (v *Verdict) add(e *Error) { v.Violations = append(v.Violations, e) }

// settle picks the violation the answer is refused for, if any.
func (v Verdict) settle() Verdict {
	if len(v.Violations) == 0 {
		return v
	}
	v.Answer = nil
	v.Err = v.Violations[0]
	for _, e := range v.Violations[1:] {
		if slices.Index(Codes, e.Code) < slices.Index(Codes, v.Err.Code) {
			v.Err = e
		}
	}
	return v
}
