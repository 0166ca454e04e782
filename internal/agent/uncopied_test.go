package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/logist/logist/internal/manifest"
)

// UncopiedFiles names each argument of a command agent that is a file
// relative to the workspace and not there, and nothing else: not an
// absolute path, a placeholder, a flag, a program found on PATH, a word,
// a file that is there, or one a workspace source may hold.
func TestUncopiedFiles(t *testing.T) {
	src := t.TempDir() // the manifest's folder, a script beside it
	file := filepath.Join(src, "job.json")
	for _, f := range []string{"agent.sh", "worker.py"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte("#!/bin/sh\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	job := filepath.Join(t.TempDir(), "j") // the job's folder, as submit made it
	ws := filepath.Join(job, "workspace")
	if err := os.MkdirAll(filepath.Join(ws, "bin"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "bin", "there.sh"), nil, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := func(argv ...string) manifest.AgentConfig {
		return manifest.AgentConfig{Provider: "command", Command: &manifest.Command{Argv: argv}}
	}
	m := &manifest.Manifest{Agents: map[string]manifest.AgentConfig{
		"a": cmd("sh", "../agent.sh"),                                   // beside job.json, read from the workspace
		"b": cmd("./agent.sh", "{request_file}"),                        // a relative program
		"c": cmd("python3", "worker.py", "-v", "hello"),                 // a name beside the manifest; a flag; a word
		"d": cmd("/bin/sh", filepath.Join(src, "agent.sh"), "--x=../y"), // absolute; a flag
		"e": cmd("sh", "bin/there.sh", "{workspace}/run.sh"),            // there; a placeholder
		"f": cmd("agent.sh"),                                            // a program name: PATH's (ProgramCheck)
		"g": {Provider: "command", Command: &manifest.Command{Preset: "codex"}},
	}}
	var got []string
	for _, e := range UncopiedFiles(file, m, ws) {
		if e.File != file || !strings.Contains(e.Reason, "copy the file there before the job runs, or give its absolute path") {
			t.Errorf("%v: does not name the manifest and what to do", e)
		}
		got = append(got, e.Pointer)
	}
	want := []string{"/agents/a/command/argv/1", "/agents/b/command/argv/0", "/agents/c/command/argv/1"}
	if !slices.Equal(got, want) {
		t.Fatalf("UncopiedFiles = %q, want %q", got, want)
	}
	es := UncopiedFiles(file, m, ws)
	if r := es[0].Reason; !strings.Contains(r, filepath.Join(job, "agent.sh")) || !strings.Contains(r, filepath.Join(src, "agent.sh")+", beside the manifest, is not copied") {
		t.Errorf("../agent.sh: %s: does not say where it leads and which file was not copied", r)
	}
	// A workspace filled from a source may hold what is inside it.
	m.Workspace = &manifest.Workspace{Copy: src}
	got = got[:0]
	for _, e := range UncopiedFiles(file, m, ws) {
		got = append(got, e.Pointer)
	}
	if want := []string{"/agents/a/command/argv/1"}; !slices.Equal(got, want) {
		t.Errorf("with workspace.copy: %q, want %q", got, want)
	}
}
