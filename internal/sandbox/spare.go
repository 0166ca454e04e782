package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A spare sandbox takes bwrap's start (its namespaces and mounts, the
// in-sandbox helper's start, Landlock's ruleset) off a call's critical
// path: the daemon starts it for a job's next call as predicted while the
// job's current call runs (Local.Spare), and the next call uses it only
// if its own plan makes the very same sandbox (sameSandbox: the bwrap
// arguments, the helper's configuration, and the same files behind every
// bound path), else it is discarded and the call starts a sandbox of its
// own as before. So makePlan stays the one place that decides what a
// call reaches, and a spare serves exactly one call and then dies with
// it: its network namespace is that call's alone.
//
// The spare's launcher gets the spare's plan (no call directory, no
// program, no environment: nothing of a call) and starts bwrap; the
// helper inside makes the proxy's listener and Landlock's ruleset, says
// so on spareFD, and waits there. The call's plan comes next on the
// launcher's stdin, as any launcher's does; the launcher hands the helper
// the program (argv, environment, whether stdin is fed) on spareFD, and
// the helper sets the limits, drops its capabilities, installs its
// filters and Landlock, and executes the program, as a helper that was
// started with the call does. A spare whose daemon drops it (the job
// ended, the prediction was wrong) or dies reads the end of its stdin,
// kills its sandbox and exits: no program ever ran in it, and it left
// nothing on disk (it never had a call directory).

// spareProgram is what a spare's helper gets last: the call's program.
type spareProgram struct {
	Argv  []string `json:"argv"`
	Env   []string `json:"env"`
	Stdin bool     `json:"stdin"` // fed by the launcher; else /dev/null
}

// spareMisses is how many spares in a row an owner may see discarded
// (its calls did not make the predicted sandbox: a job whose roles run
// different programs) before it gets no more until DropSpare: a spare
// that is never used costs a whole sandbox's start.
const spareMisses = 3

// spareWait bounds how long a call waits for its spare's helper to be
// ready (it started during the previous call, so it usually is) before it
// discards it and starts a sandbox of its own.
const spareWait = 10 * time.Second

// sameSandbox says whether plans a and b make the same sandbox: all that
// a spare is made of before its program is known (the bwrap arguments
// byte for byte, the helper's configuration, the binaries, the working
// folder, the proxy). The one rule both the daemon and the launcher
// apply before a call uses a spare.
func sameSandbox(a, b *plan) bool {
	return a.Bwrap != "" && a.Layer == b.Layer && a.Bwrap == b.Bwrap && a.Self == b.Self && a.Helper == b.Helper &&
		a.Dir == b.Dir && a.Forward == b.Forward && slices.Equal(a.BArgs, b.BArgs) && reflect.DeepEqual(a.Exec, b.Exec)
}

