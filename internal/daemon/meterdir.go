package daemon

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// meterDirPrefix names the metering proxy's runtime folders in the
// temporary folder (os.TempDir): short paths, as a unix socket's must be.
const meterDirPrefix = "logistd-meter-"

// meterDirGrace is how old a runtime folder must be before another daemon
// may judge it stale: a daemon starting makes the folder, then binds the
// socket in it, and a sweep must not fall between the two.
const meterDirGrace = time.Minute

// sweepMeterDirs removes the runtime folders of metering proxies that no
// longer run. A daemon removes its own folder when it stops; one killed
// (SIGKILL, the OOM killer, a machine's crash test) cannot, and each such
// death left a folder in the temporary folder for good. A folder is stale
// when it is this user's, older than meterDirGrace, and its socket is gone
// or refuses a connection: nothing listens there. A live proxy accepts,
// whatever its process's PID namespace, so a daemon never removes
// another's. It returns how many folders it removed.
func sweepMeterDirs(log *slog.Logger, now time.Time) int {
	matches, err := filepath.Glob(filepath.Join(os.TempDir(), meterDirPrefix+"*"))
	if err != nil {
		return 0
	}
	uid := os.Getuid()
	removed := 0
	for _, dir := range matches {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || now.Sub(fi.ModTime()) < meterDirGrace {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
			continue
		}
		if !meterSocketDead(filepath.Join(dir, "meter.sock")) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("cannot remove a stopped metering proxy's folder", "path", dir, "err", err.Error())
			continue
		}
		removed++
	}
	if removed > 0 {
		log.Info("removed stopped metering proxies' folders", "count", removed)
	}
	return removed
}

// meterSocketDead says whether nothing listens on the socket: it is gone,
// or a connection is refused. Any other answer (accepted, a full backlog,
// a permission error) counts as alive.
func meterSocketDead(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		_ = c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}
