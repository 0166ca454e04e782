package daemon

import (
	"os"
	"testing"

	"github.com/logist/logist/internal/pgtest"
	"github.com/logist/logist/internal/sandbox"
)

// TestMain lets this test binary be the sandbox's launcher and helper, as
// logistd is: the daemon under test contains its jobs' processes.
func TestMain(m *testing.M) {
	sandbox.Helper()
	code := m.Run()
	pgtest.Stop() // the cluster tests' database server
	os.Exit(code)
}
