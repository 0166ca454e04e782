// Package regfile opens and reads regular files without the runtime's
// network poller. os.OpenFile tries to register every file it opens with
// epoll, which regular files refuse: four fcntl calls and a failed
// epoll_ctl per open. On the virtual machines logistd often runs on, each
// system call is expensive, and a job's transactions open files dozens of
// times; files opened here cost one openat and one fcntl.
package regfile

import (
	"os"
	"syscall"
)

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

// ReadFile is os.ReadFile without an *os.File: open, fstat for the size,
// read, close.
func ReadFile(name string) ([]byte, error) {
	fd, err := open(name, syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd) //nolint:errcheck // read-only
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return nil, &os.PathError{Op: "read", Path: name, Err: syscall.EISDIR}
	}
	size := int(st.Size) + 1 // one more, to see the end in one read
	if size < 512 {
		size = 512
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: name, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
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
