package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/pathguard"
	"github.com/logist/logist/internal/sandbox"
	"golang.org/x/sys/unix"
)

// ProcSpec is one program run (an agent, or a tool the protocol runs).
type ProcSpec struct {
	Argv []string
	Dir  string
	Env  []string
	// Stdin is fed to the program; nil means /dev/null (several agent
	// CLIs wait forever on an open stdin).
	Stdin []byte
	// Limit caps each of stdout and stderr (DefaultMaxOutput if 0): what
	// the job asks (max_output_bytes, max_tool_output_bytes).
	Limit int64
	// Ceiling is the operator's most per stream, whatever Limit asks (the
	// daemon's --output-ceiling-bytes, set by the executor its
	// Containment made; 0: none). What a program prints is held in the
	// daemon's memory until it ends, so a job's author must not be the
	// only one who bounds it.
	Ceiling int64
	// PidLog, if set, gets a line recording the process group of the call
	// Interaction (KillOrphan).
	PidLog      string
	Interaction int

	// What a contained run may reach besides its workspace (Dir) and the
	// system, read by a sandboxed Executor (the direct one runs the
	// program with the daemon's rights and ignores them):
	// Home is the program's HOME, read-write (a preset's config home);
	// ReadOnly and ReadWrite are extra paths (a request file, a call's
	// scratch folder, files a parliament member may read).
	Home      string
	ReadOnly  []string
	ReadWrite []string
	// Fill are files written for the run (a preset's config in Home) that
	// may hold the proxy's address placeholder (ProxyRoot): a sandboxed
	// Executor fills the address in before the program starts
	// (sandbox.Spec.Fill). A direct run has no placeholder to fill.
	Fill []string
	// CallDir, if set, is where a contained run's output and exit status
	// are kept durably (in the job's folder, never visible to the run):
	// a run given a CallDir that holds a call adopts it (a daemon that
	// died during the call never asks it again). "" = a temporary one.
	CallDir string
	// Next, if set, predicts the run the same job makes next (its paths,
	// not its argv, environment or stdin, which need not be known) and
	// makes the files it names that do not exist yet, so that a
	// sandboxed Executor can start that run's sandbox while this run
	// goes on (sandbox.Local.Spare); ok false: no prediction. undo
	// removes what it made if no run used it.
	Next func() (next ProcSpec, undo func(), ok bool)
	// ModelAPI: the program talks to a model API itself (a CLI preset).
	// Until the metering proxy is bound into the sandbox, a contained run
	// of it shares the host's network (docs/security.md).
	ModelAPI bool
}

// limit is what the run may print per stream: the one rule, which both
// executors enforce and name in their AGENT_OUTPUT_LIMIT (overLimit).
func (s ProcSpec) limit() int64 {
	l := s.Limit
	if l <= 0 {
		l = DefaultMaxOutput
	}
	if s.Ceiling > 0 && l > s.Ceiling {
		return s.Ceiling
	}
	return l
}

// ceiled is s under an executor's ceiling (0: none): the lower of the
// two when both are set.
func (s ProcSpec) ceiled(ceiling int64) ProcSpec {
	if ceiling > 0 && (s.Ceiling <= 0 || ceiling < s.Ceiling) {
		s.Ceiling = ceiling
	}
	return s
}

// overLimit is the error of a run killed for printing more than its
// limit, with what it printed so far; it names the operator's ceiling
// when that, not the job's own limit, is what the run hit.
func (s ProcSpec) overLimit(stdout []byte, stderr string) *Error {
	printed := fmt.Sprintf("printed more than %d bytes", s.limit())
	if asked := (ProcSpec{Limit: s.Limit}).limit(); asked > s.limit() {
		printed += fmt.Sprintf(", this daemon's output ceiling (logistd --output-ceiling-bytes; the job asks %d)", asked)
	}
	return &Error{Code: codes.AgentOutputLimit, Msg: "agent " + printed + "; killed", Partial: stdout, Stderr: stderr, Printed: printed}
}

