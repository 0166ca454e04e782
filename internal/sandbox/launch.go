package sandbox

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/logist/logist/internal/regfile"
	"golang.org/x/sys/unix"
)

// launchMain is the launcher ("__sandbox-launch"), started by the daemon
// in a session of its own so that it outlives the daemon, possibly ahead
// of its call (Local.Prefork), possibly given a spare's plan first, whose
// sandbox it starts ahead of the call's plan (spare.go). It reads its plan from stdin (which names
// the call directory, where it keeps its own log), runs the sandbox,
// keeps the output in the call directory (capped), kills the whole
// sandbox when asked (SIGTERM) or when the output passes the limit, and
// leaves the result (durably when no daemon waits for it: daemonWaits).
// It is the sandbox's child subreaper: whatever the program leaves
// running is killed before the result is written.
func launchMain(args []string) int {
	if len(args) != 0 {
		fmt.Fprintln(os.Stderr, "usage: __sandbox-launch (the plan on stdin)")
		return 2
	}
	// The call relies on both (its secrets unreadable, its leftovers
	// inherited and killed): a launcher without them runs nothing.
	hardenErr := errors.Join(HideProcess(), unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), closeInherited())
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	kill := make(chan os.Signal, 1)
	signal.Notify(kill, syscall.SIGTERM, syscall.SIGINT)
	var p plan
	// A daemon that died while writing leaves a cut plan, and one that
	// died before (a spare's) none: nothing runs. No result either: the
	// daemon that wrote it is gone, and a later daemon may already have
	// started this call again in this directory. Nothing to log: the
	// plan names the log.
	dec := json.NewDecoder(bufio.NewReader(os.Stdin))
	if err := dec.Decode(&p); err != nil {
		return 1
	}
	var sp *spareProc
	if p.Spare {
		// A spare sandbox: started now, used by the call whose plan comes
		// next if it is the same sandbox (spare.go).
		if hardenErr == nil && p.Protocol == planProtocol() {
			sp = startSpare(&p)
		}
		var call plan
		if err := dec.Decode(&call); err != nil {
			sp.discard() // dropped, or its daemon is gone: nothing ran
			return 1
		}
		if sp != nil && !sameSandbox(&p, &call) {
			sp.discard()
			sp = nil
		}
		p = call
	}
	if !filepath.IsAbs(p.CallDir) {
		sp.discard()
		return 1
	}
	dir := p.CallDir
	if err := logTo(filepath.Join(dir, fileLog)); err != nil {
		hardenErr = errors.Join(hardenErr, err)
	}
	res := &Result{Started: time.Now().UTC(), Layer: p.Layer}
	l := &launch{p: &p, res: res, dir: dir, spare: sp}
	if hardenErr != nil {
		return l.finish(OutcomeStartFailed, "launcher: "+hardenErr.Error(), nil, nil)
	}
	if p.Protocol != planProtocol() {
		// Nothing of the plan is trusted but its call directory.
		return l.finish(OutcomeStartFailed, fmt.Sprintf("launcher: %s is not from the same build as the daemon "+
			"(plan protocol %q, its own %q): install %s and logistd from one build", os.Args[0], p.Protocol, planProtocol(), HelperName), nil, nil)
	}
	if p.PrivateTmp {
		tmp, err := os.MkdirTemp("", "logist-call-")
		if err != nil {
			return l.finish(OutcomeStartFailed, "private tmp: "+err.Error(), nil, nil)
		}
		defer os.RemoveAll(tmp) //nolint:errcheck // the call's scratch folder in the temp folder
		if getEnv(p.Env, "TMPDIR") == "" {
			p.Env = setEnv(p.Env, "TMPDIR", tmp)
		}
		if p.HomeTmp {
			p.Env = setEnv(p.Env, "HOME", tmp)
		}
		if p.Exec != nil && p.Exec.Landlock {
			p.Exec.RW = append(p.Exec.RW, pathGrant{Path: tmp, Dir: true})
		}
	}
	return l.run(kill)
}

// logTo makes path the launcher's stdout and stderr (its own messages;
// the program's output goes to the call directory's files).
func logTo(path string) error {
	f, err := regfile.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("launcher log: %v", err)
	}
	defer f.Close() //nolint:errcheck // duplicated onto 1 and 2 below
	return errors.Join(unix.Dup3(int(f.Fd()), 1, 0), unix.Dup3(int(f.Fd()), 2, 0))
}

