package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/logist/logist/internal/regfile"
)

// CreateExclusive creates path holding data, with mode perm, unless it
// exists (then an error wrapping fs.ErrExist): open(O_CREAT|O_EXCL), but so
// that the file appears whole or not at all. It is for files that are made
// once and never replaced, such as keys. data is written and fsync'd under
// a temporary name in the same folder (".<name>.tmp-<n>"), then put in
// place by a hard link, or where the file system has none by a rename that
// refuses to replace; both fail if another process got there first. The
// folder is fsync'd before CreateExclusive returns, also when it reports
// fs.ErrExist: the winner's file is then durable before the loser uses it.
//
// What a crash can leave, and the rule for it:
//
//   - A temporary file: never read or linked again (it was never the
//     file); the next creator makes its own and ignores it.
//   - An empty file at path: a creation cut short. Versions before this
//     function created some key files in place (create, write, fsync), and
//     the last-resort path below still does on a file system with neither
//     hard links nor rename-noreplace; a crash before the write leaves the
//     file empty. Nothing can have used an empty file, so it counts as
//     absent: it is removed and created anew, under an exclusive lock of
//     the folder (flock) that makes the removal and the check that the file
//     is still empty one step, so racers replace it once.
//   - A non-empty file that its reader cannot parse is not this function's
//     to judge: it may be a real file damaged later, and replacing it
//     would orphan what depends on it. Callers refuse it and say so.
func CreateExclusive(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
		if err := removeEmpty(path); err != nil {
			return err
		}
	}
	f, tmp, err := createTemp(dir, "."+filepath.Base(path)+".tmp-", perm)
	if err != nil {
		return fmt.Errorf("create temp for %s: %w", path, err)
	}
	defer os.Remove(tmp) //nolint:errcheck // on failure; after a link it is the name only
	werr := fixMode(f, perm)
	if werr == nil {
		_, werr = f.Write(data)
	}
	if werr == nil {
		if werr = f.Sync(); werr == nil {
			FileSyncs.Add(1)
		}
	}
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	err = publish(tmp, path, data, perm)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", path, err)
	}
	// Before the folder's fsync, which then covers it too. A failure
	// leaves a second name of the file (as private as the first) that the
	// deferred remove tries again: not the caller's error.
	_ = os.Remove(tmp)
	if serr := SyncDir(dir); serr != nil {
		return serr
	}
	return err
}

// ReadOrCreate returns path's content, first creating it from newData()
// with CreateExclusive if there is none (or it is empty: see there);
// created says this call made it. Processes and goroutines racing to
// create it all return the same content, the winner's: a loser reads what
// the winner linked in place.
func ReadOrCreate(path string, perm os.FileMode, newData func() ([]byte, error)) (data []byte, created bool, err error) {
	for try := 0; ; try++ {
		b, err := regfile.ReadFile(path)
		if err == nil && len(b) > 0 {
			return b, false, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, false, err
		}
		if try == 3 {
			// Created and gone again, three times over: someone is
			// removing it as fast as it is made.
			return nil, false, fmt.Errorf("%s keeps disappearing after it is created", path)
		}
		data, err := newData()
		if err != nil {
			return nil, false, err
		}
		switch err := CreateExclusive(path, data, perm); {
		case err == nil:
			return data, true, nil
		case !errors.Is(err, fs.ErrExist):
			return nil, false, err
		}
	}
}

// Test hooks: the two ways publish puts a file in place without
// replacing one, so tests can take each away as a file system may.
var (
	linkHook            = os.Link
	renameNoreplaceHook = func(from, to string) error {
		if err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE); err != nil {
			return &os.LinkError{Op: "renameat2", Old: from, New: to, Err: err}
		}
		return nil
	}
)

// publish puts the whole file tmp in place at path unless path exists
// (fs.ErrExist): by a hard link; else, on a file system without hard
// links, by a rename that refuses to replace; else, as a last resort,
// by creating path in place from data (O_EXCL, written, fsync'd) under the
// folder's lock, where a crash may leave it empty (see CreateExclusive).
func publish(tmp, path string, data []byte, perm os.FileMode) error {
	err := linkHook(tmp, path)
	if err == nil || errors.Is(err, fs.ErrExist) || !unsupported(err) {
		return err
	}
	err = renameNoreplaceHook(tmp, path)
	if err == nil || errors.Is(err, fs.ErrExist) || !unsupported(err) {
		return err
	}
	unlock, err := lockDir(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer unlock()
	g, err := regfile.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	werr := fixMode(g, perm)
	if werr == nil {
		_, werr = g.Write(data)
	}
	if werr == nil {
		if werr = g.Sync(); werr == nil {
			FileSyncs.Add(1)
		}
	}
	if err := errors.Join(werr, g.Close()); err != nil {
		// A cut file left in place would be read as the content.
		return errors.Join(err, os.Remove(path))
	}
	return nil
}

// unsupported reports an error that says the file system cannot do the
// operation at all (as opposed to: not here, not now).
func unsupported(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) ||
		errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EINVAL)
}

// fixMode sets f's mode to perm where the umask reduced it.
func fixMode(f *os.File, perm os.FileMode) error {
	if perm&^umask == perm {
		return nil
	}
	return f.Chmod(perm)
}

// removeEmpty removes path if it is (still) an empty regular file, under
// the folder's lock: see CreateExclusive.
func removeEmpty(path string) error {
	unlock, err := lockDir(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("%s is empty (a creation cut short) and cannot be replaced: %w", path, err)
	}
	defer unlock()
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
		return nil // replaced meanwhile: nothing to do
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove empty %s: %w", path, err)
	}
	return nil
}

// lockDir takes an exclusive flock on the folder dir, for the two steps
// of CreateExclusive that must not interleave with each other across
// processes: replacing an empty file, and creating one in place.
func lockDir(dir string) (unlock func(), err error) {
	d, err := regfile.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	for {
		err = syscall.Flock(int(d.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		_ = d.Close() // read-only
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { _ = d.Close() }, nil // closing the last descriptor releases the lock
}
