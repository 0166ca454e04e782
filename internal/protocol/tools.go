package protocol

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/pathguard"
)

// Intent is a tool run the Executor asks for.
type Intent struct {
	ID, ProposalID, Tool string
	Input                map[string]any
	RiskClass            string
	Justification        string
}

// ToolResult is what a tool execution left behind.
type ToolResult struct {
	InputArtifact  string `json:"input_artifact"`
	OutputArtifact string `json:"output_artifact,omitempty"`
	// ExitCode is the shell command's exit status; -1 when it did not run
	// to an exit (refused, timed out, killed).
	ExitCode   int    `json:"exit_code"`
	OK         bool   `json:"ok"`
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// InputDocument is the normalized input of a tool run: the canonical JSON
// of {"input": ..., "tool": ...}. It is the input artifact, so the
// artifact's id is "sha256:" + NormalizedInputHash.
func InputDocument(tool string, input map[string]any) ([]byte, error) {
	if input == nil {
		input = map[string]any{}
	}
	return CanonicalJSON(map[string]any{"tool": tool, "input": input})
}

// NormalizedInputHash is the hex sha256 of InputDocument ("" if the input
// cannot be encoded, which JSON-decoded input never is).
func NormalizedInputHash(tool string, input map[string]any) string {
	b, err := InputDocument(tool, input)
	if err != nil {
		return ""
	}
	return sha256Hex(b)
}

// IntentBody stores the intent's input artifact and returns the body of
// its tool_intent_signed event (its subject is in.ID).
func IntentBody(in Intent, store Store) (map[string]any, error) {
	doc, err := InputDocument(in.Tool, in.Input)
	if err != nil {
		return nil, err
	}
	id, err := store.Put(doc)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"proposal_id": in.ProposalID, "tool": in.Tool, "input_hash": sha256Hex(doc),
		"input_artifact": id, "risk_class": in.RiskClass, "justification": in.Justification,
	}, nil
}

// StartedBody is the body of tool_execution_started for a signed intent.
func StartedBody(in Intent) map[string]any {
	return map[string]any{"input_artifact": "sha256:" + NormalizedInputHash(in.Tool, in.Input)}
}

// ResultEvent is the event type (tool_execution_completed or
// tool_execution_failed) and body that record a result.
func ResultEvent(r *ToolResult) (typ string, body map[string]any) {
	body = map[string]any{"input_artifact": r.InputArtifact, "exit_code": r.ExitCode, "duration_ms": r.DurationMS}
	if r.OutputArtifact != "" {
		body["output_artifact"] = r.OutputArtifact
	}
	if r.OK {
		return ToolExecutionCompleted, body
	}
	msg := r.Error
	if msg == "" {
		msg = "tool failed"
	}
	if len(msg) > 4000 {
		msg = msg[:4000]
	}
	body["error"] = msg
	return ToolExecutionFailed, body
}

// Execute runs an approved intent in the workspace and stores its input
// and output as artifacts. A tool that fails (refused by the policy, bad
// input, non-zero exit, timeout, path outside the workspace) is a result
// with OK false, not an error; Execute fails only when the artifacts
// cannot be stored or ctx was cancelled (the daemon stopping is not the
// tool's failure: the run is retried as a new intent).
func Execute(ctx context.Context, workspace string, in Intent, store Store, p Policy) (*ToolResult, error) {
	return ExecuteAt(ctx, workspace, "", in, store, p)
}

// ExecuteAt is Execute with the run kept in runDir (RunDir) while it
// runs, so that a daemon that dies mid-run leaves it where the next one
// stops it (StopRun); "" keeps it in a temporary folder.
func ExecuteAt(ctx context.Context, workspace, runDir string, in Intent, store Store, p Policy) (*ToolResult, error) {
	p = p.WithDefaults()
	doc, err := InputDocument(in.Tool, in.Input)
	if err != nil {
		return nil, err
	}
	inID, err := store.Put(doc)
	if err != nil {
		return nil, err
	}
	input, _ := plainBody(in.Input)
	res := &ToolResult{InputArtifact: inID, ExitCode: -1}
	start := time.Now()
	var out map[string]any
	switch {
	case !p.allowsTool(in.Tool):
		res.Error = fmt.Sprintf("tool %q is not allowed by the job's protocol policy (allowed: %v)", in.Tool, p.Tools)
	case in.Tool == ToolShell:
		out, err = runShell(ctx, workspace, runDir, input, p, res)
		if err != nil {
			return nil, err
		}
	case in.Tool == ToolWriteFile:
		out = writeFile(workspace, input, res)
	default:
		res.Error = fmt.Sprintf("unknown tool %q", in.Tool)
	}
	res.DurationMS = time.Since(start).Milliseconds()
	if out == nil {
		out = map[string]any{}
	}
	if res.Error != "" {
		out["error"] = res.Error
	}
	out["duration_ms"] = res.DurationMS
	b, err := CanonicalJSON(out)
	if err != nil {
		return nil, err
	}
	if res.OutputArtifact, err = store.Put(b); err != nil {
		return nil, err
	}
	return res, nil
}

