package console_test

import (
	"os"
	"testing"

	"github.com/logist/logist/internal/sandbox"
)

// TestMain lets this test binary be the sandbox's launcher, as logistd is:
// the browser test's daemon contains its jobs' processes (on by default),
// and refuses to start them from a binary that cannot.
func TestMain(m *testing.M) {
	sandbox.Helper()
	os.Exit(m.Run())
}
