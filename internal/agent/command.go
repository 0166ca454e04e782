package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/jsonindent"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/pathguard"
	"github.com/logist/logist/internal/regfile"
)

// MaxCallCostUSD is the most one call is believed to cost (the answer
// schema's maximum for cost_usd).
const MaxCallCostUSD = 10000

// DefaultMaxOutput caps what an agent program may print, per stream.
const DefaultMaxOutput = 4 << 20

// BaseEnv are the daemon's variables every command agent gets; everything
// else must be allowed by name in the manifest (env_allow).
var BaseEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"}

// Command runs a program in the job's workspace as its own process group.
type Command struct {
	Cfg manifest.Command
	// Model is the role's model, told to the program in its request's
	// metadata ("" = none).
	Model string
	// Getenv reads the daemon's environment (tests inject it).
	Getenv func(string) string
}

// Call runs the program once. The request JSON is written to
// requests/<interaction>.json in the job folder; the answer is read from
// stdout or from the answer file.
func (c *Command) Call(ctx context.Context, req *Request) (*Result, error) {
	var body []byte
	if !req.FileWritten || c.Cfg.Stdin == "request" {
		body = RequestBody(req)
	}
	if !req.FileWritten {
		if err := WriteRequest(req.JobDir, req.Interaction, body); err != nil {
			return nil, &Error{Code: codes.AgentStart, Msg: err.Error()}
		}
	}
	contained := ExecutorFrom(ctx).Layer() != LayerNone
	f := filesOf(req, contained)
	// A call a previous daemon started is adopted with its answer file as
	// it left it; otherwise a stale answer left in place would be read as
	// this call's. A contained call's answer folder made now holds none.
	// An uncontained run is never adopted (Direct starts every run
	// afresh): its stale answer always goes, without asking whether a
	// contained run is held in its call folder.
	fresh := f.ansDir != "" && os.Mkdir(f.ansDir, 0o700) == nil
	if !fresh && (!contained || !heldCall(f.callDir)) {
		if err := clearStale(f.ans); err != nil {
			return nil, &Error{Code: codes.AgentStart, Msg: err.Error()}
		}
	}
	if f.ansDir != "" && !fresh {
		if err := os.MkdirAll(f.ansDir, 0o700); err != nil {
			return nil, &Error{Code: codes.AgentStart, Msg: err.Error()}
		}
	}

	spec := c.run(req, f)
	argv := spec.Argv
	spec.Env = c.env(req, f.req, f.ans)
	if c.Cfg.Stdin == "request" {
		spec.Stdin = body
	}
	if contained && req.Next != nil {
		spec.Next = func() (ProcSpec, func(), bool) { return nextCommandRun(req) }
	}
	pr, err := RunProcess(ctx, spec)
	if err != nil {
		return nil, err
	}
	errText := string(pr.Stderr)
	if pr.ExitCode != 0 {
		return nil, &Error{Code: codes.AgentExit, Transient: true, Msg: pr.Ended(argv[0]) + ": " + lastLine(errText), Partial: pr.Stdout, Stderr: errText}
	}
	limit := pr.Limit // the job's, under the operator's ceiling
	if limit <= 0 {
		limit = spec.limit()
	}
	res := &Result{Raw: pr.Stdout, Stderr: errText}
	if c.Cfg.Answer == "file" {
		ans := f.ans
		var err error
		if f.ansDir != "" {
			// The answer's folder is the contained agent's: its file
			// must be its own, not a link to a file of the host's.
			ans, _, err = pathguard.Resolve(f.ansDir, filepath.Base(f.ans))
		}
		var b []byte
		if err == nil {
			b, err = readCapped(ans, limit)
		}
		res.Raw, res.Stdout = b, pr.Stdout
		var big *tooLarge
		switch {
		case errors.As(err, &big):
			return nil, &Error{Code: codes.AgentOutputLimit, Msg: "answer file: " + big.Error(), Partial: pr.Stdout, Stderr: errText}
		case err != nil:
			// The program ended well but left no answer Logist may read:
			// it answered nothing (AGENT_EMPTY, as an empty file is), and
			// the steward is told why.
			res.Raw, res.NoAnswer = nil, noAnswerFile(err, pr.Stdout)
		}
	}
	// Agents that know what they cost may say so in the answer.
	var meta struct {
		CostUSD float64 `json:"cost_usd"`
	}
	// A cost outside (0, MaxCallCostUSD] is not believed (the answer's schema
	// check reports it); an absurd figure must not poison the job's budget.
	if json.Unmarshal(bytes.TrimSpace(res.Raw), &meta) == nil && meta.CostUSD > 0 && meta.CostUSD <= MaxCallCostUSD {
		res.CostUSD = meta.CostUSD
	}
	return res, nil
}

