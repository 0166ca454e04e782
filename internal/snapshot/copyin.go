package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/regfile"
)

// CopyIn makes workspace a copy of the folder src (a manifest's
// "workspace": {"copy": PATH}): folders, regular files and symlinks as
// they are (a link is copied, never followed), .git and anything else
// (sockets, devices) left out. The copy is made under a temporary name and
// renamed into place, so workspace is absent or complete; a workspace that
// already holds files was made by an earlier start and is kept. Files are
// not fsync'd one by one: the first recovery point's snapshot, taken next,
// is the durable copy.
func CopyIn(src, workspace string) error {
	if ents, err := os.ReadDir(workspace); err == nil && len(ents) > 0 {
		return nil
	}
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("workspace copy: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("workspace copy: %s is not a folder", src)
	}
	tmp := workspace + ".copy"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	err = walk(src, func(p, rel string, d fs.DirEntry) error {
		dst := filepath.Join(tmp, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(dst, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, dst)
		case d.Type().IsRegular():
			// Streamed: a repository's files can be larger than the
			// daemon's memory; one replaced by a named pipe since the
			// folder was read is refused, not waited on.
			return regfile.CopyNew(p, dst, info.Mode().Perm())
		}
		return nil
	})
	if err == nil {
		err = atomicfile.SyncDir(tmp)
	}
	if err == nil {
		if rerr := os.Remove(workspace); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = rerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, workspace)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("workspace copy of %s: %w", src, err)
	}
	return atomicfile.SyncDir(filepath.Dir(workspace))
}
