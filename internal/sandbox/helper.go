package sandbox

import (
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The helper verbs: the helper binary (OwnBinary) run as the launcher or
// as the in-sandbox helper.
const (
	verbLaunch = "__sandbox-launch"
	verbExec   = "__sandbox-exec"
)

// hooked says Helper ran in this process: Local re-executes this binary
// (or the logist-sandbox beside it) only then (a binary without the hook,
// such as a test binary, would not run the helper but itself, all over
// again).
var hooked atomic.Bool

// Helper runs this process as a sandbox helper, and exits, when it was
// started as one; otherwise it returns at once. Every binary that starts
// sandboxed calls (logistd; a test binary, from TestMain) calls it first
// thing in main, before anything else runs or reads the environment.
func Helper() {
	hooked.Store(true)
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case verbLaunch:
		os.Exit(launchMain(os.Args[2:]))
	case verbExec:
		os.Exit(execMain(os.Args[2:]))
	}
}

// HideProcess makes this process non-dumpable: its /proc/PID/environ,
// memory and file descriptors are then readable by no other process of
// the same user that lacks CAP_SYS_PTRACE, so a program that escaped its
// sandbox, or one run with layer none, still cannot read the daemon's
// secrets. The daemon calls it at start; the launcher calls it too.
func HideProcess() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
