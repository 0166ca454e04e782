package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/logist/logist/internal/regfile"
)

// Extracted is what Extract did with each path it was asked for.
type Extracted struct {
	// Written are the files and symlinks written, slash-separated.
	Written []string
	// Absent are the paths the snapshot does not hold: a file that was
	// deleted before the snapshot was taken (a rollback's discarded
	// deletion), so there is nothing to write.
	Absent []string
}

// ErrNotEmpty is an Extract into a folder that already holds something:
// it never overwrites.
var ErrNotEmpty = errors.New("folder is not empty")

// Extract writes the files and symlinks of snapshot name (a checkpoint's,
// or a rollback's keep of what it discarded) whose workspace paths are in
// paths (nil: all of them) into dir, outside the job: it is made if
// missing and must otherwise be an empty folder, so nothing is ever
// overwritten. It is how a steward gets back work that a rollback took
// out of the workspace, without touching the job. Every object is checked
// against its hash before anything is written, so a damaged snapshot
// writes nothing; every write goes through an os.Root on dir, so no path
// or link in the listing (read back as untrusted) reaches outside it.
// Files are fsync'd, and the folders made, once all is written.
func Extract(jobDir, name string, paths []string, dir string) (*Extracted, error) {
	l, err := Load(jobDir, name)
	if err != nil {
		return nil, err
	}
	objDir := ObjectDir(jobDir)
	byPath := map[string]Entry{}
	for _, e := range l.Entries {
		clean, err := entryPath(name, e.Path)
		if err != nil {
			return nil, err
		}
		byPath[filepath.ToSlash(clean)] = e
	}
	if paths == nil {
		for p, e := range byPath {
			if !e.Mode.IsDir() {
				paths = append(paths, p)
			}
		}
	}
	paths = slices.Clone(paths)
	slices.Sort(paths)
	paths = slices.Compact(paths)
	out := &Extracted{Written: []string{}, Absent: []string{}}
	var todo []Entry
	for _, p := range paths {
		clean, err := entryPath(name, p)
		if err != nil {
			return nil, err
		}
		e, ok := byPath[filepath.ToSlash(clean)]
		if !ok || e.Mode.IsDir() {
			out.Absent = append(out.Absent, p)
			continue
		}
		if e.Link == "" {
			if err := checkObject(filepath.Join(objDir, e.SHA256), e.SHA256); err != nil {
				return nil, objectError(name, e, err)
			}
		}
		e.Path = filepath.ToSlash(clean)
		todo = append(todo, e)
	}
	root, err := emptyRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close() //nolint:errcheck // its files are closed and synced one by one
	made := map[string]bool{".": true}
	for _, e := range todo {
		rel := filepath.FromSlash(e.Path)
		parent := filepath.Dir(rel)
		if err := root.MkdirAll(parent, 0o777); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, parent), err)
		}
		for d := parent; !made[d]; d = filepath.Dir(d) {
			made[d] = true
		}
		if e.Link != "" {
			if err := root.Symlink(e.Link, rel); err != nil {
				return nil, fmt.Errorf("%s: %w", filepath.Join(dir, rel), err)
			}
		} else if err := extractFile(root, filepath.Join(objDir, e.SHA256), rel, e); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, rel), err)
		}
		out.Written = append(out.Written, e.Path)
	}
	folders := make([]string, 0, len(made))
	for d := range made {
		folders = append(folders, d)
	}
	slices.Sort(folders)
	for _, d := range slices.Backward(folders) { // children before parents
		if err := syncIn(root, d); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, d), err)
		}
	}
	return out, nil
}

// emptyRoot opens dir, made if missing, refusing one that holds anything.
func emptyRoot(dir string) (*os.Root, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	f, err := root.Open(".")
	if err == nil {
		_, err = f.ReadDir(1)
		_ = f.Close()
		if err == nil {
			err = fmt.Errorf("%s: %w: files are written only into a new or empty folder", dir, ErrNotEmpty)
		} else if errors.Is(err, io.EOF) {
			return root, nil
		}
	}
	_ = root.Close()
	return nil, err
}

// extractFile writes object obj as the new file rel of root with e's
// permissions, checking its hash again as it goes (the object may have
// changed since it was checked) and fsyncing it.
func extractFile(root *os.Root, obj, rel string, e Entry) error {
	in, err := regfile.OpenRegular(obj)
	if err != nil {
		return err
	}
	defer in.Close() //nolint:errcheck // read-only
	out, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, e.Mode.Perm()&0o777|0o200)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = copySparse(out, in, h)
	if err == nil && hex.EncodeToString(h.Sum(nil)) != e.SHA256 {
		err = errors.New("stored content does not match its hash")
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && e.Mode.Perm()&0o200 == 0 {
		err = root.Chmod(rel, e.Mode.Perm())
	}
	return err
}

// syncIn fsyncs folder d of root.
func syncIn(root *os.Root, d string) error {
	f, err := root.Open(d)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
