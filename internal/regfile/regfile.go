// Package regfile opens and reads regular files without the runtime's
// network poller. os.OpenFile tries to register every file it opens with
// epoll, which regular files refuse: four fcntl calls and a failed
// epoll_ctl per open. On the virtual machines logistd often runs on, each
// system call is expensive, and a job's transactions open files dozens of
// times; files opened here cost one openat and one fcntl.
//
// It is also the one place Logist opens, for reading, a path it does not own
// (a manifest, a prompt, a workspace file, a history someone may have
// replaced): OpenRegular and ReadFile open with O_NONBLOCK and refuse
// anything fstat does not call a regular file, so a FIFO or a device named
// job.json can never block the daemon in open() or read().
package regfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNotRegular is the error (inside an *os.PathError) for a path that is
// not a regular file: a FIFO, a socket, a device, a folder.
var ErrNotRegular = errors.New("not a regular file")

// notRegular names what the file is, for the error.
func notRegular(name string, mode uint32) error {
	kind := map[uint32]string{
		syscall.S_IFIFO:  "a named pipe (FIFO)",
		syscall.S_IFSOCK: "a socket",
		syscall.S_IFCHR:  "a character device",
		syscall.S_IFBLK:  "a block device",
		syscall.S_IFDIR:  "a folder",
		syscall.S_IFLNK:  "a symlink",
	}[mode&syscall.S_IFMT]
	if kind == "" {
		kind = "of an unknown kind"
	}
	return &os.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: it is %s", ErrNotRegular, kind)}
}

// clearNonblock makes a descriptor blocking again (two fcntl calls); tests
// count its calls.
var clearNonblock = func(fd int) error { return syscall.SetNonblock(fd, false) }

// openRegular opens name read-only without blocking (O_NONBLOCK: a FIFO
// with no writer would block open() for ever) and refuses it unless it is
// a regular file. With handOut, the descriptor is made blocking again, as
// os.NewFile expects of a file it is given; a descriptor read here and
// closed is left as it is, since O_NONBLOCK does nothing to reads of a
// regular file (open(2): "no effect for regular files").
func openRegular(name string, st *syscall.Stat_t, handOut bool) (int, error) {
	fd, err := open(name, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY)
	if err != nil {
		return -1, err
	}
	if err := syscall.Fstat(fd, st); err != nil {
		_ = syscall.Close(fd)
		return -1, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		_ = syscall.Close(fd)
		if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			return -1, &os.PathError{Op: "read", Path: name, Err: syscall.EISDIR}
		}
		return -1, notRegular(name, st.Mode)
	}
	if !handOut {
		return fd, nil
	}
	if err := clearNonblock(fd); err != nil {
		_ = syscall.Close(fd)
		return -1, &os.PathError{Op: "fcntl", Path: name, Err: err}
	}
	return fd, nil
}

