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
