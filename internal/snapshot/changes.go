package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Changes are the workspace files that differ between two moments, by
// path (slash-separated, relative to the workspace): regular files and
// symlinks; folders are not listed (a file in a new folder is). Each list
// is sorted.
type Changes struct {
	Added    []string
	Modified []string
	Deleted  []string
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool { return len(c.Added)+len(c.Modified)+len(c.Deleted) == 0 }

// Paths are every changed path, sorted: what restoring the earlier moment
// would undo (write back, or remove).
func (c Changes) Paths() []string {
	out := make([]string, 0, len(c.Added)+len(c.Modified)+len(c.Deleted))
	out = append(append(append(out, c.Added...), c.Modified...), c.Deleted...)
	slices.Sort(out)
	return out
}

// NotUnder is c without the paths that paths cover: a path covers itself
// and, as a folder, everything below it ("." covers the workspace). Paths
// are cleaned first ("./a", "dir/" name a and dir).
func (c Changes) NotUnder(paths []string) Changes {
	var cover []string
	for _, p := range paths {
		if p != "" { // names nothing (path.Clean would make it ".")
			cover = append(cover, path.Clean(filepath.ToSlash(p)))
		}
	}
	covered := func(p string) bool {
		for _, c := range cover {
			if c == "." || p == c || strings.HasPrefix(p, c+"/") {
				return true
			}
		}
		return false
	}
	keep := func(ps []string) []string {
		out := []string{}
		for _, p := range ps {
			if !covered(p) {
				out = append(out, p)
			}
		}
		return out
	}
	return Changes{Added: keep(c.Added), Modified: keep(c.Modified), Deleted: keep(c.Deleted)}
}

// diff compares two states of the workspace keyed by path, where same
// tells whether a path present in both is unchanged. Folders (isDir) are
// skipped; a path that turned from folder to file counts as added, from
// file to folder as deleted.
func diff[T any](before, after map[string]T, isDir func(T) bool, same func(a, b T) bool) Changes {
	c := Changes{Added: []string{}, Modified: []string{}, Deleted: []string{}}
	for p, a := range after {
		if isDir(a) {
			continue
		}
		b, ok := before[p]
		switch {
		case !ok || isDir(b):
			c.Added = append(c.Added, p)
		case !same(b, a):
			c.Modified = append(c.Modified, p)
		}
	}
	for p, b := range before {
		if isDir(b) {
			continue
		}
		if a, ok := after[p]; !ok || isDir(a) {
			c.Deleted = append(c.Deleted, p)
		}
	}
	slices.Sort(c.Added)
	slices.Sort(c.Modified)
	slices.Sort(c.Deleted)
	return c
}

// Diff lists what changed from snapshot entries base to entries cur (two
// checkpoints' listings): by content hash, symlink target and mode.
func Diff(base, cur []Entry) Changes {
	index := func(es []Entry) map[string]Entry {
		m := make(map[string]Entry, len(es))
		for _, e := range es {
			m[e.Path] = e
		}
		return m
	}
	return diff(index(base), index(cur), func(e Entry) bool { return e.Mode.IsDir() },
		func(a, b Entry) bool { return a.SHA256 == b.SHA256 && a.Link == b.Link && a.Mode == b.Mode })
}

// Entries reads the entries of checkpoint cp's snapshot, whose recovery
// point names listing (history.SnapshotRef.Listing): "" is Take's empty
// workspace.
func Entries(jobDir, cp, listing string) ([]Entry, error) {
	if listing == "" {
		return nil, nil
	}
	l, err := Load(jobDir, cp)
	if err != nil {
		return nil, err
	}
	return l.Entries, nil
}

// MaxScanEntries bounds a Scan: a workspace with more paths is not
// compared call by call (its recovery points still list their changes).
const MaxScanEntries = 100_000

// ErrTooManyEntries is a workspace past MaxScanEntries.
var ErrTooManyEntries = fmt.Errorf("workspace has more than %d paths", MaxScanEntries)

// Stats are a workspace's paths and what lstat says of them: enough to
// tell that a file changed without reading it (Scan).
type Stats map[string]stat

type stat struct {
	mode         fs.FileMode
	size         int64
	mtime, ctime int64
	ino          uint64
}

// Scan lstats every path of workspace (.git excepted, as in snapshots):
// no file is read or written, so it is cheap enough to run around every
// agent call. A missing workspace has no paths. A change that keeps a
// file's size, inode and both timestamps (a rewrite within the file
// system's timestamp granularity of the scan) is not seen; the recovery
// point's snapshot, which compares content, is.
func Scan(workspace string) (Stats, error) {
	s := Stats{}
	err := walk(workspace, func(_, rel string, d fs.DirEntry) error {
		if len(s) >= MaxScanEntries {
			return ErrTooManyEntries
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we looked
			}
			return err
		}
		s[filepath.ToSlash(rel)] = statOf(fi)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) && len(s) == 0 {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// statOf is what Stats keep of a path's lstat.
func statOf(fi fs.FileInfo) stat {
	st := stat{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ctime, st.ino = sys.Ctim.Nano(), sys.Ino
	}
	return st
}

// Changed lists what changed from scan before to scan after.
func Changed(before, after Stats) Changes {
	return diff(before, after, func(s stat) bool { return s.mode.IsDir() }, func(a, b stat) bool { return a == b })
}
