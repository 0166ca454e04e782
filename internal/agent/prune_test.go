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
