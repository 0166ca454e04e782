package daemon

import (
	"context"
	"os"
	"testing"

	"github.com/logist/logist/internal/pgtest"
	"github.com/logist/logist/internal/sandbox"
)

// TestMain lets this test binary be the sandbox's launcher and helper, as
// logistd is: the daemon under test contains its jobs' processes.
// With LOGISTD_TEST_MAIN=1 it is logistd itself (runAsNobody).
func TestMain(m *testing.M) {
	sandbox.Helper()
	if os.Getenv("LOGISTD_TEST_MAIN") == "1" {
		os.Exit(Main(context.Background(), os.Args, os.Getenv, os.Stdout, os.Stderr))
	}
	code := m.Run()
	pgtest.Stop() // the cluster tests' database server
	os.Exit(code)
}
