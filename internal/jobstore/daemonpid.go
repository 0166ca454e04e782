package jobstore

import (
	"bufio"
	"fmt"
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
// yet, and /proc does not show it: another pid namespace). It
// never takes the daemon lock, not even for a moment: a reader holding it
// when a daemon starts would make that daemon refuse to run. It asks the
// kernel who holds it instead (/proc/locks); where that cannot be read, it
// trusts the pid the last daemon wrote if that process is alive.
func (s *Store) DaemonPID() int {
	p := filepath.Join(s.Dir, daemonLock)
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
