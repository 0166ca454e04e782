package sandbox

import (
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Pids are reused, and fast on a busy host (pid_max is 32768 on many):
// a kill by pid or process group id after the process is gone may reach
// whatever process has the number since — another agent's sandbox, as a
// CI run once showed (an agent killed with status 137 at its start, its
// stderr empty). So a call's processes are killed only through a handle
// that names that very process, or while the number cannot be reused:
// a child's pid and group id stay reserved while it is an unreaped
// zombie (WaitExited, then kill, then reap), and bwrap's init, which is
// not our child, is killed through a pidfd opened while it ran.

// WaitExited blocks until child pid has exited, without reaping it: the
// zombie keeps its pid and its process group id, so that a kill of the
// group then cannot reach a process that took the number. The caller
// reaps it after (exec.Cmd.Wait).
func WaitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// openChild opens a pidfd for pid if it is still a child of parent (the
// pidfd then names that process for as long as it is held, whatever
// later takes its number); -1 when it is gone.
func openChild(pid, parent int) int {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1
	}
	// Checked after the open: the pidfd names the process that had the
	// pid when it was opened, which is the one read here unless it has
	// exited since (then nothing is left to kill anyway).
	if ppid(pid) != parent {
		_ = unix.Close(fd) // a pidfd: nothing to lose
		return -1
	}
	return fd
}

// ppid is the parent pid of a running process (0 when unknown).
func ppid(pid int) int {
	f := statFields(pid)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// awaitExit waits until the process of pidfd fd has exited (a zombie
// counts), at most limit: a pidfd turns readable then. It reaps nothing.
func awaitExit(fd int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left/time.Millisecond)+1)
		if err != unix.EINTR || n > 0 {
			return
		}
	}
}
