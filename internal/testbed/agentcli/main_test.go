package agentcli

import (
	"os"
	"testing"

	"github.com/logist/logist/internal/sandbox"
)

// TestMain lets this binary be the sandbox's launcher and helper: the
// daemon it runs in-process contains the agent CLIs as logistd does.
func TestMain(m *testing.M) {
	sandbox.Helper()
	os.Exit(m.Run())
}
