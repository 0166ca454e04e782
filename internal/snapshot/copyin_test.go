package snapshot

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// CopyIn copies folders, regular files (their content and mode, streamed)
// and symlinks as links; a named pipe or a socket is left out, never read.
func TestCopyInCopiesFilesAndLinksOnly(t *testing.T) {
	src := t.TempDir()
	big := strings.Repeat("0123456789", 300_000) // 3 MB: more than one read
	for rel, content := range map[string]string{"a.txt": "a\n", "sub/deep/b.sh": "#!/bin/sh\n", "big.bin": big} {
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "sub/deep/b.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(t.TempDir(), "workspace")
	if err := CopyIn(src, ws); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "big.bin")); string(b) != big {
		t.Errorf("big.bin: %d bytes, want %d", len(b), len(big))
	}
	if fi, err := os.Stat(filepath.Join(ws, "sub/deep/b.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("b.sh: %v %v, want mode 0755", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(ws, "link")); err != nil || target != "a.txt" {
		t.Errorf("link: %q %v, want a link to a.txt", target, err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "pipe")); err == nil {
		t.Error("the named pipe was copied")
	}
}
