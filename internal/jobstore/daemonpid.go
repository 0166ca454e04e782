package jobstore

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// procLocks lists the file locks the kernel holds (Linux).
var procLocks = "/proc/locks"

// DaemonPID returns the pid of the daemon serving the folder, 0 when none
// does, or -1 when one does whose pid is not known (it has not written it
// yet, and /proc does not show it: another pid namespace). It never takes
// the daemon lock, not even for a moment: a reader holding it when a daemon
// starts would make that daemon refuse to run.
//
// It asks the kernel instead. The daemon's lock is an flock, which the
// kernel shows only in /proc/locks; but reading /proc/locks waits for an
// RCU grace period (the kernel takes a per-CPU lock for writing to list the
// locks), 8–20 ms on a virtual machine that was idle, more than the rest of
// a `logist status`. So the daemon also holds an OFD write lock on the same
// file (LockDaemon), which F_OFD_GETLK reports without taking anything, in
// a system call. /proc/locks is read only where that says nothing certain:
// the advertisement is missing but the pid in the file is alive (a logistd
// from before the advertisement, or a pid reused since), the held lock's
// pid is not written yet, or the file cannot be opened or queried; where
// /proc/locks cannot be read either, the pid the last daemon wrote is
// trusted if that process is alive.
func (s *Store) DaemonPID() int {
	p := filepath.Join(s.Dir, daemonLock)
	f, err := os.Open(p)
	if err != nil {
		return daemonPIDFromProc(p)
	}
	defer f.Close() //nolint:errcheck // read-only; no lock of ours is on it
	held, err := advertised(f)
	if err != nil {
		return daemonPIDFromProc(p)
	}
	filePID := readPID(f)
	switch {
	case held && filePID > 0:
		return filePID
	case !held && (filePID <= 0 || syscall.Kill(filePID, 0) == syscall.ESRCH):
		return 0
	}
	return daemonPIDFromProc(p)
}

// advertise takes the OFD write lock DaemonPID looks for, on the daemon's
// lock file f (held under its flock, so never contended). An error leaves
// readers to /proc/locks: slower, as right.
func advertise(f *os.File) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
}

// advertised says whether an OFD lock that conflicts with a write lock is
// held on f, the daemon lock file, by any open file description: a query
// that takes nothing.
func advertised(f *os.File) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false, err
	}
	return lk.Type != unix.F_UNLCK, nil
}

// readPID reads the pid the daemon wrote into its lock file; 0 if none.
func readPID(f *os.File) int {
	var b [32]byte
	n, _ := f.ReadAt(b[:], 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	return pid
}

// daemonPIDFromProc is DaemonPID from /proc/locks (flockHolder).
func daemonPIDFromProc(p string) int {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	filePID := 0
	if b, err := os.ReadFile(p); err == nil {
		filePID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	holder, err := flockHolder(uint64(st.Dev), st.Ino)
	if err != nil {
		if filePID > 0 && syscall.Kill(filePID, 0) != syscall.ESRCH {
			return filePID
		}
		return 0
	}
	if holder == 0 {
		return 0
	}
	if filePID > 0 {
		return filePID
	}
	return holder
}

// flockHolder returns the pid holding an exclusive flock on the file with
// device dev and inode ino, from /proc/locks; 0 when nobody does.
func flockHolder(dev, ino uint64) (int, error) {
	f, err := os.Open(procLocks)
	if err != nil {
		return 0, err
	}
	defer f.Close() //nolint:errcheck // read-only
	// "1: FLOCK  ADVISORY  WRITE 4242 fe:00:9978076 0 EOF"; a waiter's
	// line has "->" after the number.
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 6 || fl[1] != "FLOCK" || fl[3] != "WRITE" || fl[5] != want {
			continue
		}
		pid, err := strconv.Atoi(fl[4])
		if err != nil || pid <= 0 {
			pid = -1 // held; by whom /proc does not say (another pid namespace)
		}
		return pid, nil
	}
	return 0, sc.Err()
}