// closeInherited marks every descriptor above the standard streams
// close-on-exec: what the daemon's own parent left open to it (a pipe of
// the shell or supervisor that started it) must not reach the sandbox,
// which gets only the descriptors the launcher hands it.
func closeInherited() error {
	const closeRangeCloexec = 1 << 2 // CLOSE_RANGE_CLOEXEC, Linux 5.11
	if unix.CloseRange(3, math.MaxUint32, closeRangeCloexec) == nil {
		return nil
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("inherited descriptors: %v", err)
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}

type launch struct {
	out, err *capFile // nil until the program starts
	p        *plan
	res      *Result
	dir      string
	cmd      *exec.Cmd
	// spare, if set, is the sandbox started ahead for this call (spare.go).
	spare    *spareProc
	initPid  int // bwrap: the PID namespace's init, on the host
	initFd   int // a pidfd of it, -1 when none (reap.go)
	initOnce sync.Once
	initSeen chan struct{}
	// unrecorded gets the error of a sandbox pid file that could not be
	// written: a sandbox nobody could find again to kill does not run on.
	unrecorded chan error
}

// record writes the pid file that lets a daemon kill the sandbox when the
// launcher is gone (killRecorded).
func (l *launch) record(pid int) {
	if err := writePid(filepath.Join(l.dir, fileSandbox), pid); err != nil {
		select {
		case l.unrecorded <- err:
		default:
		}
	}
}

func (l *launch) run(kill <-chan os.Signal) int {
	p := l.p
	outF, err := regfile.OpenFile(filepath.Join(l.dir, fileStdout), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return l.finish(OutcomeStartFailed, err.Error(), nil, nil)
	}
	defer outF.Close() //nolint:errcheck // fsync'd by finish (writeResult) when no daemon waits
	errF, err := regfile.OpenFile(filepath.Join(l.dir, fileStderr), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return l.finish(OutcomeStartFailed, err.Error(), outF, nil)
	}
	defer errF.Close() //nolint:errcheck // fsync'd by finish (writeResult) when no daemon waits

	// The proxy's address as the program sees it.
	addr := ""
	if p.Forward != "" && p.Bwrap == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return l.finish(OutcomeStartFailed, "proxy listener: "+err.Error(), outF, errF)
		}
		defer ln.Close() //nolint:errcheck // a listener: nothing to lose
		go forward(ln, p.Forward)
		port := ln.Addr().(*net.TCPAddr).Port
		addr = "127.0.0.1:" + strconv.Itoa(port)
		if p.Exec != nil {
			p.Exec.ConnectPorts = []int{port}
		}
	} else if p.Exec != nil && p.Exec.Listen > 0 {
		addr = "127.0.0.1:" + strconv.Itoa(p.Exec.Listen)
	}
	argv, env, err := fillProxyAddr(p, addr)
	if err != nil {
		return l.finish(OutcomeStartFailed, err.Error(), outF, errF)
	}

	over := make(chan struct{})
	var overOnce sync.Once
	onOver := func() { overOnce.Do(func() { close(over) }) }
	stdout := &capFile{f: outF, sum: sha256.New(), limit: p.Limit, onOver: onOver}
	stderr := &capFile{f: errF, sum: sha256.New(), limit: p.Limit, onOver: onOver}
	l.out, l.err = stdout, stderr
	l.initSeen = make(chan struct{})
	l.initFd = -1
	l.unrecorded = make(chan error, 1)
	l.res.Started = time.Now().UTC()
	pr := l.spare.use(p, argv, env)
	l.spare = nil
	if pr == nil {
		if pr, err = newProc(p, argv, env); err != nil {
			return l.finish(OutcomeStartFailed, err.Error(), outF, errF)
		}
		if err := pr.start(); err != nil {
			pr.closeOurs()
			return l.finish(OutcomeStartFailed, fmt.Sprintf("start %s: %v", pr.cmd.Path, err), outF, errF)
		}
	}
	defer pr.closeOurs()
	cmd, statusR, infoR, lnOurs, outR, errR := pr.cmd, pr.statusR, pr.infoR, pr.lnOurs, pr.outR, pr.errR
	var readers sync.WaitGroup
	readers.Add(3)
	// capFiles never fail (a full disk is counted, not returned); a read
	// error ends the output like EOF does.
	go func() { defer readers.Done(); _, _ = io.Copy(stdout, outR); _ = outR.Close() }()
	go func() { defer readers.Done(); _, _ = io.Copy(stderr, errR); _ = errR.Close() }()
	var statusMsg bytes.Buffer
	go func() { defer readers.Done(); _, _ = io.Copy(&statusMsg, io.LimitReader(statusR, 4096)) }()
	l.cmd = cmd
	if lnOurs != nil {
		// Until the sandbox ends: then the helper's listener, which holds
		// the call's connections, ends with the launcher.
		go func() {
			if ln, err := takeListener(lnOurs); err == nil {
				forward(ln, p.Forward)
			}
		}()
	}
	infoDone := make(chan struct{})
	if infoR != nil {
		go func() { l.readInfo(infoR); close(infoDone) }()
	} else {
		close(infoDone)
		l.record(cmd.Process.Pid)
	}

	// The exit status is read from cmd.ProcessState below. done says the
	// program (or bwrap) has exited; it is reaped only after the kills
	// below, so that its pid and group id cannot have been reused by
	// then (reap.go).
	done := make(chan struct{})
	go func() { _ = WaitExited(cmd.Process.Pid); close(done) }()
	var why Outcome
	whyMsg := ""
	select {
	case <-done:
	case <-kill:
		why = OutcomeKilled
	case <-over:
		why = OutcomeOutputLimit
	case err := <-l.unrecorded:
		why, whyMsg = OutcomeStartFailed, "record the sandbox's pid: "+err.Error()
	}
	if why != "" {
		l.killSandbox()
		<-done
	}
	// Whatever the program left running dies with the call.
	l.killSandbox()
	_ = cmd.Wait() // reaped: its status is in cmd.ProcessState
	select {
	case <-l.initSeen:
		if l.initFd >= 0 {
			// Killed above; bwrap may have exited before it, leaving it
			// to us (the subreaper) still dying. Its end, awaited here,
			// lets the sweep reap it without listing /proc.
			awaitExit(l.initFd, time.Second)
			_ = unix.Close(l.initFd) // a pidfd: nothing to lose
		}
	default:
	}
	sweepChildren()
	drained := make(chan struct{})
	go func() { readers.Wait(); <-infoDone; close(drained) }()
	select {
	case <-drained:
	case <-time.After(5 * time.Second):
		_ = outR.Close()
		_ = errR.Close()
		_ = statusR.Close()
		if infoR != nil {
			_ = infoR.Close()
		}
		<-drained // every reader returns once its pipe is closed
	}
	if why == "" {
		// It printed past the limit and exited before it could be
		// killed for it: the same outcome (the readers are done).
		select {
		case <-over:
			why = OutcomeOutputLimit
		default:
		}
	}
	l.res.ExitCode = exitCode(cmd.ProcessState)
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		if p.Bwrap == "" {
			l.res.Signal = unix.SignalName(ws.Signal())
		} else if why == "" {
			// bwrap itself, before the launcher killed anything.
			l.res.SandboxSignal = unix.SignalName(ws.Signal())
		}
	}
	msg := strings.TrimSpace(statusMsg.String())
	switch {
	case why != "":
		return l.finish(why, whyMsg, outF, errF)
	case msg != "":
		return l.finish(OutcomeStartFailed, msg, outF, errF)
	case p.Bwrap != "" && l.initPid == 0:
		return l.finish(OutcomeStartFailed, "bwrap: "+lastLine(stderr.tail()), outF, errF)
	}
	return l.finish(OutcomeExited, "", outF, errF)
}

