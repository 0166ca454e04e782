package jobstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/atomicfile"
)

// dropManifest writes a bare manifest named name into the jobs folder.
func dropManifest(t *testing.T, dir, name, body string) string {
	t.Helper()
	bare := filepath.Join(dir, name)
	if err := os.WriteFile(bare, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return bare
}

// sameFile reports whether a and b name one file.
func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Lstat(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.Lstat(b)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(fa, fb)
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// Place links job.json to the bare file and keeps the bare name until an
// fsync of the job folder and of the jobs folder, both begun after the
// link, have succeeded: a jobs folder fsync alone (another job's) must
// not make the name's removal durable before job.json's entry is. Until
// then the pair is one job in a listing, not two.
func TestPlaceKeepsBareNameUntilFolderDurable(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	bare := dropManifest(t, dir, "p.json", `{"task_description": "t"}`)
	id, placed, err := s.Place(bare)
	if err != nil || !placed || id != "p" {
		t.Fatalf("Place: %q %v %v", id, placed, err)
	}
	mf := filepath.Join(s.JobDir(id), ManifestFile)
	if !exists(bare) || !sameFile(t, bare, mf) {
		t.Fatal("after Place: want the bare name and job.json, one file")
	}
	if !s.Leftover(bare) || !s.Placing(id) {
		t.Fatal("the bare name is not recognised as the placement's")
	}
	es, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].ID != "p" || es[0].Unplaced != "" || es[0].Dir == "" {
		t.Fatalf("List while both names exist: %+v, want the one job", es)
	}
	// The jobs folder alone (another job's fsync).
	if err := atomicfile.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // a callback made due would run now
	if !exists(bare) {
		t.Fatal("bare name removed after the jobs folder's fsync alone: job.json's entry is not durable yet")
	}
	// Then the job folder's (its first unit's): the name goes, off the
	// fsync's path.
	if err := atomicfile.SyncDir(s.JobDir(id)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); exists(bare); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("bare name still there after both folders' fsyncs")
		}
	}
	if !exists(mf) || s.Placing(id) {
		t.Fatal("job.json gone, or the placement still pending")
	}
}

// SettlePlaced removes the name at once (the job will not run soon).
func TestSettlePlacedRemovesBareName(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	bare := dropManifest(t, dir, "r.json", `{"job_id": "other", "task_description": "t"}`)
	id, _, err := s.Place(bare)
	if err != nil || id != "other" {
		t.Fatalf("Place: %q %v", id, err)
	}
	if !s.Leftover(bare) {
		t.Fatal("a placement under its job_id not recognised")
	}
	if err := s.SettlePlaced(id); err != nil {
		t.Fatal(err)
	}
	if exists(bare) || !exists(filepath.Join(s.JobDir(id), ManifestFile)) {
		t.Fatal("after SettlePlaced: want job.json only")
	}
}

