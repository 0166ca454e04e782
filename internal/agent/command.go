package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/logist/logist/internal/manifest"
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
	// Getenv reads the daemon's environment (tests inject it).
	Getenv func(string) string
}

// Call runs the program once. The request JSON is written to
// requests/<interaction>.json in the job folder; the answer is read from
// stdout or from the answer file.
func (c *Command) Call(ctx context.Context, req *Request) (*Result, error) {
	reqDir := filepath.Join(req.JobDir, "requests")
	if err := os.MkdirAll(reqDir, 0o700); err != nil {
		return nil, &Error{Code: CodeStart, Msg: err.Error()}
	}
	reqFile := filepath.Join(reqDir, fmt.Sprintf("%06d.json", req.Interaction))
	ansFile := filepath.Join(reqDir, fmt.Sprintf("%06d.answer.json", req.Interaction))
	body, _ := json.MarshalIndent(req, "", "  ")
	if err := os.WriteFile(reqFile, body, 0o600); err != nil {
		return nil, &Error{Code: CodeStart, Msg: err.Error()}
	}
	os.Remove(ansFile)

	repl := strings.NewReplacer("{request_file}", reqFile, "{answer_file}", ansFile, "{workspace}", req.Workspace,
		"{job_id}", req.JobID, "{phase}", req.Phase, "{role}", req.Role)
	argv := make([]string, len(c.Cfg.Argv))
	for i, a := range c.Cfg.Argv {
		argv[i] = repl.Replace(a)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = req.Workspace
	cmd.Env = c.env(req, reqFile, ansFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.Cfg.Stdin == "request" {
		cmd.Stdin = bytes.NewReader(body)
	} // else nil: /dev/null

	limit := c.Cfg.MaxOutputBytes
	if limit <= 0 {
		limit = DefaultMaxOutput
	}
	over := make(chan struct{})
	var overOnce sync.Once
	onOver := func() { overOnce.Do(func() { close(over) }) }
	stdout := &capWriter{limit: limit, onOver: onOver}
	stderr := &capWriter{limit: limit, onOver: onOver}
	// Our own pipes, read by our own goroutines: Wait returns when the agent
	// exits, and the readers run to EOF once the agent's whole group is
	// gone, so an answer is never cut short by a deadline on the copying
	// (exec's WaitDelay would drop unread output under load).
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, &Error{Code: CodeStart, Msg: err.Error()}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, &Error{Code: CodeStart, Msg: err.Error()}
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); io.Copy(stdout, outR); outR.Close() }()
	go func() { defer readers.Done(); io.Copy(stderr, errR); errR.Close() }()

	startErr := cmd.Start()
	outW.Close() // the child has its copies
	errW.Close()
	if startErr != nil {
		readers.Wait()
		return nil, &Error{Code: CodeStart, Msg: fmt.Sprintf("start %s: %v", argv[0], startErr)}
	}
	pgid := cmd.Process.Pid
	killGroup := func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) }
	// Remember the group, so that a daemon restarted after a crash can stop
	// an agent its predecessor left running (KillOrphan).
	pidFile := filepath.Join(reqDir, fmt.Sprintf("%06d.pid", req.Interaction))
	writePidFile(pidFile, pgid)
	defer os.Remove(pidFile)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var waitErr error
	var why string
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		why = "ctx"
	case <-over:
		why = "over"
	}
	// Whatever happened, nothing the agent started may outlive the call.
	killGroup()
	if why != "" {
		waitErr = <-done
	}
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(5 * time.Second):
		// A process that left the group (setsid) holds our pipes: give up
		// on the rest of its output rather than hang.
		outR.Close()
		errR.Close()
	}
	errText := stderr.String()
	switch why {
	case "ctx":
		return nil, ctx.Err()
	case "over":
		return nil, &Error{Code: CodeOutputLimit, Msg: fmt.Sprintf("agent printed more than %d bytes; killed", limit), Partial: stdout.Bytes(), Stderr: errText}
	}
	if waitErr != nil {
		var ee *exec.ExitError
		code := -1
		if errors.As(waitErr, &ee) {
			code = ee.ExitCode()
		}
		return nil, &Error{Code: CodeExit, Transient: true, Msg: fmt.Sprintf("%s exited with status %d: %s", argv[0], code, lastLine(errText)), Partial: stdout.Bytes(), Stderr: errText}
	}
	res := &Result{Raw: stdout.Bytes(), Stderr: errText}
	if c.Cfg.Answer == "file" {
		b, err := readCapped(ansFile, limit)
		if err != nil {
			return nil, &Error{Code: CodeExit, Msg: fmt.Sprintf("answer file: %v", err), Partial: stdout.Bytes(), Stderr: errText}
		}
		res.Raw = b
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

// writePidFile records an agent's process group and its start time (to
// tell it from a later process that reuses the pid).
func writePidFile(p string, pid int) {
	st, ok := procStart(pid)
	if !ok {
		return
	}
	os.WriteFile(p, []byte(fmt.Sprintf("%d %s\n", pid, st)), 0o600)
}

// procStart is the start time of a process in clock ticks since boot
// (field 22 of /proc/PID/stat).
func procStart(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return "", false
	}
	return f[19], true
}

// KillOrphan kills the process group of the agent call for interaction n
// of the job in jobDir if it still runs: a daemon killed mid-call leaves
// its agent running, and the re-attempt must not run beside it. It
// reports whether it killed anything.
func KillOrphan(jobDir string, n int) bool {
	p := filepath.Join(jobDir, "requests", fmt.Sprintf("%06d.pid", n))
	b, err := os.ReadFile(p)
	if err != nil {
		return false
	}
	defer os.Remove(p)
	var pid int
	var start string
	if _, err := fmt.Sscanf(string(b), "%d %s", &pid, &start); err != nil || pid <= 1 {
		return false
	}
	if cur, ok := procStart(pid); !ok || cur != start {
		return false // gone, or the pid now belongs to someone else
	}
	return syscall.Kill(-pid, syscall.SIGKILL) == nil
}

func readCapped(p string, limit int64) ([]byte, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%d bytes, more than %d", fi.Size(), limit)
	}
	return os.ReadFile(p)
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
