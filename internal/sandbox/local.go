package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Executor runs contained calls. Local runs them as sandboxed processes on
// this host; a Kubernetes Job or a gVisor runtime would be other
// executors with the same contract.
type Executor interface {
	// Start launches the call and returns at once. The call's result
	// lands in spec.CallDir whether or not anyone waits for it.
	Start(spec Spec) (Call, error)
	// Adopt finds the call a previous daemon started in callDir: one that
	// finished (Wait returns its result at once) or one still running.
	// ErrNoCall when callDir holds none; ErrLost when its launcher ended
	// without a result (nothing of it runs any more: re-ask it).
	Adopt(callDir string) (Call, error)
}

// Call is one started call.
type Call interface {
	// Wait returns the call's result once it has ended. When ctx ends
	// first, Wait returns ctx.Err() and the call goes on (Kill stops it).
	// ErrLost when the launcher ended without a result.
	Wait(ctx context.Context) (*Result, error)
	// Kill stops the call and everything it started (the result then says
	// OutcomeKilled) and returns once the launcher has ended.
	Kill() error
}

// Run starts a call and waits for it; when ctx ends first the call is
// killed and ctx.Err() returned (a halt, a deadline).
func Run(ctx context.Context, ex Executor, spec Spec) (*Result, error) {
	c, err := ex.Start(spec)
	if err != nil {
		return nil, err
	}
	r, err := c.Wait(ctx)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		_ = c.Kill() // it returns once the launcher has ended; no error of its own
		return nil, ctx.Err()
	}
	return r, err
}

// Local runs calls on this host under the layers Probe finds.
type Local struct {
	// Self is the binary the launcher and the in-sandbox helper run from;
	// it must call Helper first thing in main. Default: OwnBinary (the
	// logist-sandbox helper beside this executable, or this executable).
	Self string
	// Status overrides the host probe (tests).
	Status *Status
	// KillGrace is how long Kill lets the launcher tear the sandbox down
	// and write the result before it kills the launcher (10s if 0).
	KillGrace time.Duration
	// Prefork keeps one launcher started ahead of the next call, waiting
	// for its plan, so that a call does not wait for the launcher's own
	// start (this binary's runtime and package inits): the daemon sets
	// it. A spare whose daemon is gone reads the end of its plan pipe
	// and exits having run nothing.
	Prefork bool
	// cred runs the launcher as another user (tests of a daemon that is
	// not root).
	cred *syscall.Credential

	spareMu sync.Mutex
	spare   *launcher
	// spares are the spare sandboxes, one per owner at most, and missed
	// how many of an owner's were discarded in a row (spare.go).
	spares map[string]*spareSandbox
	missed map[string]int
	counts SpareCounts
}

// launcher is a started launcher waiting for its plan on in.
type launcher struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	done chan struct{} // closed once it has exited and been reaped
	self string
}

// startLauncher starts a launcher, in a session of its own: the daemon's
// terminal and process group signals do not reach it, and it outlives
// the daemon. It has no call until it is handed a plan; it opens its call
// directory's log itself.
func (l *Local) startLauncher(self string) (*launcher, error) {
	cmd := exec.Command(self, verbLaunch)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: l.cred}
	cmd.Env = launcherEnv() // none: the plan carries the call's environment (race.go: a race build's)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: start launcher: %w", err)
	}
	la := &launcher{cmd: cmd, in: in, done: make(chan struct{}), self: self}
	// The outcome is the launcher's result file, not its exit status.
	go func() { _ = cmd.Wait(); close(la.done) }()
	return la, nil
}

// launcherFor is a launcher for one call: the spare (Prefork), replaced at
// once in the background, or one started now.
func (l *Local) launcherFor(self string) (*launcher, error) {
	if !l.Prefork {
		return l.startLauncher(self)
	}
	l.spareMu.Lock()
	la := l.spare
	l.spare = nil
	l.spareMu.Unlock()
	go l.refill(self)
	if la != nil {
		select {
		case <-la.done: // gone (killed from outside): not a launcher to use
		default:
			if la.self == self {
				return la, nil
			}
			_ = la.in.Close() // another binary's spare: it exits having run nothing
		}
	}
	return l.startLauncher(self)
}

