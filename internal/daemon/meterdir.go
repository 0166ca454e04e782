package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
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

// meterSocket is the socket's name in its folder.
const meterSocket = "meter.sock"

// maxSocketPath is the longest path a unix socket can be bound at on
// Linux (sun_path holds 108 bytes with the terminating NUL).
const maxSocketPath = 107

// meterParents are the folders a runtime folder may be made in, in order:
// the temporary folder ($TMPDIR), then /tmp when $TMPDIR is too deep for a
// socket's path (a binding there fails with EINVAL, which used to stop
// logistd with "bind: invalid argument").
func meterParents() []string {
	parents := []string{os.TempDir()}
	if parents[0] != meterFallback {
		parents = append(parents, meterFallback)
	}
	return parents
}

// meterFallback is the short folder tried after $TMPDIR (a variable for
// the tests, which keep to their own folders).
var meterFallback = "/tmp"

// makeMeterDir makes the proxy's private runtime folder (0700) in the
// first of meterParents where its socket's path fits.
func makeMeterDir() (string, error) {
	var tried []string
	for _, parent := range meterParents() {
		// The random part MkdirTemp adds is at most 10 digits.
		if len(filepath.Join(parent, meterDirPrefix+"0123456789", meterSocket)) > maxSocketPath {
			tried = append(tried, parent)
			continue
		}
		return os.MkdirTemp(parent, meterDirPrefix)
	}
	return "", fmt.Errorf("no folder for the metering socket: a socket's path must be at most %d bytes, and in %s it would be longer (set TMPDIR to a shorter path)", maxSocketPath, strings.Join(tried, " and "))
}

// sweepMeterDirs removes the runtime folders of metering proxies that no
// longer run. A daemon removes its own folder when it stops; one killed
// (SIGKILL, the OOM killer, a machine's crash test) cannot, and each such
// death left a folder in the temporary folder for good. A folder is stale
// when it is this user's, older than meterDirGrace, and its socket is gone
// or refuses a connection: nothing listens there. A live proxy accepts,
// whatever its process's PID namespace, so a daemon never removes
// another's. It returns how many folders it removed.
func sweepMeterDirs(log *slog.Logger, now time.Time) int {
	var matches []string
	for _, parent := range meterParents() {
		m, _ := filepath.Glob(filepath.Join(parent, meterDirPrefix+"*"))
		matches = append(matches, m...)
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
		if !meterSocketDead(filepath.Join(dir, meterSocket)) {
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
