package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/regfile"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/secrets"
	"github.com/logist/logist/internal/steward"
)

// validationFailed carries per-file results of a failed validate.
type validationFailed struct{ n int }

func (v *validationFailed) Error() string { return fmt.Sprintf("%d file(s) invalid", v.n) }

var cmdValidate = &command{
	name: "validate", args: "FILE...", summary: "check manifests or agent answers against the schemas, with clear errors",
	example: "  logist validate jobs/*/job.json\n  logist validate --kind response answer.json --workspace jobs/x/workspace\n",
	flags: func(fs *pflag.FlagSet) {
		fs.String("kind", "auto", "auto, manifest or response")
		fs.String("workspace", "", "for responses: workspace to resolve evidence files in (default: the file's folder); a git job's workspace also holds a COMPLETED answer to its repository, as the engine does")
	},
	run: func(e *env, args []string) (*Result, error) {
		if len(args) == 0 {
			return nil, usagef("expected at least one FILE")
		}
		validateKind, _ := e.fs.GetString("kind")
		validateWorkspace, _ := e.fs.GetString("workspace")
		switch validateKind {
		case "auto", "manifest", "response":
		default:
			return nil, usagef("--kind %q: use auto, manifest or response", validateKind)
		}
		r := &Result{Columns: []string{"FILE", "KIND", "RESULT"}}
		items := []map[string]any{}
		bad := 0
		for _, f := range args {
			kind, errs, warns := validateFile(f, validateKind, validateWorkspace)
			res := "ok"
			if len(errs) > 0 {
				bad++
				res = "INVALID: " + strings.Join(errs, "; ")
			} else if len(warns) > 0 {
				res = "ok (warning: " + strings.Join(warns, "; ") + ")"
			}
			r.Rows = append(r.Rows, []string{f, kind, res})
			items = append(items, map[string]any{"file": f, "kind": kind, "valid": len(errs) == 0, "errors": errs, "warnings": warns})
		}
		r.Items = items
		if bad > 0 {
			return nil, &failedWith{r, &validationFailed{bad}}
		}
		return r, nil
	},
}

// checkWorkflowConfig holds the manifest's own workflow configuration (a
// game's section) to the workflow's effects, as the run's first step
// would: what the run would refuse, validate refuses.
func checkWorkflowConfig(f string, m *manifest.Manifest) error {
	wf, err := m.ResolveWorkflow()
	if err != nil {
		return nil // the manifest's own check reports it
	}
	seed := int64(0)
	if m.Seed != nil {
		seed = *m.Seed
	}
	if err := builtins.Effects().CheckConfig(wf, m.Game, seed, filepath.Dir(f), slices.Sorted(maps.Keys(m.Agents))); err != nil {
		return fmt.Errorf("%s: workflow %s: %w", f, wf.Name, err)
	}
	return nil
}

func validateFile(f, kind, ws string) (string, []string, []string) {
	data, err := regfile.ReadFile(f) // never blocks on a FIFO, nor reads a device without end

	if err != nil {
		return kind, []string{err.Error()}, nil
	}
	if kind == "auto" {
		kind = "manifest"
		var probe map[string]json.RawMessage
		if json.Unmarshal(data, &probe) == nil {
			if _, ok := probe["action"]; ok {
				kind = "response"
			}
		} else if _, err := response.Extract(data); err == nil {
			kind = "response"
		}
	}
	if kind == "response" {
		if ws == "" {
			ws = filepath.Dir(f)
		}
		v := response.Judge(data, response.Contract{Workspace: answerWorkspace(ws)})
		var ws2 []string
		for _, w := range v.Warnings {
			ws2 = append(ws2, w.Detail)
		}
		if v.Err != nil {
			return kind, []string{f + ": " + v.Err.Error()}, ws2
		}
		return kind, nil, ws2
	}
	m, err := manifest.Decode(f, data)
	if err == nil {
		// The programs agents would run, on this shell's PATH; a manifest
		// in a job folder has its workspace beside it.
		ws := ""
		if filepath.Base(f) == jobstore.ManifestFile {
			ws = filepath.Join(filepath.Dir(f), jobstore.WorkspaceDir)
		}
		es := steward.ShellPrograms(ws).Check(f, m)
		_, missing := steward.PromptFiles(f, m)
		es = append(append(es, steward.CheckSource(f, m)...), missing...)
		if es = append(es, steward.CheckEffects(f, m, builtins.Effects())...); len(es) > 0 {
			err = es
		} else {
			err = checkWorkflowConfig(f, m)
		}
	}
	if err != nil {
		var es manifest.Errors
		if errors.As(err, &es) {
			out := make([]string, len(es))
			for i, x := range es {
				out[i] = x.Error()
			}
			return kind, out, nil
		}
		return kind, []string{err.Error()}, nil
	}
	return kind, nil, manifestWarnings(f, m)
}

// manifestWarnings are what a valid manifest file's m is warned of, the
// same for logist validate and logist submit: keys in env_allow, a cost
// it cannot count, a git source with uncommitted changes, a preset's
// program not installed here, and the workflow's (loops, STUCK led to a
// phase, prompts for roles it has not).
func manifestWarnings(f string, m *manifest.Manifest) []string {
	warns := envAllowWarnings(m)
	for _, w := range []string{agent.CostWarning(m), steward.SourceWarning(m)} {
		if w != "" {
			warns = append(warns, w)
		}
	}
	warns = append(warns, steward.ShellPrograms("").PresetWarnings(f, m)...)
	return append(warns, m.Warnings()...)
}

// answerWorkspace is the workspace an answer file is judged in: ws, held
// to the job's repository as the engine holds an answer (gitws.
// AnswerCheck) when ws is the workspace of a job folder whose manifest
// names a git workspace.
func answerWorkspace(ws string) response.Workspace {
	jobDir := filepath.Dir(filepath.Clean(ws))
	if filepath.Base(filepath.Clean(ws)) != jobstore.WorkspaceDir {
		return response.Dir(ws)
	}
	data, err := os.ReadFile(filepath.Join(jobDir, jobstore.ManifestFile))
	if err != nil {
		return response.Dir(ws)
	}
	m, err := manifest.Decode(jobstore.ManifestFile, data)
	if err != nil {
		return response.Dir(ws)
	}
	return response.In(ws, gitws.AnswerCheck(m.IsGit(), filepath.Base(jobDir)))
}

// envAllowWarnings names each variable a command agent's env_allow lets
// through whose name looks like a key's (secrets.LooksSecret) and that
// secret_env does not list: the job's records redact its value anyway
// (secrets.JobRedactor), but secret_env is where a key belongs.
func envAllowWarnings(m *manifest.Manifest) []string {
	var out []string
	for _, e := range m.EnvAllowed() {
		if secrets.LooksSecret(e.Name) && !slices.Contains(m.SecretEnv, e.Name) {
			out = append(out, fmt.Sprintf("%s: %s looks like a secret: pass it with secret_env instead of env_allow "+
				"(its value is redacted from the job's records either way)", e.Pointer, e.Name))
		}
	}
	return out
}