// bindIdentity names the file behind each path bwrap binds (device and
// inode): a folder replaced since the spare was made (a workspace
// restored, a request file written anew) makes a different sandbox.
func bindIdentity(bargs []string) string {
	var b strings.Builder
	for i := 0; i+1 < len(bargs); i++ {
		if bargs[i] != "--bind" && bargs[i] != "--ro-bind" {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(bargs[i+1], &st); err != nil {
			b.WriteString("?;")
			continue
		}
		b.WriteString(strconv.FormatUint(st.Dev, 16) + ":" + strconv.FormatUint(st.Ino, 16) + ";")
	}
	return b.String()
}

// sparePair is the socket pair of a spare's helper: ours non-blocking,
// so that discarding the spare ends a read of it.
func sparePair() (ours, theirs *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("spare pair: %v", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		_ = unix.Close(fds[0]) // not handed out yet
		_ = unix.Close(fds[1])
		return nil, nil, fmt.Errorf("spare pair: %v", err)
	}
	return os.NewFile(uintptr(fds[0]), "spare-pair"), os.NewFile(uintptr(fds[1]), "spare-pair-child"), nil
}

// spareProc is a spare sandbox started by its launcher.
type spareProc struct {
	pr    *proc
	ready chan bool // true once its helper waits for the program
}

// startSpare starts the sandbox of the spare's plan p; nil when it
// cannot (the call then starts one of its own).
func startSpare(p *plan) *spareProc {
	if p.Bwrap == "" || p.Exec == nil {
		return nil
	}
	pr, err := newProc(p, nil, nil)
	if err != nil {
		return nil
	}
	if err := pr.start(); err != nil {
		pr.closeOurs()
		return nil
	}
	sp := &spareProc{pr: pr, ready: make(chan bool, 1)}
	go func() {
		var b [1]byte
		n, _ := pr.spareOurs.Read(b[:])
		sp.ready <- n == 1 && b[0] == 'R'
	}()
	return sp
}

// use hands the spare's helper the call's program and returns the spare's
// process, or nil after discarding a spare that is not ready (its helper
// failed, or did not get ready in spareWait): nothing of the call ran in
// it, and the call starts a sandbox of its own.
func (sp *spareProc) use(p *plan, argv, env []string) *proc {
	if sp == nil {
		return nil
	}
	select {
	case ok := <-sp.ready:
		if !ok {
			sp.discard()
			return nil
		}
	case <-time.After(spareWait):
		sp.discard()
		return nil
	}
	b, _ := json.Marshal(spareProgram{Argv: argv, Env: env, Stdin: p.HasStdin})
	// The helper runs the program only once it has read it whole: a
	// write that fails leaves it nothing to run.
	if _, err := sp.pr.spareOurs.Write(b); err != nil {
		sp.discard()
		return nil
	}
	_ = sp.pr.spareOurs.Close() // the end of the program: the helper reads to here
	sp.pr.spareOurs = nil
	w := sp.pr.stdinW
	sp.pr.stdinW = nil
	if p.HasStdin {
		go func() { _, _ = w.Write(p.Stdin); _ = w.Close() }() // a program that stops reading ends it
	} else {
		_ = w.Close() // the helper puts /dev/null in its place
	}
	return sp.pr
}

// discard kills a spare that no call uses, reaps it and whatever of its
// sandbox was left to this launcher, the sandbox's subreaper.
func (sp *spareProc) discard() {
	if sp == nil {
		return
	}
	_ = sp.pr.cmd.Process.Kill() // bwrap: its init dies with it (--die-with-parent), and with it the sandbox
	_ = sp.pr.cmd.Wait()
	sp.pr.closeOurs()
	sweepChildren()
}

// awaitProgram is a spare's helper's side: it says it is ready on
// spareFD and reads its program there.
func awaitProgram() (*spareProgram, error) {
	syscall.CloseOnExec(spareFD)
	f := os.NewFile(spareFD, "spare")
	defer f.Close() //nolint:errcheck // read to its end below
	if _, err := f.Write([]byte{'R'}); err != nil {
		return nil, fmt.Errorf("spare: %v", err)
	}
	var sp spareProgram
	if err := json.NewDecoder(f).Decode(&sp); err != nil {
		return nil, fmt.Errorf("spare: no program (%v)", err)
	}
	if len(sp.Argv) == 0 {
		return nil, errors.New("spare: empty argv")
	}
	if !sp.Stdin {
		null, err := unix.Open("/dev/null", unix.O_RDONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("spare: /dev/null: %v", err)
		}
		if err := unix.Dup3(null, 0, 0); err != nil {
			return nil, fmt.Errorf("spare: /dev/null: %v", err)
		}
		_ = unix.Close(null) // duplicated onto 0
	}
	// The program's PATH is where exec.LookPath looks.
	os.Clearenv()
	if path := getEnv(sp.Env, "PATH"); path != "" {
		_ = os.Setenv("PATH", path) // a value the kernel took is one Setenv takes
	}
	return &sp, nil
}

// spareSandbox is a spare on the daemon's side: its launcher, which has
// the spare's plan, and the sandbox it makes (its plan, and the files
// behind its binds).
type spareSandbox struct {
	la *launcher
	p  *plan
	id string // bindIdentity
}

// drop closes the spare's plan pipe: its launcher kills its sandbox and
// exits, having run nothing.
func (s *spareSandbox) drop() { _ = s.la.in.Close() }

// Spare starts a sandbox for the next call of spec.Owner as predicted by
// spec (its argv, environment and stdin are not used: the call's own are
// handed in when it starts), in place of the owner's previous spare. Only
// a bwrap sandbox is made ahead (nil for other layers, whose start costs
// no namespaces or mounts). The call directory spec names is neither
// made nor used: a spare has no call until Start hands it one.
func (l *Local) Spare(spec Spec) error {
	if spec.Owner == "" {
		return errors.New("sandbox: a spare needs an owner")
	}
	l.spareMu.Lock()
	missed := l.missed[spec.Owner]
	l.spareMu.Unlock()
	if missed >= spareMisses {
		return nil
	}
	p, self, err := l.plan(&spec)
	if err != nil {
		return err
	}
	if p.Bwrap == "" {
		return nil
	}
	id := bindIdentity(p.BArgs)
	sp := *p
	sp.Spare, sp.CallDir, sp.Argv, sp.Env, sp.Stdin, sp.HasStdin, sp.Fill = true, "", nil, nil, nil, false, nil
	body, err := json.Marshal(&sp)
	if err != nil {
		return err
	}
	la, err := l.launcherFor(self)
	if err != nil {
		return err
	}
	if _, err := la.in.Write(body); err != nil {
		_ = la.in.Close() // it exits having run nothing
		return fmt.Errorf("sandbox: hand the spare its plan: %w", err)
	}
	l.spareMu.Lock()
	if l.spares == nil {
		l.spares = map[string]*spareSandbox{}
	}
	old := l.spares[spec.Owner]
	l.spares[spec.Owner] = &spareSandbox{la: la, p: p, id: id}
	l.counts.Started++
	if old != nil {
		l.counts.Discarded++
	}
	l.spareMu.Unlock()
	if old != nil {
		old.drop()
	}
	return nil
}

// SpareCounts say how the spare sandboxes fared: Started, those handed
// their plan; Served, those handed a call whose plan made their sandbox
// (its launcher still starts one of its own if the spare's helper never
// got ready); Discarded, those killed unused
// (the call's sandbox was another, the owner's run ended, a newer spare
// replaced it, or it was gone). A spare still waiting is in none of the
// last two.
type SpareCounts struct {
	Started, Served, Discarded int
}

// SpareCounts is how this executor's spares have fared so far.
func (l *Local) SpareCounts() SpareCounts {
	l.spareMu.Lock()
	defer l.spareMu.Unlock()
	return l.counts
}

// takeSpare is the owner's spare launcher if its sandbox is the one p
// makes, nil otherwise; the owner has no spare after.
func (l *Local) takeSpare(owner string, p *plan) *launcher {
	if owner == "" {
		return nil
	}
	l.spareMu.Lock()
	s := l.spares[owner]
	delete(l.spares, owner)
	l.spareMu.Unlock()
	if s == nil {
		return nil
	}
	hit := sameSandbox(s.p, p) && s.id == bindIdentity(p.BArgs)
	gone := false
	select {
	case <-s.la.done: // gone (killed from outside)
		hit, gone = false, true
	default:
	}
	l.spareMu.Lock()
	if l.missed == nil {
		l.missed = map[string]int{}
	}
	switch {
	case hit:
		delete(l.missed, owner)
		l.counts.Served++
	case gone:
		l.counts.Discarded++
	default:
		l.missed[owner]++
		l.counts.Discarded++
	}
	l.spareMu.Unlock()
	if !hit {
		s.drop()
		return nil
	}
	return s.la
}

// DropSpare kills the owner's spare, if it has one (the owner's job
// ended, or was halted), and returns once its launcher has exited (or
// after a while: it exits by itself once it reads the end of its plan
// pipe).
func (l *Local) DropSpare(owner string) {
	l.spareMu.Lock()
	s := l.spares[owner]
	delete(l.spares, owner)
	delete(l.missed, owner)
	if s != nil {
		l.counts.Discarded++
	}
	l.spareMu.Unlock()
	if s == nil {
		return
	}
	s.drop()
	select {
	case <-s.la.done:
	case <-time.After(10 * time.Second):
	}
}