// readInfo reads bwrap's status documents: the first names the sandbox's
// init, which is recorded so that the sandbox can be killed whole.
func (l *launch) readInfo(r io.Reader) {
	dec := json.NewDecoder(r)
	for {
		var doc struct {
			ChildPid int `json:"child-pid"`
		}
		if err := dec.Decode(&doc); err != nil {
			return
		}
		if doc.ChildPid > 0 {
			l.initOnce.Do(func() {
				l.initPid = doc.ChildPid
				l.initFd = openChild(doc.ChildPid, l.cmd.Process.Pid)
				l.record(doc.ChildPid)
				close(l.initSeen)
			})
		}
	}
}

// killSandbox kills everything of the call: under bwrap the PID
// namespace's init (the kernel then kills every process in it) and bwrap
// itself; otherwise the program's process group (sweepChildren gets the
// ones that left it).
func (l *launch) killSandbox() {
	if l.cmd == nil || l.cmd.Process == nil {
		return
	}
	if l.p.Bwrap != "" {
		select {
		case <-l.initSeen:
			if l.initFd >= 0 {
				_ = unix.PidfdSendSignal(l.initFd, unix.SIGKILL, nil, 0) // gone already: nothing to kill
			}
		default:
		}
		_ = l.cmd.Process.Signal(syscall.SIGKILL)
		return
	}
	// Gone already: nothing to kill; the sweep gets what left the group.
	_ = syscall.Kill(-l.cmd.Process.Pid, syscall.SIGKILL)
	_ = l.cmd.Process.Signal(syscall.SIGKILL)
}