// callFiles are where call req keeps its request, its answer and its run.
type callFiles struct {
	req, ans string
	// ansDir, for a contained call, is the folder of its own its answer
	// file is in, requests/NNNNNN.answer/, which the sandbox binds
	// read-write (a folder, so that writing the answer by rename works
	// too); "" for an uncontained one, which answers in requests/.
	ansDir  string
	callDir string
	// contained: the call runs in a sandbox, which binds what the run
	// may read (ProcSpec.ReadOnly); an uncontained run reads what the
	// daemon may, so nothing is looked up for it.
	contained bool
}

func filesOf(req *Request, contained bool) callFiles {
	f := callFiles{req: RequestFile(req.JobDir, req.Interaction), callDir: CallDir(req.JobDir, req.Interaction),
		ans: filepath.Join(req.JobDir, "requests", fmt.Sprintf("%06d.answer.json", req.Interaction)), contained: contained}
	if contained {
		f.ansDir = answerDir(req.JobDir, req.Interaction)
		f.ans = filepath.Join(f.ansDir, "answer.json")
	}
	return f
}

// run is the program run of call req with its files f, its environment
// and stdin aside: the one place its argv and what a sandbox binds for it
// are decided, for the call and for the prediction of it made while the
// call before ran (nextCommandRun).
func (c *Command) run(req *Request, f callFiles) ProcSpec {
	repl := strings.NewReplacer("{request_file}", f.req, "{answer_file}", f.ans, "{workspace}", req.Workspace,
		"{job_id}", req.JobID, "{phase}", req.Phase, "{role}", req.Role)
	argv := make([]string, len(c.Cfg.Argv))
	for i, a := range c.Cfg.Argv {
		argv[i] = repl.Replace(a)
	}
	spec := ProcSpec{Argv: argv, Dir: req.Workspace, Limit: c.Cfg.MaxOutputBytes,
		PidLog: filepath.Join(req.JobDir, "requests", PidLog), Interaction: req.Interaction, CallDir: f.callDir}
	if f.contained {
		// A stat per argument and an lstat per read-only file: for the
		// sandbox's binds only.
		spec.ReadOnly = append(append(argvFiles(argv, req.Workspace), f.req), Protected(req)...)
		spec.ReadWrite = []string{f.ansDir}
	}
	return spec
}

func (c *Command) env(req *Request, reqFile, ansFile string) []string {
	get := c.Getenv
	if get == nil {
		get = os.Getenv
	}
	var env []string
	add := func(k, v string) { env = append(env, k+"="+v) }
	for _, k := range append(append([]string{}, BaseEnv...), c.Cfg.EnvAllow...) {
		if v := get(k); v != "" {
			add(k, v)
		}
	}
	for k, v := range c.Cfg.Env {
		add(k, v)
	}
	add("LOGIST_JOB_ID", req.JobID)
	add("LOGIST_PHASE", req.Phase)
	add("LOGIST_ROLE", req.Role)
	add("LOGIST_WORKSPACE", req.Workspace)
	add("LOGIST_REQUEST_FILE", reqFile)
	add("LOGIST_ANSWER_FILE", ansFile)
	add("LOGIST_INTERACTION", strconv.Itoa(req.Interaction))
	return env
}

// argvFiles are the files a command's arguments name outside the
// workspace (the steward's agent script, as in ["sh", "../agent.sh"]),
// resolved from the workspace: part of the program, so a contained run
// may read them, and nothing else beside them. Folders are not given,
// and neither is anything in a jobs folder's key folder (.logist).
func argvFiles(argv []string, workspace string) []string {
	var out []string
	for _, a := range argv {
		if a == "" || strings.HasPrefix(a, "-") {
			continue
		}
		p := a
		if !filepath.IsAbs(p) {
			p = filepath.Join(workspace, p)
		}
		p = filepath.Clean(p)
		if p == workspace || strings.HasPrefix(p, workspace+"/") || slices.Contains(strings.Split(p, "/"), ".logist") {
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			out = append(out, p)
		}
	}
	return out
}

// RequestFile is where the command provider puts the request of call n of
// the job in jobDir for its agent to read.
func RequestFile(jobDir string, n int) string {
	return filepath.Join(jobDir, "requests", fmt.Sprintf("%06d.json", n))
}

// RequestBody is the request as its file holds it.
func RequestBody(req *Request) []byte {
	body, _ := jsonindent.Marshal(req, "  ")
	return body
}

