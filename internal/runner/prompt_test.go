package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/manifest"
)

// A prompt file is read whole up to MaxPromptBytes and refused past it,
// naming the role's field, the file and the limit: it goes into every
// request of the role.
func TestPromptFileIsBounded(t *testing.T) {
	dir := t.TempDir()
	m := &manifest.Manifest{Prompts: map[string]string{"worker": "p.md"}}
	for _, tc := range []struct {
		size int
		err  string
	}{
		{MaxPromptBytes, ""},
		{MaxPromptBytes + 1, "prompts.worker: p.md is larger than the 1048576 bytes a prompt file may hold"},
		{64 << 20, "prompts.worker: p.md is larger than the 1048576 bytes a prompt file may hold"},
	} {
		if err := os.WriteFile(filepath.Join(dir, "p.md"), []byte(strings.Repeat("p", tc.size)), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := systemPrompt(m, dir, "worker")
		switch {
		case tc.err == "" && (err != nil || len(got) != tc.size):
			t.Errorf("%d bytes: %d read, %v; want it whole", tc.size, len(got), err)
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("%d bytes: %v, want %q", tc.size, err, tc.err)
		}
	}
}

// A prompt file the manifest names in the workspace (a repository's own
// prompt) is the agents' to replace: one that made it a link to another
// file of the job's folder, such as another role's private home or the
// history, had that file read into the role's prompt, and so into the
// request its agent reads.
func TestPromptFileInTheWorkspaceStaysInIt(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, s string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("agent-home/reviewer/.gemini/oauth_creds.json", "SECRET-TOKEN")
	write("workspace/docs/other.md", "a prompt of the workspace's")
	m := &manifest.Manifest{Prompts: map[string]string{"worker": "workspace/PROMPT.md", "tester": "workspace/docs/../PROMPT2.md"}}
	if err := os.Symlink("../agent-home/reviewer/.gemini/oauth_creds.json", filepath.Join(dir, "workspace", "PROMPT.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("docs/other.md", filepath.Join(dir, "workspace", "PROMPT2.md")); err != nil {
		t.Fatal(err)
	}
	if s, err := systemPrompt(m, dir, "worker"); err == nil || strings.Contains(s, "SECRET") {
		t.Errorf("prompt %q, %v: want the link out of the workspace refused", s, err)
	}
	if s, err := systemPrompt(m, dir, "tester"); err != nil || s != "a prompt of the workspace's" {
		t.Errorf("prompt %q, %v: a link inside the workspace is followed", s, err)
	}
}