// OpenRegular opens name for reading if it is a regular file, and never
// blocks on one that is not (see ErrNotRegular).
func OpenRegular(name string) (*os.File, error) {
	var st syscall.Stat_t
	fd, err := openRegular(name, &st, true)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// ReadLimited reads at most limit+1 bytes of the regular file name, so
// a caller sees a file larger than its limit without reading all of it.
// Like ReadFile, it sizes its buffer from the open's fstat: one read for a
// file of up to limit bytes, and one to see its end.
func ReadLimited(name string, limit int64) ([]byte, error) {
	var st syscall.Stat_t
	return read(name, limit+1, &st)
}

// ReadLimitedStat is ReadLimited that also returns the file's fstat as
// taken after the open and before the read: a caller that keeps the
// bytes can later tell, by a stat of the path, whether the file may have
// changed since (a write after this fstat changes its times or size).
func ReadLimitedStat(name string, limit int64) ([]byte, syscall.Stat_t, error) {
	var st syscall.Stat_t
	b, err := read(name, limit+1, &st)
	return b, st, err
}

// OpenFile is os.OpenFile for regular files (and folders, for fsync): the
// returned file does blocking reads and writes, which is what regular files
// do anyway. Errors are *os.PathError, as os.OpenFile's.
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	for {
		fd, err := syscall.Open(name, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == nil {
			return os.NewFile(uintptr(fd), name), nil
		}
		if err != syscall.EINTR {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
	}
}

// OpenFileHere is OpenFile for a file Logist keeps in a folder of its own
// (a job's history, its head, its index), which someone may have replaced:
// it never follows a symlink at name (a dangling one is not created
// through, a write never lands in the file it names), never blocks on a
// FIFO there, and refuses anything fstat does not call a regular file, a
// folder included, as ErrNotRegular ("it is a symlink"). The file it
// returns does blocking reads and writes.
func OpenFileHere(name string, flag int, perm os.FileMode) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(name, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err != syscall.EINTR {
			break
		}
	}
	var st syscall.Stat_t
	if err != nil {
		// ELOOP for a symlink, EISDIR for a folder opened to write, ENXIO
		// for a socket: told as what the path is.
		if lerr := syscall.Lstat(name, &st); lerr == nil && st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			return nil, notRegular(name, st.Mode)
		}
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	if err := syscall.Fstat(fd, &st); err != nil {
		_ = syscall.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		_ = syscall.Close(fd)
		return nil, notRegular(name, st.Mode)
	}
	if err := clearNonblock(fd); err != nil {
		_ = syscall.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// ReadFile is os.ReadFile without an *os.File: open, fstat for the size,
// read, close. Only regular files are read (see OpenRegular).
func ReadFile(name string) ([]byte, error) {
	var st syscall.Stat_t
	return read(name, -1, &st)
}

// read reads the regular file name, at most lim bytes if lim >= 0; st
// gets its fstat from before the read.
func read(name string, lim int64, st *syscall.Stat_t) ([]byte, error) {
	fd, err := openRegular(name, st, false)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd) //nolint:errcheck // read-only
	size := st.Size + 1     // one more, to see the end in one read
	if lim >= 0 && size > lim {
		size = lim
	}
	buf := make([]byte, 0, max(size, 512))
	for lim < 0 || int64(len(buf)) < lim {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := buf[len(buf):cap(buf)]
		if lim >= 0 && int64(len(room)) > lim-int64(len(buf)) {
			room = room[:lim-int64(len(buf))]
		}
		n, err := syscall.Read(fd, room)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: name, Err: err}
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	return buf, nil
}

func open(name string, flag int) (int, error) {
	for {
		fd, err := syscall.Open(name, flag|syscall.O_CLOEXEC, 0)
		if err == nil {
			return fd, nil
		}
		if err != syscall.EINTR {
			return -1, &os.PathError{Op: "open", Path: name, Err: err}
		}
	}
}

// WriteFile is os.WriteFile through OpenFile.
func WriteFile(name string, data []byte, perm os.FileMode) error {
	f, err := OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// RenameNoReplace renames oldpath to newpath unless newpath exists
// (renameat2's RENAME_NOREPLACE; on a file system without it, an error).
func RenameNoReplace(oldpath, newpath string) error {
	for {
		err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
		if err == nil {
			return nil
		}
		if err != syscall.EINTR {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
		}
	}
}

// Rename is os.Rename without its check that newpath is not a folder (an
// lstat): callers rename files over files.
func Rename(oldpath, newpath string) error {
	for {
		err := syscall.Rename(oldpath, newpath)
		if err == nil {
			return nil
		}
		if err != syscall.EINTR {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
		}
	}
}

// CopyNew copies the regular file src (opened as OpenRegular opens it) into
// dst, a file made anew with perm: O_EXCL, so never one already there nor
// one a link names. The copy is streamed, whatever src's size; nothing is
// fsync'd. On an error a dst made is left for the caller to remove.
func CopyNew(src, dst string, perm os.FileMode) error {
	in, err := OpenRegular(src)
	if err != nil {
		return err
	}
	defer in.Close() //nolint:errcheck // read-only
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close() // the copy has failed already
		return err
	}
	return out.Close()
}
