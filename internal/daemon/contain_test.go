package daemon

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/sandbox"
)

// TestLogsHelperBinary: at start logistd says which binary runs its
// sandboxes' launcher and helper. This test binary has no logist-sandbox
// beside it, so it runs itself, and the line says why.
func TestLogsHelperBinary(t *testing.T) {
	var buf bytes.Buffer
	logHelperBinary(slog.New(slog.NewJSONHandler(&buf, nil)))
	var line struct {
		Msg    string `json:"msg"`
		Binary string `json:"binary"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %q", err, buf.String())
	}
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	if line.Binary != exe || !strings.Contains(line.Msg, "logistd itself (no "+sandbox.HelperName+" beside") {
		t.Errorf("logged %q binary %q, want this executable %s and why not %s", line.Msg, line.Binary, exe, sandbox.HelperName)
	}
}
