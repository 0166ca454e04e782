package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Git runs git in dir for a test (no system or user config, a fixed
// author) and returns its output, trimmed; a failure fails the test.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed (scripts/test-tools.sh installs it)")
		}
		t.Skip("SKIP (loud): git is not installed; apt-get install git")
	}
	c := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "core.hooksPath=/dev/null"}, args...)...)
	c.Dir = dir
	c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// BinaryFile is the content of the binary file GitRepo commits (NUL bytes
// and all 256 byte values).
func BinaryFile() []byte {
	b := []byte{0, 1, 2, 0, 255}
	for i := range 256 {
		b = append(b, byte(i))
	}
	return b
}

// GitRepo makes a repository for a job to work on, in a new temporary
// folder: several commits on main (text and binary files, a rename, a
// deletion, a folder), a second branch "feature" with a commit of its own,
// and a tag "v1" on the first commit; main is checked out and clean. It
// returns the folder.
func GitRepo(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	write := func(rel string, b []byte) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, dir, "init", "-q")
	write("README.md", []byte("# demo\n"))
	write("src/main.go", []byte("package main\n\nfunc main() {}\n"))
	write("old-name.txt", []byte("this file is renamed\nline 2\nline 3\n"))
	write("obsolete.txt", []byte("this file is deleted\n"))
	write("logo.bin", BinaryFile())
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "-q", "-m", "first")
	Git(t, dir, "tag", "v1")
	Git(t, dir, "branch", "feature")
	Git(t, dir, "mv", "old-name.txt", "new-name.txt")
	Git(t, dir, "rm", "-q", "obsolete.txt")
	write("logo.bin", append(BinaryFile(), 0, 7))
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "-q", "-m", "rename, delete, binary change")
	write("docs/guide.md", []byte("guide\n"))
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "-q", "-m", "docs")
	Git(t, dir, "checkout", "-q", "feature")
	write("feature.txt", []byte("on the feature branch\n"))
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "-q", "-m", "feature")
	Git(t, dir, "checkout", "-q", "main")
	return dir
}