// WriteRequest writes body to the request file of call n, making the
// folder if needed, in a pooled file where one is free (reqpool.go). The
// file is not fsync'd: the history's intent is the durable copy, and a
// re-attempt writes the file again.
func WriteRequest(jobDir string, n int, body []byte) error {
	path := RequestFile(jobDir, n)
	_ = takeFree(jobDir, n, path) // or created below
	err := regfile.WriteFile(path, body, 0o600)
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// The folder is made once per job, not looked up at every call.
	if err := os.MkdirAll(filepath.Join(jobDir, "requests"), 0o700); err != nil {
		return err
	}
	return regfile.WriteFile(RequestFile(jobDir, n), body, 0o600)
}

// answerDir is the folder a contained command agent's call n writes its
// answer file in (requests/NNNNNN.answer/), bound read-write.
func answerDir(jobDir string, n int) string {
	return filepath.Join(jobDir, "requests", fmt.Sprintf("%06d.answer", n))
}

// procStart is the start time of a running process in clock ticks since
// boot (field 22 of /proc/PID/stat); false for one that has exited (a
// zombie not yet reaped included).
func procStart(pid int) (string, bool) { return startOf(pid, false) }

// startOf is procStart, a zombie's start time included when zombie says so.
func startOf(pid int, zombie bool) (string, bool) {
	b, err := regfile.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "X" || (f[0] == "Z" && !zombie) {
		return "", false
	}
	return f[19], true
}

// Alive reports whether process pid runs and started at start (a pid
// log's line: not a later process that reuses the pid).
func Alive(pid int, start string) bool {
	cur, ok := procStart(pid)
	return ok && cur == start
}

// KillOrphan kills the process group of the agent call for interaction n
// of the job in jobDir if it still runs: a daemon killed mid-call leaves
// its agent running, and the re-attempt must not run beside it. It
// reports whether it killed anything.
func KillOrphan(jobDir string, n int) bool {
	return killGroups(filepath.Join(jobDir, "requests", PidLog), n)
}

// killGroups kills every process group pidLog records for call n that
// still runs, reporting whether it killed any.
func killGroups(pidLog string, n int) bool {
	b, err := os.ReadFile(pidLog)
	if err != nil {
		return false
	}
	killed := false
	for _, line := range strings.Split(string(b), "\n") {
		in, pid, start, ok := ParsePidLine(line)
		if !ok || in != n {
			continue // another call's, or a line a crash cut short
		}
		if cur, ok := procStart(pid); !ok || cur != start {
			continue // gone, or the pid now belongs to someone else
		}
		if syscall.Kill(-pid, syscall.SIGKILL) == nil {
			killed = true
		}
	}
	return killed
}

// readCapped reads an answer file the agent wrote: a regular file only (a
// FIFO would block the call for ever), at most limit bytes (more is a
// *tooLarge).
func readCapped(p string, limit int64) ([]byte, error) {
	f, err := regfile.OpenRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		return nil, &tooLarge{fmt.Sprintf("%d bytes, more than %d", fi.Size(), limit)}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = &tooLarge{fmt.Sprintf("more than %d bytes", limit)}
	}
	return b, err
}

// tooLarge is an answer file larger than the call's output limit.
type tooLarge struct{ what string }

func (e *tooLarge) Error() string { return e.what }

// noAnswerFile says why a program that answers in a file has no answer:
// err is why its file could not be read; stdout, what it printed, which
// is named when it looks like the answer that belonged in the file.
func noAnswerFile(err error, stdout []byte) string {
	why := fmt.Sprintf("the agent wrote no answer file (%v)", err)
	if !errors.Is(err, fs.ErrNotExist) {
		why = fmt.Sprintf("the agent left no answer file Logist may read (%v)", err)
	}
	if s := bytes.TrimSpace(stdout); (bytes.HasPrefix(s, []byte("{")) || bytes.HasPrefix(s, []byte("```"))) && bytes.Contains(s, []byte(`"action"`)) {
		why += "; its stdout holds what looks like a JSON answer, which must go to the file {answer_file} names (also in LOGIST_ANSWER_FILE), not to stdout"
	}
	return why
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// capWriter keeps at most limit bytes and reports when more arrive.
type capWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	limit  int64
	onOver func()
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	room := w.limit - int64(w.buf.Len())
	if int64(len(p)) > room {
		if room > 0 {
			w.buf.Write(p[:room])
		}
		w.onOver()
		return len(p), nil
	}
	return w.buf.Write(p)
}

func (w *capWriter) Bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]byte(nil), w.buf.Bytes()...)
}

func (w *capWriter) String() string { return string(w.Bytes()) }

// clearStale removes what an earlier attempt of the interaction may have
// left at path. Most calls are an interaction's first, with nothing there:
// it is looked at first (one lstat), not unlinked blindly (os.Remove's
// unlink, then rmdir, of a path that is not there).
func clearStale(path string) error {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
