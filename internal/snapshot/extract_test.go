package snapshot

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A rollback's keep is written out where the steward says: the files
// asked for, with their modes and links, and a list of those the keep does
// not hold (deleted before it was taken).
func TestExtractWritesTheFilesAskedFor(t *testing.T) {
	t.Parallel()
	job := t.TempDir()
	ws := filepath.Join(job, "workspace")
	write(t, filepath.Join(ws, "a.txt"), "one")
	write(t, filepath.Join(ws, "dir", "deep", "run.sh"), "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(ws, "dir", "deep", "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "ro.txt"), "read only")
	if err := os.Chmod(filepath.Join(ws, "ro.txt"), 0o444); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "untouched.txt"), "not asked for")
	if err := os.Symlink("a.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := Take(ws, job, "rollback-c1"); err != nil {
		t.Fatal(err)
	}
	into := filepath.Join(t.TempDir(), "back", "here")
	got, err := Extract(job, "rollback-c1", []string{"link", "dir/deep/run.sh", "a.txt", "ro.txt", "gone.txt"}, into)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.txt", "dir/deep/run.sh", "link", "ro.txt"}; !slices.Equal(got.Written, want) {
		t.Errorf("written %q, want %q", got.Written, want)
	}
	if !slices.Equal(got.Absent, []string{"gone.txt"}) {
		t.Errorf("absent %q", got.Absent)
	}
	if read(t, filepath.Join(into, "a.txt")) != "one" || read(t, filepath.Join(into, "dir", "deep", "run.sh")) != "#!/bin/sh\n" {
		t.Error("content differs")
	}
	for p, want := range map[string]os.FileMode{"dir/deep/run.sh": 0o755, "ro.txt": 0o444, "a.txt": 0o600} {
		if fi, err := os.Stat(filepath.Join(into, p)); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode().Perm(), err, want)
		}
	}
	if target, err := os.Readlink(filepath.Join(into, "link")); err != nil || target != "a.txt" {
		t.Errorf("link -> %q (%v)", target, err)
	}
	if _, err := os.Lstat(filepath.Join(into, "untouched.txt")); !os.IsNotExist(err) {
		t.Error("a file not asked for was written")
	}

	// nil asks for every file.
	all := t.TempDir()
	got, err = Extract(job, "rollback-c1", nil, all)
	if err != nil || len(got.Written) != 5 || len(got.Absent) != 0 {
		t.Fatalf("every file: %+v %v", got, err)
	}
}

// It never overwrites: a folder that holds anything is refused, and
// nothing is written into it.
func TestExtractRefusesAFolderThatIsNotEmpty(t *testing.T) {
	t.Parallel()
	job := t.TempDir()
	ws := filepath.Join(job, "workspace")
	write(t, filepath.Join(ws, "a.txt"), "agent's")
	if _, err := Take(ws, job, "rollback-c1"); err != nil {
		t.Fatal(err)
	}
	into := t.TempDir()
	write(t, filepath.Join(into, "a.txt"), "steward's")
	_, err := Extract(job, "rollback-c1", []string{"a.txt"}, into)
	if !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), into) {
		t.Fatalf("err = %v", err)
	}
	if read(t, filepath.Join(into, "a.txt")) != "steward's" {
		t.Error("a file was overwritten")
	}
	if _, err := Extract(job, "rollback-none", nil, t.TempDir()); err == nil {
		t.Error("a missing snapshot was extracted")
	}
}

// A damaged object writes nothing at all: every object is checked first.
func TestExtractOfADamagedSnapshotWritesNothing(t *testing.T) {
	t.Parallel()
	job := t.TempDir()
	ws := filepath.Join(job, "workspace")
	write(t, filepath.Join(ws, "a.txt"), "one")
	write(t, filepath.Join(ws, "b.txt"), "two")
	if _, err := Take(ws, job, "rollback-c1"); err != nil {
		t.Fatal(err)
	}
	objs, _ := filepath.Glob(filepath.Join(job, Dir, "objects", "*"))
	slices.Sort(objs)
	if err := os.WriteFile(objs[len(objs)-1], []byte("bit rot"), 0o600); err != nil {
		t.Fatal(err)
	}
	into := filepath.Join(t.TempDir(), "out")
	_, err := Extract(job, "rollback-c1", nil, into)
	if err == nil || !strings.Contains(err.Error(), "does not match its hash") || !strings.Contains(err.Error(), filepath.Join(Dir, "objects", filepath.Base(objs[len(objs)-1]))) {
		t.Fatalf("err = %v (want it to name the object)", err)
	}
	if _, err := os.Lstat(into); !os.IsNotExist(err) {
		t.Error("a failed extract made its folder")
	}
}

// A listing is read back as untrusted: a path outside the workspace is
// refused, and a link in it cannot carry a later file outside the folder.
func TestExtractStaysInsideItsFolder(t *testing.T) {
	t.Parallel()
	job := t.TempDir()
	ws := filepath.Join(job, "workspace")
	write(t, filepath.Join(ws, "x"), "payload")
	info, err := Take(ws, job, "cp-real")
	if err != nil {
		t.Fatal(err)
	}
	sum := info.Entries[0].SHA256
	outside := t.TempDir()
	for name, entries := range map[string]string{
		"rollback-up":   `[{"path":"../../evil","mode":420,"sha256":"` + sum + `"}]`,
		"rollback-git":  `[{"path":".git/hooks/pre-commit","mode":493,"sha256":"` + sum + `"}]`,
		"rollback-link": `[{"path":"a","mode":134218239,"link":"` + outside + `"},{"path":"a/x","mode":420,"sha256":"` + sum + `"}]`,
	} {
		write(t, filepath.Join(job, Dir, name+".json"), `{"checkpoint_id":"`+name+`","entries":`+entries+`}`)
		into := t.TempDir()
		if _, err := Extract(job, name, nil, into); err == nil {
			t.Errorf("%s: extracted", name)
		}
		if _, err := os.Lstat(filepath.Join(outside, "x")); !os.IsNotExist(err) {
			t.Fatalf("%s: a file was written outside the folder", name)
		}
	}
}