// RunDir is where the run of tool intent id of the job in jobDir keeps
// what outlives a daemon while it runs: its sandboxed call (launcher,
// sandbox pid, output) in requests/tool-HASH.call, beside the agents'
// calls, and, uncontained, its process group in requests/tool-HASH.call.pids;
// its scratch home is beside them (toolHomePrefix). The name is a hash:
// intent ids are the Executor's.
func RunDir(jobDir, intentID string) string {
	h := sha256Hex([]byte(intentID))
	return filepath.Join(jobDir, "requests", "tool-"+h[:16]+".call")
}

const pidsSuffix = ".pids"

// StopRun kills whatever is left of the run in runDir (RunDir) and
// forgets it: a daemon that died mid-run leaves its sandbox running (the
// launcher outlives the daemon), and nothing of it may go on changing the
// workspace once the run is recorded as interrupted. Every process of a
// contained run dies with its sandbox; an uncontained one loses its
// process group.
func StopRun(runDir string) error {
	return agent.StopCall(runDir, runDir+pidsSuffix, 0)
}

// shellArgv reads the shell tool's input: {"command": "..."} (run by
// /bin/sh -c) or {"argv": ["prog", ...]}.
func shellArgv(input map[string]any) ([]string, error) {
	cmd, hasCmd := input["command"]
	argv, hasArgv := input["argv"]
	switch {
	case hasCmd && hasArgv:
		return nil, errors.New("give command or argv, not both")
	case hasCmd:
		s, ok := cmd.(string)
		if !ok || s == "" {
			return nil, errors.New("command must be a non-empty string")
		}
		return []string{"/bin/sh", "-c", s}, nil
	case hasArgv:
		a, ok := argv.([]any)
		if !ok || len(a) == 0 {
			return nil, errors.New("argv must be a non-empty list of strings")
		}
		out := make([]string, len(a))
		for i, x := range a {
			s, ok := x.(string)
			if !ok || (i == 0 && s == "") {
				return nil, errors.New("argv must be a non-empty list of strings")
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, errors.New("shell input needs command or argv")
}

// toolEnv is the whole environment a tool sees: nothing of the daemon's
// (which may hold API keys) but PATH; a private, throw-away HOME and TMPDIR.
func toolEnv(home string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return []string{"PATH=" + path, "HOME=" + home, "TMPDIR=" + home, "LANG=C.UTF-8"}
}

// toolHomePrefix names a tool run's scratch home (HOME and TMPDIR): in
// the job's requests folder, beside the run's call folder (RunDir) and
// outside the workspace, so nothing of it shows in the job's diffs or
// evidence; in the temporary folder for a run given no run folder.
const toolHomePrefix = "logist-tool-home-"

// removeToolHomes removes the tool homes left in dir by runs a daemon
// killed before they ended (best effort: one that cannot be removed is
// tried again at the next run; it is the job's, in its folder).
func removeToolHomes(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), toolHomePrefix) {
			removeToolHome(filepath.Join(dir, e.Name()))
		}
	}
}

// removeToolHome removes a tool run's home, whatever the run left in it:
// a folder it made unwritable or unreadable (chmod 0) is opened up first,
// as os.RemoveAll would fail on it. Links are removed, never followed.
func removeToolHome(home string) {
	if os.RemoveAll(home) == nil {
		return
	}
	_ = filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700) // before WalkDir reads it
		}
		return nil
	})
	_ = os.RemoveAll(home)
}

