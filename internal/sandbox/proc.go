package sandbox

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"syscall"
)

// proc is a call's first process (bwrap, the helper of Landlock alone, or
// the program itself under layer none) and the launcher's ends of the
// pipes it is given.
type proc struct {
	cmd                                *exec.Cmd
	outR, errR, statusR, infoR, lnOurs *os.File // infoR, lnOurs: nil when none
	child                              []*os.File
	// A spare's (spare.go): the helper's ready byte, then its program;
	// and the program's stdin.
	spareOurs, stdinW *os.File
}

// newProc builds the process that runs argv as p says; with p.Spare, the
// sandbox alone (argv empty), whose helper waits for its program.
func newProc(p *plan, argv, env []string) (*proc, error) {
	pr := &proc{}
	ok := false
	defer func() {
		if !ok {
			pr.closeOurs()
			pr.closeChild()
		}
	}()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	pr.statusR = statusR
	pr.child = append(pr.child, statusW)
	var cmd *exec.Cmd
	switch {
	case p.Bwrap != "":
		x := *p.Exec
		x.Spare = p.Spare
		cfg, _ := json.Marshal(&x)
		a := append(append([]string{}, p.BArgs...), "--", p.Helper, verbExec, string(cfg), "--")
		cmd = exec.Command(p.Bwrap, append(a, argv...)...)
		infoR, infoW, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		pr.infoR = infoR
		pr.child = append(pr.child, infoW)
		cmd.ExtraFiles = []*os.File{statusW, infoW}
		if p.Forward != "" {
			// The helper hands out the proxy's listener (listener.go).
			ours, theirs, err := listenerPair()
			if err != nil {
				return nil, err
			}
			pr.lnOurs = ours
			pr.child = append(pr.child, theirs)
			cmd.ExtraFiles = append(cmd.ExtraFiles, theirs)
		}
		if p.Spare {
			ours, theirs, err := sparePair()
			if err != nil {
				return nil, err
			}
			pr.spareOurs = ours
			pr.child = append(pr.child, theirs)
			if len(cmd.ExtraFiles) == listenerFD-3 {
				cmd.ExtraFiles = append(cmd.ExtraFiles, nil) // no listener: closed in the child
			}
			cmd.ExtraFiles = append(cmd.ExtraFiles, theirs)
			stdinR, stdinW, err := os.Pipe()
			if err != nil {
				return nil, err
			}
			pr.stdinW = stdinW
			pr.child = append(pr.child, stdinR)
			cmd.Stdin = stdinR
		}
	case p.Exec != nil:
		cfg, _ := json.Marshal(p.Exec)
		cmd = exec.Command(p.Self, append([]string{verbExec, string(cfg), "--"}, argv...)...)
		cmd.ExtraFiles = []*os.File{statusW}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	default:
		path, err := lookPath(argv[0], getEnv(env, "PATH"))
		if err != nil {
			return nil, err
		}
		cmd = exec.Command(path, argv[1:]...)
		cmd.Args[0] = argv[0]
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	cmd.Env = env
	if cmd.Env == nil {
		cmd.Env = []string{} // a spare's sandbox gets its program's environment later
	}
	cmd.Dir = p.Dir
	if p.HasStdin && !p.Spare {
		cmd.Stdin = bytes.NewReader(p.Stdin)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	pr.outR = outR
	pr.child = append(pr.child, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	pr.errR = errR
	pr.child = append(pr.child, errW)
	cmd.Stdout, cmd.Stderr = outW, errW
	pr.cmd = cmd
	ok = true
	return pr, nil
}

// start starts the process and closes the launcher's copies of the
// child's ends (pipes' write ends with nothing buffered).
func (pr *proc) start() error {
	err := pr.cmd.Start()
	pr.closeChild()
	return err
}

func (pr *proc) closeChild() {
	for _, f := range pr.child {
		_ = f.Close() // the child's end: the child has its own copy
	}
	pr.child = nil
}

// closeOurs closes the launcher's ends (closing twice is harmless: the
// readers close theirs when done).
func (pr *proc) closeOurs() {
	for _, f := range []*os.File{pr.outR, pr.errR, pr.statusR, pr.infoR, pr.lnOurs, pr.spareOurs, pr.stdinW} {
		if f != nil {
			_ = f.Close() // a pipe's or socket pair's end: nothing to lose
		}
	}
}
