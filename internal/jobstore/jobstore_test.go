package jobstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// While the daemon saves a manifest in place, over and over, a reader gets
// one of the saved manifests whole every time, never an error.
func TestLoadDuringInPlaceSaves(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := New(dir)
	w.InPlace = true
	r := New(dir)
	if err := os.MkdirAll(w.JobDir("j"), 0o700); err != nil {
		t.Fatal(err)
	}
	const agents = `"agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "s"}]}, "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "s"}]}}`
	a := []byte(`{"task_description": "short", ` + agents + `}` + "\n")
	b := []byte(`{"task_description": "a much longer description than the other one, to change the size", ` + agents + `}` + "\n")
	if err := w.WriteManifest("j", a); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { // before TempDir's cleanup, even after a Fatal
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			data := a
			if i%2 == 1 {
				data = b
			}
			if err := w.WriteManifestCopy("j", data); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 2000; i++ {
		m, err := r.Load("j")
		if err != nil {
			t.Fatalf("load %d: %v", i, err)
		}
		if d := m.TaskDescription; d != "short" && !strings.HasPrefix(d, "a much longer") {
			t.Fatalf("load %d: a manifest never saved: %q", i, d)
		}
	}
}

// The job lock excludes: a second LockJob waits until the first is
// released, including one kept open by Release and taken again by Relock.
func TestJobLockExcludes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	if err := os.MkdirAll(s.JobDir("j"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.JobDir("j"), ManifestFile), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kept := range []bool{false, true} {
		l, err := s.LockJob("j")
		if err != nil {
			t.Fatal(err)
		}
		if kept {
			l.Release()
			if l, err = s.Relock("j", l); err != nil {
				t.Fatal(err)
			}
		}
		got := make(chan *Lock)
		go func() {
			l2, err := s.LockJob("j")
			if err != nil {
				t.Error(err)
			}
			got <- l2
		}()
		select {
		case <-got:
			t.Fatalf("kept %v: a second lock was granted while the first was held", kept)
		case <-time.After(100 * time.Millisecond):
		}
		l.Unlock()
		select {
		case l2 := <-got:
			l2.Unlock()
		case <-time.After(5 * time.Second):
			t.Fatalf("kept %v: the second lock was not granted after the first was released", kept)
		}
	}
}

// A FIFO named job.json (hostile input H96) is listed with a clear error at
// once; opening it for reading would block for ever.
func TestFIFOManifestListedWithoutBlocking(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	if err := os.MkdirAll(s.JobDir("j"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(s.JobDir("j"), ManifestFile), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan []Entry, 1)
	go func() {
		es, err := s.List()
		if err != nil {
			t.Error(err)
		}
		done <- es
	}()
	select {
	case es := <-done:
		if len(es) != 1 || es[0].Err == nil || !strings.Contains(es[0].Err.Error(), "named pipe") {
			t.Fatalf("listed %+v", es)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("listing a job whose job.json is a FIFO blocked")
	}
}

// TestDirOfSharedIsDirOf: the paths a display's listing cuts from shared
// chunks are dirOf's, odd names and a long run of them included, and none
// changes as more are cut.
func TestDirOfSharedIsDirOf(t *testing.T) {
	for _, dir := range []string{t.TempDir(), t.TempDir() + "/./x/.."} {
		s := &Store{Dir: dir}
		shared := s.dirOfShared()
		names := []string{"a", "", ".", "..", "x/y", "job-1", strings.Repeat("n", 70<<10)}
		for i := range 5000 {
			names = append(names, fmt.Sprintf("job-%05d", i))
		}
		var got []string
		for _, n := range names {
			got = append(got, shared(n))
		}
		for i, n := range names {
			if want := s.dirOf()(n); got[i] != want {
				t.Fatalf("dirOfShared(%q) = %q, want %q", n, got[i], want)
			}
		}
	}
}

// EachJob walks the job folders logist list shows (ListSummaries), in
// the same order: not a dot-folder, a folder without a manifest, a file,
// a link or a bare manifest; an invalid manifest and a folder name that
// is no job id are walked, with their error.
func TestEachJobIsTheListingsFolders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	valid := strings.Replace(validJob, `"job_id": "a", `, "", 1)
	write := func(p, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"b", "a", "c-1"} {
		write(filepath.Join(dir, id, ManifestFile), valid)
	}
	write(filepath.Join(dir, "broken", ManifestFile), `{"task_description": `)
	write(filepath.Join(dir, "not a job id", ManifestFile), valid)
	write(filepath.Join(dir, ".hidden", ManifestFile), valid)
	write(filepath.Join(dir, "empty", "history.jsonl"), "")
	write(filepath.Join(dir, "bare.json"), valid)
	write(filepath.Join(dir, "notes.txt"), "x")
	if err := os.Symlink(filepath.Join(dir, "a"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}

	var walked []string
	errs := map[string]bool{}
	err := s.EachJob(func(e *Entry) error {
		walked = append(walked, e.ID)
		if e.Dir != s.JobDir(e.ID) || (e.Err == nil) == (e.Manifest == nil) {
			t.Errorf("entry %s: dir %q, manifest %v, err %v", e.ID, e.Dir, e.Manifest != nil, e.Err)
		}
		errs[e.ID] = e.Err != nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	listed, err := s.ListSummaries(true)
	if err != nil {
		t.Fatal(err)
	}
	var folders []string
	for _, e := range listed {
		if e.Unplaced == "" {
			folders = append(folders, e.ID)
		}
	}
	want := []string{"a", "b", "broken", "c-1", "not a job id"}
	if strings.Join(walked, "|") != strings.Join(want, "|") || strings.Join(folders, "|") != strings.Join(want, "|") {
		t.Errorf("EachJob walked %q, the listing's folders are %q; want %q", walked, folders, want)
	}
	if !errs["broken"] || !errs["not a job id"] || errs["a"] {
		t.Errorf("errors: %v", errs)
	}

	stop := fmt.Errorf("stop")
	n := 0
	if err := s.EachJob(func(*Entry) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("an error from each: walked %d, returned %v", n, err)
	}
	if err := New(filepath.Join(dir, "missing")).EachJob(func(*Entry) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Errorf("a jobs folder that is not there: %v", err)
	}
}