// runCommand runs argv in dir as its own process group with the scrubbed
// environment, a timeout and an output cap, and a scratch home of its
// own (toolHomePrefix) that goes with the run. It returns an error only when
// ctx itself ended.
func runCommand(ctx context.Context, dir, runDir string, argv []string, timeout time.Duration, limit int64) (out map[string]any, code int, errMsg string, err error) {
	// A caller that has already stopped gets its error, never a run (a
	// program that ends at once could otherwise race the cancellation).
	if err := ctx.Err(); err != nil {
		return nil, -1, "", err
	}
	homeDir := "" // the temporary folder
	if runDir != "" {
		if err := StopRun(runDir); err != nil { // a stale one of the same intent
			return nil, -1, "", err
		}
		homeDir = filepath.Dir(runDir)
		if err := atomicfile.MkdirAll(homeDir, 0o700); err != nil {
			return nil, -1, "", err
		}
		// A daemon killed mid-run left its run's home behind: the job's
		// tool runs are one at a time, so every home here is stale.
		removeToolHomes(homeDir)
	}
	home, err := os.MkdirTemp(homeDir, toolHomePrefix)
	if err != nil {
		return nil, -1, "", err
	}
	defer removeToolHome(home) // after StopRun below: nothing of the run writes in it any more
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Home is read-write inside a sandbox (a contained run sees only its
	// workspace, its home and what it is granted), and HOME and TMPDIR
	// name it there as outside.
	spec := agent.ProcSpec{Argv: argv, Dir: dir, Env: toolEnv(home), Home: home, Limit: limit}
	if runDir != "" {
		spec.CallDir, spec.PidLog = runDir, runDir+pidsSuffix
		// Its output is read below; the next run of the intent starts afresh.
		defer func() {
			if ferr := StopRun(runDir); ferr != nil && err == nil {
				err = ferr
			}
		}()
	}
	pr, err := agent.RunProcess(tctx, spec)
	if err != nil {
		if ctx.Err() != nil {
			return nil, -1, "", ctx.Err()
		}
		out = map[string]any{"exit_code": -1}
		if errors.Is(err, context.DeadlineExceeded) {
			out["timed_out"] = true
			return out, -1, fmt.Sprintf("timed out after %s; its process group was killed", timeout), nil
		}
		if ae, ok := agent.AsError(err); ok {
			if ae.Code == codes.AgentOutputLimit {
				out["truncated"] = true
				putText(out, "stdout", ae.Partial)
				putText(out, "stderr", []byte(ae.Stderr))
				return out, -1, ae.Printed + "; its process group was killed", nil
			}
			return out, -1, ae.Msg, nil
		}
		return out, -1, err.Error(), nil
	}
	out = map[string]any{"exit_code": pr.ExitCode}
	putText(out, "stdout", pr.Stdout)
	putText(out, "stderr", pr.Stderr)
	if pr.ExitCode != 0 {
		errMsg = fmt.Sprintf("exit status %d", pr.ExitCode)
	}
	return out, pr.ExitCode, errMsg, nil
}

// putText stores output as text, or base64 (key_base64) when it is not
// UTF-8: JSON would silently replace invalid bytes and lose evidence.
func putText(m map[string]any, key string, b []byte) {
	if utf8.Valid(b) {
		m[key] = string(b)
		return
	}
	m[key+"_base64"] = b
}

func runShell(ctx context.Context, workspace, runDir string, input map[string]any, p Policy, res *ToolResult) (map[string]any, error) {
	argv, err := shellArgv(input)
	if err != nil {
		res.Error = "invalid shell input: " + err.Error()
		return nil, nil
	}
	out, code, msg, err := runCommand(ctx, workspace, runDir, argv, time.Duration(p.ToolTimeoutSeconds)*time.Second, p.MaxToolOutputBytes)
	if err != nil {
		return nil, err
	}
	res.ExitCode, res.Error, res.OK = code, msg, msg == ""
	return out, nil
}

// writeFile writes {"path", "content"} inside the workspace, atomically.
func writeFile(workspace string, input map[string]any, res *ToolResult) map[string]any {
	rel, ok1 := input["path"].(string)
	content, ok2 := input["content"].(string)
	if !ok1 || !ok2 {
		res.Error = "invalid write_file input: needs path and content strings"
		return nil
	}
	abs, _, err := pathguard.Resolve(workspace, rel)
	if err != nil {
		res.Error = err.Error()
		return nil
	}
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		res.Error = fmt.Sprintf("%s is a directory", rel)
		return nil
	}
	if err := atomicfile.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		res.Error = err.Error()
		return nil
	}
	if err := atomicfile.WriteFile(abs, []byte(content), 0o644); err != nil {
		res.Error = err.Error()
		return nil
	}
	res.ExitCode, res.OK = 0, true
	return map[string]any{"path": filepath.ToSlash(filepath.Clean(rel)), "bytes": len(content), "sha256": sha256Hex([]byte(content))}
}
