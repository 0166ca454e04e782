package pgtest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

var (
	shared     *Server
	sharedErr  error
	sharedOnce sync.Once
	dbCount    atomic.Int64
)

// Main runs a package's tests and then stops the server they shared
// (call it from TestMain).
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the shared server, if one was started (for a TestMain that
// cannot use Main).
func Stop() {
	if shared != nil {
		_ = shared.Stop()
		shared = nil
	}
}

// DB returns the URL of a fresh, empty database on the package's shared
// server (started on first use). Without PostgreSQL the test skips loudly;
// with CI=true it fails instead.
func DB(t testing.TB) string {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = Start(context.Background()) })
	if sharedErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL unavailable under CI=true: %v", sharedErr)
		}
		t.Skipf("SKIP (loud): PostgreSQL unavailable, cluster test not run: %v", sharedErr)
	}
	name := fmt.Sprintf("t%d_%s", dbCount.Add(1), nonWord.ReplaceAllString(strings.ToLower(t.Name()), "_"))
	if len(name) > 60 {
		name = name[:60]
	}
	url, err := shared.NewDatabase(context.Background(), name)
	if err != nil {
		t.Fatalf("create database: %v", err)
	}
	return url
}

var nonWord = regexp.MustCompile(`[^a-z0-9_]+`)
