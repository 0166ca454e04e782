package agent

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/logist/logist/internal/atomicfile"
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

// What logistd writes there (a preset's config, the role's system prompt,
// a long prompt, the answer's schema) is written the same way: without
// following a link the agent left. An os.WriteFile of home/.gemini/GEMINI.md
// where the last call's agent had made .gemini, or GEMINI.md, a symlink
// wrote the role's prompt over whatever file of the host's it named.

// realDirs makes every folder from root down to dir (a folder under root)
// a real folder: one that is missing is made, and a link, a file or a pipe
// in a folder's place (the agent's, never Logist's) is removed first. It
// returns dir.
func realDirs(root, dir string) (string, error) {
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return "", err
	}
	if err := pathguard.Lexical(rel); err != nil {
		return "", fmt.Errorf("%s: not under %s", dir, root)
	}
	// The root is Logist's (made with the call; the agent cannot replace
	// it: it is the sandbox's mount point, or below a folder Landlock
	// gives no right on).
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	cur := root
	if rel == "." {
		return cur, nil
	}
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil:
			if err := os.Remove(cur); err != nil {
				return "", err
			}
		case !errors.Is(err, fs.ErrNotExist):
			return "", err
		}
		if err := os.Mkdir(cur, 0o700); err != nil {
			return "", err
		}
	}
	return cur, nil
}

// writeInHome writes data to path, a file under root, as a new file (mode
// 0600) renamed over whatever was at path (atomicfile.WriteCopy): a link
// there is replaced, its target untouched, and the folders on the way are
// real ones (realDirs). Nothing is fsync'd: these files are made again
// for every call.
func writeInHome(root, path string, data []byte) error {
	if _, err := realDirs(root, filepath.Dir(path)); err != nil {
		return err
	}
	return atomicfile.WriteCopy(path, data, 0o600, nil)
}

// removeInHome removes the file path under root, if its folders are real
// ones (a link among them leads elsewhere: then there is nothing of
// Logist's to remove).
func removeInHome(root, path string) error {
	rel, err := filepath.Rel(root, filepath.Dir(path))
	if err != nil {
		return err
	}
	cur := root
	if rel != "." {
		for _, part := range strings.Split(rel, string(filepath.Separator)) {
			cur = filepath.Join(cur, part)
			if fi, err := os.Lstat(cur); err != nil || !fi.IsDir() {
				return nil
			}
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// root is the folder of the agent's that path is under: the home or the
// call's scratch folder.
func (inv *Invocation) root(path string) (string, error) {
	for _, r := range []string{inv.Home, inv.CallDir} {
		if r != "" && pathguard.Within(r, path) {
			return r, nil
		}
	}
	return "", fmt.Errorf("%s is neither in the agent's home nor in its call's folder", path)
}

// writeFile writes a file of the call into the agent's home or scratch
// folder (writeInHome).
func (inv *Invocation) writeFile(path string, data []byte) error {
	r, err := inv.root(path)
	if err != nil {
		return err
	}
	return writeInHome(r, path, data)
}

// mkdir makes dir, a folder of the agent's home or scratch folder, a real
// one (realDirs).
func (inv *Invocation) mkdir(dir string) error {
	r, err := inv.root(dir)
	if err != nil {
		return err
	}
	_, err = realDirs(r, dir)
	return err
}

// remove removes a file of the call from the agent's home or scratch
// folder (removeInHome).
func (inv *Invocation) remove(path string) error {
	r, err := inv.root(path)
	if err != nil {
		return err
	}
	return removeInHome(r, path)
}