// The pair a crash left (another process placed it): Place makes the job
// folder and its entry durable, removes the bare name, and places
// nothing. A different file under that name is another manifest.
func TestPlaceRemovesLeftoverOfCrash(t *testing.T) {
	dir := t.TempDir()
	bare := dropManifest(t, dir, "c.json", `{"task_description": "t"}`)
	// What a placement leaves (made by hand: a Store of this process
	// would remove the name at the fsyncs below).
	if err := os.Mkdir(filepath.Join(dir, "c"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(bare, filepath.Join(dir, "c", ManifestFile)); err != nil {
		t.Fatal(err)
	}
	s := New(dir) // the daemon started again: it placed nothing
	n := atomicfile.DirSyncs.Load()
	id, placed, err := s.Place(bare)
	if err != nil || placed || id != "c" {
		t.Fatalf("Place of the leftover: %q placed=%v %v; want c, not placed", id, placed, err)
	}
	if got := atomicfile.DirSyncs.Load() - n; got != 3 {
		t.Fatalf("%d folder fsyncs for the leftover, want 3 (job folder and jobs folder before the removal, jobs folder after)", got)
	}
	if exists(bare) || !exists(filepath.Join(s.JobDir(id), ManifestFile)) {
		t.Fatal("after the leftover's Place: want job.json only")
	}
	dropManifest(t, dir, "c.json", `{"task_description": "t"}`)
	if s.Leftover(bare) {
		t.Fatal("a new file under the name taken for a leftover")
	}
	if _, _, err := s.Place(bare); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a new file under a placed job's name: %v, want already exists", err)
	}
}

// A new file dropped under the bare name while the placement waits is
// not removed with the old name.
func TestPlaceKeepsNewFileUnderBareName(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	bare := dropManifest(t, dir, "n.json", `{"task_description": "t"}`)
	id, _, err := s.Place(bare)
	if err != nil {
		t.Fatal(err)
	}
	tmp := dropManifest(t, dir, ".n.tmp", `{"task_description": "new"}`)
	if err := os.Rename(tmp, bare); err != nil {
		t.Fatal(err)
	}
	if err := s.SettlePlaced(id); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(bare); err != nil || !strings.Contains(string(b), "new") {
		t.Fatalf("the new file under the bare name: %q %v", b, err)
	}
}

// A file with another link already is copied: the job's manifest shares
// no inode with a name outside its folder, and the placement is durable,
// the bare name gone, when Place returns.
func TestPlaceCopiesFileWithOtherLinks(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	mine := filepath.Join(t.TempDir(), "mine.json")
	if err := os.WriteFile(mine, []byte(`{"task_description": "t"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(dir, "l.json")
	if err := os.Link(mine, bare); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	id, placed, err := s.Place(bare)
	if err != nil || !placed {
		t.Fatalf("Place: %v %v", placed, err)
	}
	mf := filepath.Join(s.JobDir(id), ManifestFile)
	if exists(bare) || sameFile(t, mine, mf) {
		t.Fatal("want the bare name gone and job.json a file of its own")
	}
	if b, _ := os.ReadFile(mf); string(b) != `{"task_description": "t"}` {
		t.Fatalf("job.json holds %q", b)
	}
	if s.Placing(id) {
		t.Fatal("a copy left pending")
	}
}

// Where the link is refused, the file is renamed in as before.
func TestPlaceRenamesWhereLinkRefused(t *testing.T) {
	defer func(f func(string, string) error) { linkFile = f }(linkFile)
	linkFile = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EPERM} }
	dir := t.TempDir()
	s := New(dir)
	bare := dropManifest(t, dir, "e.json", `{"task_description": "t"}`)
	id, placed, err := s.Place(bare)
	if err != nil || !placed {
		t.Fatalf("Place: %v %v", placed, err)
	}
	if exists(bare) || !exists(filepath.Join(s.JobDir(id), ManifestFile)) || s.Placing(id) {
		t.Fatal("want the file renamed into its folder")
	}
}

// While the bare name is there, the daemon's in-place saves of job.json
// keep its inode (a file with another link is otherwise replaced): the
// pair stays one file, which a crash before the unlink leaves
// recognisable. Once the name is gone they go on in place.
func TestPlacedManifestSavedInPlace(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	s.InPlace = true
	bare := dropManifest(t, dir, "w.json", `{"task_description": "t"}`)
	id, _, err := s.Place(bare)
	if err != nil {
		t.Fatal(err)
	}
	mf := filepath.Join(s.JobDir(id), ManifestFile)
	if err := s.WriteManifestCopy(id, []byte(`{"task_description": "saved"}`)); err != nil {
		t.Fatal(err)
	}
	if !sameFile(t, bare, mf) {
		t.Fatal("the save replaced job.json while the bare name was there: the pair is no longer one file")
	}
	if err := s.SettlePlaced(id); err != nil {
		t.Fatal(err)
	}
	before, err := os.Lstat(mf)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteManifestCopy(id, []byte(`{"task_description": "saved again"}`)); err != nil {
		t.Fatal(err)
	}
	after, err := os.Lstat(mf)
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("a save after the bare name went is not in place: %v", err)
	}
	// A file with an outside link is still replaced, never written
	// through.
	outside := filepath.Join(t.TempDir(), "other")
	if err := os.Link(mf, outside); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteManifestCopy(id, []byte(`{"task_description": "third"}`)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != `{"task_description": "saved again"}` {
		t.Fatalf("the save wrote through an outside link: %q", b)
	}
}

// SettlePlaced's removal races the fsyncs' own callback, which its fsync
// made due: whichever begins the removal, the name is gone when
// SettlePlaced returns.
func TestSettlePlacedWaitsForTheCallbacksRemoval(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	for i := range 300 {
		id := fmt.Sprintf("j%03d", i)
		bare := dropManifest(t, dir, id+".json", fmt.Sprintf(`{"job_id": %q, "task_description": "t"}`, id))
		if _, _, err := s.Place(bare); err != nil {
			t.Fatal(err)
		}
		if err := s.SettlePlaced(id); err != nil {
			t.Fatal(err)
		}
		if exists(bare) {
			t.Fatalf("placement %d: bare name still there when SettlePlaced returned", i)
		}
	}
}

// Placement says what Place then does with each kind of bare manifest:
// the job it becomes, or Place's own refusal; a file still being written
// waits (ErrIncomplete). The one rule, told to a listing before logistd
// acts.
func TestPlacementIsPlacesVerdict(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	dropManifest(t, dir, "taken.json", `{"task_description": "t"}`)
	if _, _, err := s.Place(filepath.Join(dir, "taken.json")); err != nil {
		t.Fatal(err)
	}
	s.SettlePlaced("taken") //nolint:errcheck // the bare name's removal; checked below
	for _, c := range []struct{ name, body, id, err string }{
		{"new.json", `{"task_description": "t"}`, "new", ""},
		{"named.json", `{"job_id": "other", "task_description": 3}`, "other", ""}, // an invalid manifest is placed all the same
		{"half.json", `{"task_descr`, "", ErrIncomplete.Error()},
		{"bad name.json", `{"task_description": "t"}`, "", `not placed: job id "bad name" is invalid: rename the file or set a valid job_id`},
		{"dup.json", `{"job_id": "taken"}`, "", "not placed: job taken already exists; rename the file or change its job_id"},
	} {
		bare := dropManifest(t, dir, c.name, c.body)
		id, err := s.Placement(bare)
		if id != c.id || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("Placement(%s) = %q, %v; want %q, %q", c.name, id, err, c.id, c.err)
		}
		if err != nil && c.err != ErrIncomplete.Error() && !strings.HasPrefix(err.Error(), bare+": ") {
			t.Errorf("Placement(%s): %v does not name the file first", c.name, err)
		}
		placed, _, perr := s.Place(bare)
		if placed != id || fmt.Sprint(perr) != fmt.Sprint(err) {
			t.Errorf("Place(%s) = %q, %v; Placement said %q, %v", c.name, placed, perr, id, err)
		}
	}
}

// A <name>.json in the jobs folder that is not a regular file is not
// placed, and the refusal says what it is and what to do: a symlink is
// not followed (its target is left alone, no job folder is made), and a
// named pipe is not opened for a read that would wait for a writer. A
// listing shows each as unplaced, with the same reason.
func TestPlaceRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	target := filepath.Join(t.TempDir(), "m.json")
	body := `{"task_description": "t"}`
	if err := os.WriteFile(target, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	mk := map[string]func(string) error{
		"link.json":     func(p string) error { return os.Symlink(target, p) },
		"dangling.json": func(p string) error { return os.Symlink(filepath.Join(dir, "none.json"), p) },
		"pipe.json":     func(p string) error { return syscall.Mkfifo(p, 0o600) },
	}
	want := map[string]string{
		"link.json":     fmt.Sprintf("it is a symlink (to %q), not a regular file; not placed: copy the manifest into the jobs folder", target),
		"dangling.json": "it is a symlink (to ",
		"pipe.json":     "it is a named pipe (FIFO), not a regular file; not placed: write the manifest to a regular file",
	}
	for name, f := range mk {
		bare := filepath.Join(dir, name)
		if err := f(bare); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, _, err := s.Place(bare); done <- err }()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("Place(%s) blocked", name)
		}
		if err == nil || !strings.HasPrefix(err.Error(), bare+": "+want[name]) {
			t.Errorf("Place(%s) = %v; want %s: %s…", name, err, bare, want[name])
		}
		if _, perr := s.Placement(bare); fmt.Sprint(perr) != fmt.Sprint(err) {
			t.Errorf("Placement(%s) = %v; Place said %v", name, perr, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, strings.TrimSuffix(name, ".json"))); !os.IsNotExist(err) {
			t.Errorf("%s: a job folder was made: %v", name, err)
		}
		if fi, err := os.Lstat(bare); err != nil || fi.Mode().IsRegular() {
			t.Errorf("%s: the name was moved or replaced: %v %v", name, fi, err)
		}
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != body {
		t.Fatalf("the link's target changed: %q %v", got, err)
	}
	es, err := s.ScanSummaries()
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, e := range es {
		if e.Unplaced != "" {
			listed[filepath.Base(e.Unplaced)] = true
		}
	}
	for name := range mk {
		if !listed[name] {
			t.Errorf("%s is not listed as unplaced (listed: %v)", name, listed)
		}
	}
}