// ProcResult is what a program that ran to its end left behind.
type ProcResult struct {
	Stdout, Stderr []byte
	// ExitCode is the program's exit status (-1 if killed by a signal).
	ExitCode int
	// Signal names the signal that ended the program ("" when it exited),
	// and Sandbox says that it ended the program's sandbox (bwrap)
	// rather than the program.
	Signal  string
	Sandbox bool
	// Limit is what the run was held to per stream (ProcSpec.limit under
	// the executor's ceiling): the most a caller reads of what the
	// program left behind it, such as an answer file.
	Limit int64
}

// Ended says how a program that did not exit 0 ended, for a person: the
// one wording of every agent's "exited with status N" error.
func (r *ProcResult) Ended(program string) string {
	switch {
	case r.Sandbox:
		return fmt.Sprintf("%s's sandbox (bwrap) was killed by %s from outside the call", program, r.Signal)
	case r.Signal != "":
		return fmt.Sprintf("%s was killed by %s", program, r.Signal)
	}
	return fmt.Sprintf("%s exited with status %d", program, r.ExitCode)
}

// RunProcess runs a program through the executor ctx carries (Direct when
// it carries none): every agent, preset, tool and check process starts
// here. It returns ctx.Err() when ctx ended the run, an *Error for a
// program that could not start or printed too much.
func RunProcess(ctx context.Context, spec ProcSpec) (*ProcResult, error) {
	return ExecutorFrom(ctx).Run(ctx, spec)
}

// devNull is /dev/null opened once for reading, every uncontained run's
// stdin when it is given none: exec.Cmd would open, register with the
// poller (refused), and close it again at every run. Reading /dev/null
// gives EOF whoever reads it, and its offset means nothing, so one
// descriptor serves every run (each child gets a copy as its fd 0).
// Tests replace it.
var devNull = sync.OnceValues(func() (*os.File, error) { return os.Open(os.DevNull) })

