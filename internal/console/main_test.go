package console_test

import (
	"os"
	"testing"

	"github.com/logist/logist/internal/pgtest"
	"github.com/logist/logist/internal/sandbox"
)

// TestMain lets this test binary be the sandbox's launcher, as logistd is:
// the browser test's daemon contains its jobs' processes (on by default),
// and refuses to start them from a binary that cannot. The cluster tests'
// PostgreSQL is stopped at the end.
func TestMain(m *testing.M) {
	sandbox.Helper()
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}
