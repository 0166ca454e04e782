package agent

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/manifest"
)

// A scripted role writes its files into the workspace, which other roles'
// agents share: one that left a named pipe where the script writes had
// logistd block in open() for ever (os.WriteFile, no reader).
func TestScriptWritesOverANamedPipe(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	p := filepath.Join(ws, "notes.md")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Script{Steps: []manifest.ScriptStep{{Action: "done", Files: map[string]string{"notes.md": "the work\n"}}}}
	done := make(chan error, 1)
	go func() {
		_, err := s.Call(context.Background(), &Request{Workspace: ws})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		// Let the blocked open go on, so nothing is left behind.
		if fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			defer syscall.Close(fd) //nolint:errcheck // a pipe's read end
		}
		t.Fatalf("the script's write still blocked after 5 s (then: %v)", <-done)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("notes.md: %v, %v; want the script's regular file", fi, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "the work\n" {
		t.Errorf("notes.md holds %q", b)
	}
}