// outputPipe is os.Pipe for a child's output: the read end is the
// daemon's, non-blocking and in the runtime's poller (a Close wakes a
// read, which runDirect needs to give up on a process that left the
// group holding the pipe); the write end is the child's, blocking and
// never polled. os.Pipe puts both ends in the poller and makes both
// non-blocking, and exec then makes the child's end blocking again:
// six fcntl and four epoll_ctl per pipe where this makes three and two.
func outputPipe() (r, w *os.File, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	// A pipe's read end has no other flag F_SETFL could change.
	if _, err := unix.FcntlInt(uintptr(p[0]), syscall.F_SETFL, syscall.O_NONBLOCK); err != nil {
		_ = syscall.Close(p[0]) // not handed out
		_ = syscall.Close(p[1])
		return nil, nil, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}

// runDirect runs a program as its own process group and kills the whole
// group when it exits, when ctx is done, or when it prints more than the
// limit.
func runDirect(ctx context.Context, spec ProcSpec) (*ProcResult, error) {
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if spec.Stdin != nil {
		cmd.Stdin = bytes.NewReader(spec.Stdin)
	} else if f, err := devNull(); err == nil {
		cmd.Stdin = f
	} // else nil: exec opens /dev/null itself

	limit := spec.limit()
	over := make(chan struct{})
	var overOnce sync.Once
	onOver := func() { overOnce.Do(func() { close(over) }) }
	stdout := &capWriter{limit: limit, onOver: onOver}
	stderr := &capWriter{limit: limit, onOver: onOver}
	// Our own pipes, read by our own goroutines: Wait returns when the agent
	// exits, and the readers run to EOF once the agent's whole group is
	// gone, so an answer is never cut short by a deadline on the copying
	// (exec's WaitDelay would drop unread output under load).
	outR, outW, err := outputPipe()
	if err != nil {
		return nil, &Error{Code: codes.AgentStart, Msg: err.Error()}
	}
	errR, errW, err := outputPipe()
	if err != nil {
		_ = outR.Close() // pipes: nothing to flush
		_ = outW.Close()
		return nil, &Error{Code: codes.AgentStart, Msg: err.Error()}
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	// Each reader says on read when it has reached EOF.
	read := make(chan struct{}, 2)
	go drainPipe(stdout, outR, read)
	go drainPipe(stderr, errR, read)

	startErr := cmd.Start()
	_ = outW.Close() // the child has its copies
	_ = errW.Close()
	if startErr != nil {
		<-read
		<-read
		return nil, &Error{Code: codes.AgentStart, Msg: fmt.Sprintf("start %s: %v", spec.Argv[0], startErr)}
	}
	pgid := cmd.Process.Pid
	// Remember the group, so that a daemon restarted after a crash can stop
	// an agent its predecessor left running (KillOrphan).
	reaped := func() {}
	if spec.PidLog != "" {
		reaped = recordPid(ctx, spec.PidLog, spec.Interaction, pgid)
	}
	// exited says the agent has exited; it is reaped (cmd.Wait) only after
	// its group is killed, so that the group's id cannot have been taken
	// by another process by then (pids are reused: sandbox.WaitExited).
	exited := make(chan struct{})
	go func() { _ = sandbox.WaitExited(pgid); close(exited) }()

	var why string
	select {
	case <-exited:
	case <-ctx.Done():
		why = "ctx"
	case <-over:
		why = "over"
	}
	// Whatever happened, nothing the agent started may outlive the call
	// (some agent CLIs leave helper daemons behind).
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if why != "" {
		<-exited
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // what it forked meanwhile
	}
	waitErr := cmd.Wait()
	reaped() // its group is gone: the pid log may drop its line
	late := time.NewTimer(5 * time.Second)
	for n := 0; n < 2; {
		select {
		case <-read:
			n++
			continue
		case <-late.C:
		}
		// A process that left the group (setsid) holds our pipes: give up
		// on the rest of its output rather than hang.
		_ = outR.Close()
		_ = errR.Close()
		break
	}
	late.Stop()
	if why == "" {
		// It printed past the limit and exited before it could be
		// killed for it: the same outcome (the readers are done, so
		// the writers have seen everything).
		select {
		case <-over:
			why = "over"
		default:
		}
	}
	switch why {
	case "ctx":
		return nil, ctx.Err()
	case "over":
		return nil, spec.overLimit(stdout.Bytes(), stderr.String())
	}
	res := &ProcResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Limit: limit}
	if waitErr != nil {
		res.ExitCode = -1
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) {
			res.ExitCode = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				res.Signal = unix.SignalName(ws.Signal())
			}
		}
	}
	return res, nil
}

// Protected are the absolute paths of the request's read-only workspace
// files (Request.ReadOnly) that exist as regular files: the one rule for
// what a contained program may not write inside its workspace. A bwrap
// sandbox mounts them read-only over the writable workspace; Landlock
// alone cannot take a right back beneath a folder it grants, so there
// the game's own check of those files is what holds (docs/security.md).
// A file missing now is not protected: bwrap cannot mount what is not
// there, and a file the agent creates is the game's check's to catch.
func Protected(req *Request) []string {
	var out []string
	for _, rel := range req.ReadOnly {
		if _, _, err := pathguard.Resolve(req.Workspace, rel); err != nil {
			continue // outside the workspace: nothing of it is mounted
		}
		// The path the program sees (the workspace as bound), not the
		// real one, so the read-only mount covers what it opens.
		abs := filepath.Join(req.Workspace, filepath.Clean(rel))
		if fi, err := os.Lstat(abs); err == nil && fi.Mode().IsRegular() {
			out = append(out, abs)
		}
	}
	return out
}

// pipeBufs are the buffers the output readers copy through: a call's two
// pipes would otherwise allocate (and zero) 32 KiB each (io.Copy's buffer).
var pipeBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// drainPipe copies r into w until EOF or a read error (which ends the
// output as EOF does; capWriters never fail), closes r, and says so on
// done.
func drainPipe(w *capWriter, r *os.File, done chan<- struct{}) {
	b := pipeBufs.Get().(*[]byte)
	for {
		n, err := r.Read(*b)
		if n > 0 {
			_, _ = w.Write((*b)[:n]) // never fails
		}
		if err != nil {
			break
		}
	}
	pipeBufs.Put(b)
	_ = r.Close()
	done <- struct{}{}
}
