package agent

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/logist/logist/internal/pathguard"
	"github.com/logist/logist/internal/regfile"
)

// A CLI preset's private home (Invocation.Home) is its agent's: the agent
// writes there from inside its sandbox, and logistd, outside it, reads some
// of it back (a session's record, to resume it; the CLI's log, to classify
// an error). The agent may have made any such file a named pipe (an open()
// that never returns), a symlink out of the home (to /dev/zero, to another
// job's files) or a file of any size. These read only a regular file that
// resolves inside the home, never block on opening it, and hold no more of
// it than they need.

// Bounds on what is read of a file in a home.
const (
	// maxHomeRecord is the most read of a small record (a session's
	// metadata): a larger one is not taken for one.
	maxHomeRecord = 4 << 20
	// maxHomeLine is the longest line of a log or transcript looked at: a
	// longer one is skipped, without being held.
	maxHomeLine = 1 << 20
)

// openInHome opens path, a file under home, for reading: refused unless it
// resolves inside home (pathguard) and is a regular file (regfile: no
// blocking on a named pipe or a device).
func openInHome(home, path string) (*os.File, error) {
	rel, err := filepath.Rel(home, path)
	if err != nil {
		return nil, err
	}
	abs, _, err := pathguard.Resolve(home, rel)
	if err != nil {
		return nil, err
	}
	return regfile.OpenRegular(abs)
}

// readInHome reads a file under home whole, refused past limit bytes.
func readInHome(home, path string, limit int64) ([]byte, error) {
	f, err := openInHome(home, path)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%s: more than %d bytes", path, limit)
	}
	return b, err
}

// eachLine calls f with each line of r (its newline cut) of at most max
// bytes; a longer line is skipped, read through without being held.
func eachLine(r io.Reader, max int, f func(line []byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	over := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !over {
			if len(line)+len(chunk) > max+1 {
				over, line = true, line[:0]
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !over && (len(line) > 0 || err == nil) {
			f(bytes.TrimSuffix(line, []byte("\n")))
		}
		line, over = line[:0], false
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// holds says whether r holds needle, read in chunks of a megabyte (the
// needle may cross two).
func holds(r io.Reader, needle []byte) (bool, error) {
	if len(needle) == 0 {
		return true, nil
	}
	chunk := make([]byte, 1<<20)
	var window []byte
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			window = append(window, chunk[:n]...)
			if bytes.Contains(window, needle) {
				return true, nil
			}
			keep := min(len(needle)-1, len(window))
			window = append(window[:0], window[len(window)-keep:]...)
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}