// refill starts the next spare unless one is there already.
func (l *Local) refill(self string) {
	la, err := l.startLauncher(self)
	if err != nil {
		return // the next call starts its own, and says why if it cannot
	}
	l.spareMu.Lock()
	if l.spare == nil {
		l.spare, la = la, nil
	}
	l.spareMu.Unlock()
	if la != nil {
		_ = la.in.Close() // one spare is enough: it exits having run nothing
	}
}

func (l *Local) status() *Status {
	if l.Status != nil {
		return l.Status
	}
	return Probe()
}

func (l *Local) self() (string, error) {
	if l.Self != "" {
		return l.Self, nil
	}
	b, err := OwnBinary()
	return b.Path, err
}

// plan checks spec and makes its plan (makePlan), with the binary that
// runs it.
func (l *Local) plan(spec *Spec) (*plan, string, error) {
	if spec.Layer == "" {
		spec.Layer = LayerAuto
	}
	if err := spec.check(); err != nil {
		return nil, "", err
	}
	st := l.status()
	layer, err := st.Resolve(spec.Layer)
	if err != nil {
		return nil, "", err
	}
	self, err := l.self()
	if err != nil {
		return nil, "", err
	}
	t := tools{self: self, bwrap: st.BwrapPath}
	if st.Landlock.OK {
		t.abi = st.LandlockABI
	}
	p, err := makePlan(spec, layer, t, currentView())
	return p, self, err
}

// Start implements Executor.
func (l *Local) Start(spec Spec) (Call, error) {
	p, self, err := l.plan(&spec)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(spec.CallDir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: call directory: %w", err)
	}
	if holdsCall(spec.CallDir) {
		return nil, fmt.Errorf("%w: %s", ErrCallExists, spec.CallDir)
	}
	body, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	// The owner's spare, if it is this call's very sandbox; else a
	// launcher that starts one.
	la := l.takeSpare(spec.Owner, p)
	if la == nil {
		if la, err = l.launcherFor(self); err != nil {
			return nil, err
		}
	}
	// Recorded before the launcher has its plan: a launcher that runs
	// anything is always found by Adopt.
	if err := writePid(filepath.Join(spec.CallDir, fileLauncher), la.cmd.Process.Pid); err != nil {
		_ = la.cmd.Process.Kill() // it has no plan yet: it runs nothing
		<-la.done                 // killed: its exit status says so
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	// The pipe stays open after the plan: while it is, the launcher
	// knows this daemon waits for its result (daemonWaits). cmd.Wait
	// closes it; so does letGo.
	_, werr := la.in.Write(body)
	c := &localCall{dir: spec.CallDir, done: la.done, grace: l.KillGrace, hold: la.in,
		signal: func(s syscall.Signal) error { return la.cmd.Process.Signal(s) }}
	if werr != nil {
		_ = c.Kill() // no error of its own
		return nil, fmt.Errorf("sandbox: hand the launcher its plan: %w", werr)
	}
	return c, nil
}

// Adopt implements Executor.
func (l *Local) Adopt(dir string) (Call, error) {
	finished := func() Call {
		c := &localCall{dir: dir, done: make(chan struct{}), signal: func(syscall.Signal) error { return nil }}
		close(c.done)
		return c
	}
	// The launcher first: its result is read only once it has exited.
	pid, alive, err := readPid(filepath.Join(dir, fileLauncher))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNoCall, dir)
	}
	// A record a machine crash cut short names no process that still runs.
	if alive {
		if c, ok := adoptRunning(dir, pid, l.KillGrace); ok {
			return c, nil
		}
	}
	if _, err := os.Stat(filepath.Join(dir, fileResult)); err == nil {
		// Its launcher may have left it to the daemon that died: this
		// one takes it over, durably, before anything relies on it.
		if err := syncResult(dir); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		return finished(), nil
	}
	killRecorded(filepath.Join(dir, fileSandbox))
	return nil, fmt.Errorf("%w (%s)", ErrLost, dir)
}

