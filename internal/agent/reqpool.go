package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/logist/logist/internal/regfile"

	"golang.org/x/sys/unix"
)

// Request files are recycled, not made anew. Every command agent's call
// gets a request file of its own (requests/NNNNNN.json, the protocol's
// name), and the pruning drops those of calls older than the newest
// KeepRequests. On ext4 a new inode is dear where inodes were freed in
// the last minutes (the allocator reads past each recently deleted one):
// on this project's machines creating the file cost 0.27-0.40 ms of CPU,
// against about 0.03 ms for a rename and 0.04 ms for an open that
// truncates, and deleting them is what makes the next creations dear.
// So the pruning empties a dropped request file and keeps it in
// requests/.free/ (slot n mod KeepRequests), and the request file of
// call n takes slot n's file by a rename where it does not exist yet.
// The pool holds at most KeepRequests empty files; what the pruning
// cannot pool (a slot taken, a file with another link, which emptying
// would change under its other name) it removes, as before.

// FreeDir is the requests/ folder's pool of emptied request files.
const FreeDir = ".free"

func freeSlot(jobDir string, n int) string {
	return filepath.Join(jobDir, "requests", FreeDir, strconv.Itoa(n%KeepRequests))
}

// takeFree gives call n's request file path, where it does not exist,
// the pooled file of n's slot, and says whether it did. Never over an
// existing file: a predicted call's file is already bound by its spare
// sandbox.
func takeFree(jobDir string, n int, path string) bool {
	return regfile.RenameNoReplace(freeSlot(jobDir, n), path) == nil // none pooled: the file is created
}

// poolRequest empties call n's request file name (in requests/, which
// the pruning drops) and moves it to n's slot of the pool, or removes it
// where it cannot.
func poolRequest(jobDir, name string, n int) error {
	if pooled(jobDir, name, n) {
		return nil
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func pooled(jobDir, name string, n int) bool {
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd) //nolint:errcheck // nothing written
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 {
		return false
	}
	if unix.Ftruncate(fd, 0) != nil {
		return false
	}
	slot := freeSlot(jobDir, n)
	err = regfile.RenameNoReplace(name, slot)
	if errors.Is(err, fs.ErrNotExist) { // the pool's first file
		if merr := os.Mkdir(filepath.Dir(slot), 0o700); merr == nil || errors.Is(merr, fs.ErrExist) {
			err = regfile.RenameNoReplace(name, slot)
		}
	}
	return err == nil
}
