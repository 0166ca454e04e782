package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A record number below 0 is an invalid argument (exit 1), not a record
// that is missing (exit 4), whether or not the job is there.
func TestHistoryNegativeRecordIsInvalid(t *testing.T) {
	jobs := t.TempDir()
	writeJob(t, jobs, "j", jobJSON("PENDING", ""))
	for _, args := range [][]string{{"history", "j", "--record", "-1"}, {"history", "nope", "--record", "-1"}, {"history", "j", "--seq", "-3"}} {
		code, _, errs := runMain(t, nil, append([]string{"--jobs-dir", jobs}, args...)...)
		if code != 1 || !strings.Contains(errs, "a record number is 0 or more") {
			t.Errorf("%v: exit %d: %s", args, code, errs)
		}
	}
}

// A jobs folder that does not exist is never made by a steward's
// command: submit (and every command that signs) says so, how to make
// it, and exits 4; nothing is created.
func TestMissingJobsFolderIsNotMade(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "j.json")
	if err := os.WriteFile(file, []byte(jobJSON("PENDING", "")), 0o600); err != nil {
		t.Fatal(err)
	}
	typo := filepath.Join(dir, "typo", "path")
	for _, args := range [][]string{{"submit", file}, {"resume", "j"}, {"halt", "j"}, {"set", "j", "limits.max_retries=1"}} {
		code, _, errs := runMain(t, nil, append([]string{"--jobs-dir", typo}, args...)...)
		if code != 4 || !strings.Contains(errs, "jobs folder "+typo+" does not exist; make it (mkdir -p "+typo) {
			t.Errorf("%v: exit %d: %s", args, code, errs)
		}
		if _, err := os.Stat(filepath.Join(dir, "typo")); !os.IsNotExist(err) {
			t.Fatalf("%v made the jobs folder's path: %v", args, err)
		}
	}
}
