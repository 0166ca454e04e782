package cli

import (
	"encoding/json"
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

// submit warns, on stderr and without failing, of each file an agent's
// argv names relative to the workspace that submit does not copy there
// (the script beside the manifest), naming the manifest, the field and
// what to do; not of an absolute path or a program on PATH.
func TestSubmitWarnsOfUncopiedAgentFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs")
	if err := os.Mkdir(jobs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.sh"), []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	agents := `"agents": {"worker": {"provider": "command", "command": {"argv": ["sh", "../agent.sh", "{request_file}"]}},
		"supervisor": {"provider": "command", "command": {"argv": ["sh", "` + filepath.Join(dir, "agent.sh") + `"]}}}`
	file := filepath.Join(dir, "j.json")
	if err := os.WriteFile(file, []byte(`{"task_description": "t", "status": "PENDING", `+agents+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runMain(t, nil, "submit", file, "--jobs-dir", jobs)
	want := "logist: warning: " + file + `: /agents/worker/command/argv/1: "../agent.sh" is relative to the job's workspace, where the agent runs: it leads to ` +
		filepath.Join(jobs, "j", "agent.sh") + ", where nothing is (" + filepath.Join(dir, "agent.sh") + ", beside the manifest, is not copied"
	if code != 0 || out != "j\n" || !strings.Contains(errs, want) || strings.Count(errs, "warning") != 1 {
		t.Fatalf("submit: exit %d, stdout %q, stderr\n%s\nwant one warning: %s", code, out, errs, want)
	}
	// JSON: the same warnings, under "warnings", and on stderr.
	jobs2 := filepath.Join(dir, "jobs2")
	if err := os.Mkdir(jobs2, 0o700); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runMain(t, nil, "submit", file, "--jobs-dir", jobs2, "--format", "json")
	var doc struct {
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || len(doc.Warnings) != 1 ||
		!strings.Contains(doc.Warnings[0], "/agents/worker/command/argv/1") || !strings.Contains(errs, "warning") {
		t.Errorf("submit --format json: exit %d, %v, warnings %q, stderr %s", code, err, doc.Warnings, errs)
	}
}

// Every command's help lists --database-url, the global flag of cluster
// mode, wherever it lists --jobs-dir: none did, though every command takes
// it (Main parses it before the command's own flags).
func TestHelpListsDatabaseURLWithJobsDir(t *testing.T) {
	for _, c := range commands {
		h := commandHelp(c)
		if strings.Contains(h, "--jobs-dir") != strings.Contains(h, "--database-url") {
			t.Errorf("logist %s --help lists --jobs-dir and --database-url unlike:\n%s", c.name, h)
		}
	}
	code, out, _ := runMain(t, nil, "status", "--help")
	if code != 0 || !strings.Contains(out, "--database-url string") || !strings.Contains(out, "--jobs-dir string") {
		t.Errorf("logist status --help: %d\n%s", code, out)
	}
	if _, out, _ := runMain(t, nil, "help"); !strings.Contains(out, "--database-url URL") {
		t.Errorf("logist help lists no --database-url among the global flags:\n%s", out)
	}
}
