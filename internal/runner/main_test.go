package runner

import (
	"os"
	"testing"

	"github.com/logist/logist/internal/sandbox"
)

// TestMain lets this test binary act as the sandbox's launcher for the
// tests that run contained calls (sandbox.Helper).
func TestMain(m *testing.M) {
	sandbox.Helper()
	os.Exit(m.Run())
}
