package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Hostile input H107: requests/ grew without bound (657 MB in 5 minutes of
// a looping workflow). Only the newest KeepRequests calls' files stay;
// other files in the folder (the pid log, a call's scratch folder) stay.
func TestPruneRequestsKeepsTheNewest(t *testing.T) {
	t.Parallel()
	job := t.TempDir()
	dir := filepath.Join(job, "requests")
	if err := os.MkdirAll(filepath.Join(dir, "000007.call"), 0o700); err != nil {
		t.Fatal(err)
	}
	const calls = KeepRequests + 10
	for n := range calls {
		for _, name := range []string{fmt.Sprintf("%06d.json", n), fmt.Sprintf("%06d.answer.json", n)} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("{}"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, PidLog), []byte("1 2 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	removed, err := PruneRequests(job)
	if err != nil || removed != 20 {
		t.Fatalf("removed %d, %v; want 20", removed, err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	for _, want := range []string{"000007.call", PidLog, "000010.json", "000010.answer.json", fmt.Sprintf("%06d.json", calls-1)} {
		if !slices.Contains(names, want) {
			t.Errorf("%s was removed", want)
		}
	}
	if slices.Contains(names, "000009.json") || slices.Contains(names, "000000.answer.json") {
		t.Errorf("old calls kept: %v", names)
	}
	if n, err := PruneRequests(t.TempDir()); n != 0 || err != nil {
		t.Errorf("no requests folder: %d, %v", n, err)
	}
}

// A run's start tidies requests/ from one read of the folder: the
// predicted calls' empty files a dead daemon left go (ClearPredicted),
// then all but the KeepRequests newest calls' files (PruneRequests), the
// removed predicted call not counted among them. A job with no requests/
// folder costs the one read that fails.
func TestTidyRequestsReadsTheFolderOnce(t *testing.T) {
	reads := 0
	readDir = func(d string) ([]os.DirEntry, error) { reads++; return os.ReadDir(d) }
	t.Cleanup(func() { readDir = os.ReadDir })
	job := t.TempDir()
	dir := filepath.Join(job, "requests")
	const calls = KeepRequests + 4
	for n := range calls {
		if err := os.MkdirAll(answerDir(job, n), 0o700); err != nil {
			t.Fatal(err)
		}
		body := "{}"
		if n == calls-1 {
			body = "" // predicted, never started
		}
		if err := os.WriteFile(RequestFile(job, n), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := TidyRequests(job, true)
	if err != nil || reads != 1 {
		t.Fatalf("TidyRequests: %v after %d reads of the folder, want 1", err, reads)
	}
	// The predicted call's two entries, then the 3 oldest of the 35 calls left.
	if removed != 3 {
		t.Errorf("pruned %d request files, want 3", removed)
	}
	for _, c := range []struct {
		n    int
		kept bool
	}{{0, false}, {2, false}, {3, true}, {calls - 2, true}, {calls - 1, false}} {
		if _, err := os.Stat(RequestFile(job, c.n)); (err == nil) != c.kept {
			t.Errorf("call %d's request: kept %v, want %v", c.n, err == nil, c.kept)
		}
	}
	if _, err := os.Stat(answerDir(job, calls-1)); err == nil {
		t.Errorf("the predicted call's answer folder is left in %s", dir)
	}
	reads = 0
	if n, err := TidyRequests(t.TempDir(), true); n != 0 || err != nil || reads != 1 {
		t.Errorf("no requests folder: %d, %v, %d reads", n, err, reads)
	}
}

// A contained call answers in a folder of its own (requests/NNNNNN.answer/,
// bound into its sandbox), made for every call: the pruning drops those
// of old calls, whatever the agent left in them, as it drops their
// request files. A file or link by that name is not a call's folder and
// stays.
func TestPruneRequestsDropsOldAnswerFolders(t *testing.T) {
	t.Parallel()
	job := t.TempDir()
	dir := filepath.Join(job, "requests")
	const calls = KeepRequests + 3
	for n := range calls {
		ans := answerDir(job, n)
		if err := os.MkdirAll(filepath.Join(ans, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ans, "answer.json"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(RequestFile(job, n), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "000001.answer.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := PruneRequests(job); err != nil {
		t.Fatal(err)
	}
	for n := range calls {
		_, err := os.Stat(answerDir(job, n))
		if kept := err == nil; kept != (n >= calls-KeepRequests) {
			t.Errorf("call %d's answer folder kept: %v, want %v (%v)", n, kept, n >= calls-KeepRequests, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "000001.answer.json")); err != nil {
		t.Errorf("a link in requests/ was removed: %v", err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the link's target was touched: %v", err)
	}
}
