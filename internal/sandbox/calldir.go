package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/regfile"
)

// A call directory holds one call (outside the sandbox, in the job's
// folder):
//
//	launcher.pid  "PID START": the launcher (written by the daemon before it
//	              hands the launcher its plan, so a launcher that runs
//	              anything is always recorded)
//	sandbox.pid   "PID START": the sandbox's main process (bwrap: the PID
//	              namespace's init; otherwise the program's process group)
//	stdout, stderr what the program printed, at most the limit each
//	result.json   how it ended (Result), with the size and SHA-256 of
//	              each output; made durable with them when no daemon
//	              waits for it, and read only once the launcher has exited
//	launcher.log  the launcher's own messages
//
// The pid files are not fsync'd: after a machine restart no process of
// the call exists, and the call is lost either way.
const (
	fileLauncher = "launcher.pid"
	fileSandbox  = "sandbox.pid"
	fileStdout   = "stdout"
	fileStderr   = "stderr"
	fileResult   = "result.json"
	fileLog      = "launcher.log"
)

// writePid records a running process with its start time (to tell it
// from a later process that reuses the pid).
func writePid(path string, pid int) error {
	st, ok := procStart(pid)
	if !ok {
		st = "0"
	}
	return regfile.WriteFile(path, []byte(fmt.Sprintf("%d %s\n", pid, st)), 0o600)
}

// readPid returns the process a pid file records and whether that very
// process still runs.
func readPid(path string) (pid int, alive bool, err error) {
	b, err := regfile.ReadFile(path)
	if err != nil {
		return 0, false, err
	}
	var start string
	if _, err := fmt.Sscanf(string(b), "%d %s", &pid, &start); err != nil || pid <= 1 {
		return 0, false, fmt.Errorf("%s: malformed", path)
	}
	cur, ok := procStart(pid)
	return pid, ok && cur == start, nil
}

// procStart is the start time of a running process in clock ticks since
// boot (field 22 of /proc/PID/stat); false for one that has exited (a
// zombie not yet reaped included).
func procStart(pid int) (string, bool) {
	f := statFields(pid)
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return "", false
	}
	return f[19], true
}

// statFields are the fields of /proc/PID/stat that follow the command's
// name (the state first), nil when the process is gone.
func statFields(pid int) []string {
	b, err := regfile.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// writeResult writes the call's result.json. durable: and makes it and
// the outputs durable with them (syncFiles). A result the daemon that
// started the call is waiting for needs no fsync of its own: see
// launcher.daemonWaits and docs/security.md "Calls that outlive the
// daemon". It is read only once the launcher has exited, so no reader sees
// it half written.
func writeResult(dir string, r *Result, durable bool, outputs ...*os.File) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	f, err := regfile.OpenFile(filepath.Join(dir, fileResult), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close() // the error is the write's
		return err
	}
	var first error
	if durable {
		first = syncFiles(dir, append([]*os.File{f}, outputs...))
	}
	// After every fsync (one of them is f's).
	if err := f.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// syncFiles makes a call's files durable with all the fsyncs at once: the
// files (its outputs and result.json), the call directory and its entry
// in its parent. A crash may then keep result.json without an output; the
// hashes in it tell (readResult says ErrLost), so result.json needs no
// ordering of its own.
func syncFiles(dir string, files []*os.File) error {
	syncs := []func() error{
		func() error { return atomicfile.SyncDir(dir) },
		func() error { return atomicfile.SyncDir(filepath.Dir(dir)) }}
	for _, o := range files {
		if o != nil {
			syncs = append(syncs, o.Sync)
		}
	}
	errs := make(chan error, len(syncs))
	for _, s := range syncs {
		go func() { errs <- s() }()
	}
	var first error
	for range syncs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// syncResult makes a finished call's result and outputs durable from
// outside the launcher: done by a daemon that lets go of a result it did
// not record (Wait given up, or a result adopted after a restart), so a
// result no daemon waits for is always durable. A call with no
// result.json yet has nothing to make durable: its launcher, which finds
// no daemon waiting, does it.
func syncResult(dir string) error {
	if _, err := os.Lstat(filepath.Join(dir, fileResult)); err != nil {
		return nil
	}
	var files []*os.File
	for _, name := range []string{fileResult, fileStdout, fileStderr} {
		f, err := regfile.OpenRegular(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		defer f.Close() //nolint:errcheck // read-only: fsync'd below
		files = append(files, f)
	}
	return syncFiles(dir, files)
}

// readResult reads a finished call back: fs.ErrNotExist when there is no
// result, ErrLost when what is there is not whole (a crash while it was
// being made durable).
func readResult(dir string) (*Result, error) {
	b, err := regfile.ReadFile(filepath.Join(dir, fileResult))
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrLost, filepath.Join(dir, fileResult), err)
	}
	if r.Stdout, err = readOutput(filepath.Join(dir, fileStdout), r.StdoutBytes, r.StdoutSHA256); err != nil {
		return nil, err
	}
	if r.Stderr, err = readOutput(filepath.Join(dir, fileStderr), r.StderrBytes, r.StderrSHA256); err != nil {
		return nil, err
	}
	return &r, nil
}

// readOutput reads an output file and checks it is what the launcher
// wrote.
func readOutput(p string, n int64, sum string) ([]byte, error) {
	b, err := regfile.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	got := sha256.Sum256(b)
	if int64(len(b)) != n || hex.EncodeToString(got[:]) != sum {
		return nil, fmt.Errorf("%w: %s: %d bytes that are not what the launcher wrote (%d bytes, sha256 %s)", ErrLost, p, len(b), n, sum)
	}
	return b, nil
}

// holdsCall reports whether dir holds (or held) a call.
func holdsCall(dir string) bool {
	for _, f := range []string{fileLauncher, fileResult} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	return false
}

// Forget removes a call directory once its result is recorded elsewhere
// (the job's history): a later Adopt finds no call, so a result is taken
// exactly once. The removal is not fsync'd: a directory a machine crash
// brings back holds a call whose number the history has closed (an
// interaction number is never asked again once its answer is recorded),
// or a failed attempt of an open call (adopted, it is that failure,
// retried), so nothing reads a result twice.
func Forget(callDir string) error {
	return os.RemoveAll(callDir)
}

// killRecorded kills the process a pid file records, if that very process
// still runs: the sandbox's init (every process in its PID namespace dies
// with it) or the program's process group.
func killRecorded(path string) bool {
	pid, alive, err := readPid(path)
	if err != nil || !alive {
		return false
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL) // a process group (landlock, none), if it is one
	return syscall.Kill(pid, syscall.SIGKILL) == nil
}

// Holds reports whether callDir holds a call (running, finished or lost):
// a caller that finds one adopts it rather than starting the call again.
func Holds(callDir string) bool { return holdsCall(callDir) }