// Adoptable says whether Adopt(dir) would take a call over (one running
// under its launcher, or one whose result its launcher kept) rather than
// find none or a lost one, which is asked again. It changes nothing: what
// a daemon tells before it runs the call.
func Adoptable(dir string) bool {
	_, alive, err := readPid(filepath.Join(dir, fileLauncher))
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if alive {
		return true
	}
	_, err = os.Stat(filepath.Join(dir, fileResult))
	return err == nil
}

// adoptRunning follows a launcher that is not this process's child,
// through a pidfd (which names that very process, whatever later reuses
// its pid).
func adoptRunning(dir string, pid int, grace time.Duration) (*localCall, bool) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, false
	}
	// The pidfd was opened while the recorded process still ran: check
	// again that it is the one recorded.
	if _, alive, err := readPid(filepath.Join(dir, fileLauncher)); err != nil || !alive {
		_ = unix.Close(fd) // a pidfd: nothing to lose
		return nil, false
	}
	c := &localCall{dir: dir, done: make(chan struct{}), grace: grace,
		signal: func(s syscall.Signal) error { return unix.PidfdSendSignal(fd, s, nil, 0) }}
	go func() {
		for {
			_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
			if err != unix.EINTR {
				break
			}
		}
		close(c.done)
		// signal may still be called after done (Kill of an ended call):
		// the pidfd stays open for the call's life, as a pid would.
	}()
	return c, true
}

type localCall struct {
	dir    string
	done   chan struct{}
	signal func(syscall.Signal) error
	grace  time.Duration
	// hold is this daemon's end of the launcher's plan pipe (nil for an
	// adopted call): open, it tells the launcher that the result will be
	// taken and recorded here, so the launcher need not fsync it.
	hold io.Closer
}

func (c *localCall) Wait(ctx context.Context) (*Result, error) {
	select {
	case <-c.done:
	case <-ctx.Done():
		c.letGo()
		return nil, ctx.Err()
	}
	r, err := readResult(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		killRecorded(filepath.Join(c.dir, fileSandbox))
		return nil, fmt.Errorf("%w (%s)", ErrLost, c.dir)
	}
	return r, err
}

// letGo tells the launcher that this daemon no longer waits for the
// result (it closes the plan's pipe), and makes a result already written
// durable: a launcher checks the pipe after writing its result, so either
// it sees the pipe closed and fsyncs, or its result is there to be seen
// here.
func (c *localCall) letGo() {
	if c.hold == nil {
		return
	}
	_ = c.hold.Close() // a pipe: closing twice (cmd.Wait) is a no-op
	// A result the disk refuses to keep is, after a machine crash, a
	// lost call asked again, as one cut during its launcher's fsyncs.
	_ = syncResult(c.dir)
}

func (c *localCall) Kill() error {
	select {
	case <-c.done:
		return nil
	default:
	}
	_ = c.signal(syscall.SIGTERM) // ended already: done says so below
	grace := c.grace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	select {
	case <-c.done:
		return nil
	case <-time.After(grace):
	}
	// The launcher did not end: kill it, and the sandbox with it (bwrap's
	// --die-with-parent; the recorded init or process group otherwise).
	_ = c.signal(syscall.SIGKILL) // ended already: done says so below
	killRecorded(filepath.Join(c.dir, fileSandbox))
	<-c.done
	return nil
}

// Ready says whether Local can start calls from this process: its helper
// binary is known (Helper ran, or Self is set).
func (l *Local) Ready() error {
	_, err := l.self()
	return err
}
