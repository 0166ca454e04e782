//go:build race

package sandbox

import (
	"os"
	"strings"
)

// launcherEnv is the launcher's environment. In a race build (the
// tests') it is the race runtime's options, with its sleep at exit off:
// by default (GORACE atexit_sleep_ms) a race-built process sleeps a
// second before it exits, and every call waits for its launcher's exit.
func launcherEnv() []string {
	return []string{"GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")}
}