// sweepChildren kills and reaps every child this process has until none
// is left. As the call's child subreaper the launcher inherits whatever
// the program double-forked or setsid'd; a killed process forks no more,
// so the sweep ends. The children are listed from /proc only while
// wait4 says one is left: a call's usual end leaves none, and reading
// /proc/self/task/*/children costs the daemon about 1.5-3 ms of kernel
// CPU when it reaps the launcher (release_task invalidates each proc
// dentry made for the launcher's threads).
func sweepChildren() {
	for round := 0; round < 1000; round++ {
		reaped, left := reapExited()
		if !left {
			return
		}
		kids := listChildren()
		for _, pid := range kids {
			_ = syscall.Kill(pid, syscall.SIGKILL) // gone already: reaped next round
		}
		if len(kids) == 0 && !reaped {
			return
		}
		if len(kids) > 0 && !reaped {
			time.Sleep(time.Millisecond)
		}
	}
}

// reapExited reaps every child that has exited and says whether any
// child may be left: false only when wait4 reports none (ECHILD).
func reapExited() (reaped, left bool) {
	for {
		pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
		switch {
		case err == syscall.EINTR:
		case err == syscall.ECHILD:
			return reaped, false
		case err != nil || pid == 0:
			return reaped, true // running children, or unknown: list them
		default:
			reaped = true
		}
	}
}

// listChildren is children, replaced in tests to count the listings.
var listChildren = children

// children lists this process's children (every thread's).
func children() []int {
	tasks, _ := os.ReadDir("/proc/self/task")
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "children"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// finish records how the call ended (durably unless its daemon waits for
// it: daemonWaits) and returns the
// launcher's exit status.
func (l *launch) finish(o Outcome, msg string, outF, errF *os.File) int {
	l.spare.discard() // a spare this call did not get to use ran nothing
	l.spare = nil
	r := l.res
	r.Outcome, r.Error = o, msg
	r.Ended = time.Now().UTC()
	r.StdoutBytes, r.StdoutSHA256 = l.out.written()
	r.StderrBytes, r.StderrSHA256 = l.err.written()
	r.Synced = !daemonWaits(0)
	if err := writeResult(l.dir, r, r.Synced, outF, errF); err != nil {
		fmt.Fprintf(os.Stderr, "logist-sandbox: result: %v\n", err)
		return 1
	}
	return 0
}

// daemonWaits says whether the daemon that started this launcher still
// holds its end of the plan's pipe (fd, the launcher's stdin), which it does
// until it has taken the result or let go of it (localCall.letGo). Such a
// daemon records the answer in the job's history with its own fsync, so
// the result needs none: a daemon that dies after this check leaves the
// result in the page cache, where its successor adopts it (Adopt makes it
// durable then). A launcher whose daemon is gone (or that cannot tell)
// makes the result durable itself: it may wait there for a long time.
func daemonWaits(fd int) bool {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	// A pipe whose writer closed polls POLLHUP; anything else (data the
	// plan did not hold, an error) is not a daemon known to wait.
	return err == nil && n == 0
}

// capFile writes at most limit bytes to f and reports when more arrive.
type capFile struct {
	mu     sync.Mutex
	f      *os.File
	sum    hash.Hash
	n      int64
	limit  int64
	onOver func()
	last   []byte // the end of what was written, for error messages
}

func (w *capFile) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	keep := p
	if room := w.limit - w.n; int64(len(p)) > room {
		keep = p[:max(room, 0)]
		w.onOver()
	}
	if len(keep) > 0 {
		k, err := w.f.Write(keep)
		w.n += int64(k)
		w.sum.Write(keep[:k])
		if err != nil {
			return len(p), nil // keep draining: the program must not block on a full disk
		}
		w.last = append(w.last, keep...)
		if len(w.last) > 4096 {
			w.last = w.last[len(w.last)-4096:]
		}
	}
	return len(p), nil
}

// written is how much the launcher wrote to the file, and its hash.
func (w *capFile) written() (int64, string) {
	if w == nil {
		return 0, hex.EncodeToString(sha256.New().Sum(nil))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n, hex.EncodeToString(w.sum.Sum(nil))
}

func (w *capFile) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.last)
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

// lookPath finds a program on the program's PATH (not the launcher's: the
// launcher runs with an empty environment).
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("start " + name + ": not found on PATH")
}
