package history

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/logist/logist/internal/regfile"
)

// A history's own files (the active log, its head, its index) are opened
// here and only here, never through a symlink, never blocking on a FIFO,
// and only if they are regular files (regfile.OpenFileHere). A symlink
// planted at history.jsonl would have the job's records appended to the
// file it names: another job's history (both then corrupt), or, dangling,
// a file created outside the jobs folder; one at history-head.json would
// have the head written over the file it names. A FIFO blocked every
// reader (`logist status`) for ever. Such a history is refused, as a
// corrupt one is (HISTORY_CORRUPT), and left as it is for a person to
// repair.

// NotFileError is one of the history's files that is not a regular file
// of the job folder's own: a symlink, a FIFO, a folder, a device.
type NotFileError struct {
	Path string
	Err  error // regfile.ErrNotRegular inside, naming what it is
}

func (e *NotFileError) Error() string {
	why := e.Err
	var pe *os.PathError
	if errors.As(why, &pe) {
		why = pe.Err // the path is said once
	}
	return fmt.Sprintf("history file %s: %v; not read or written through it: put the job's own file there", e.Path, why)
}

func (e *NotFileError) Unwrap() error { return e.Err }

// openOwn opens the history's file p with flag (created 0600 with
// O_CREATE), refusing anything but a regular file at p (NotFileError).
// Other errors are the open's *os.PathError (fs.ErrNotExist for none).
func openOwn(p string, flag int) (*os.File, error) {
	f, err := regfile.OpenFileHere(p, flag, 0o600)
	if errors.Is(err, regfile.ErrNotRegular) {
		return nil, &NotFileError{Path: p, Err: err}
	}
	return f, err
}

// readOwn reads the history's file p whole (at most limit bytes and one
// more when limit >= 0), as openOwn opens it.
func readOwn(p string, limit int64) ([]byte, error) {
	f, err := openOwn(p, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	// One buffer of the file's size (and a byte more, to see its end in
	// the same read), as regfile.ReadFile made: io.ReadAll's growth from
	// 512 bytes copied a long history many times over.
	want := int64(512)
	if fi, err := f.Stat(); err == nil {
		want = fi.Size() + 1
	}
	if limit >= 0 {
		want = min(want, limit+1)
	}
	buf := make([]byte, 0, want)
	for limit < 0 || int64(len(buf)) <= limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // the file grew since the fstat
		}
		room := buf[len(buf):cap(buf)]
		if limit >= 0 {
			room = room[:min(int64(len(room)), limit+1-int64(len(buf)))]
		}
		n, err := f.Read(room)
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}
