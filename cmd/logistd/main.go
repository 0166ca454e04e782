// Command logistd supervises the AI-agent jobs in a jobs folder.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/logist/logist/internal/daemon"
	"github.com/logist/logist/internal/sandbox"
)

func main() {
	// A sandboxed call's launcher and in-sandbox helper are this binary
	// run again with a helper verb: they run and exit here.
	sandbox.Helper()
	// Non-dumpable: no other process of this user can read the daemon's
	// environment (API keys) or memory through /proc. docs/security.md
	// promises it: a daemon that cannot be made so does not start.
	if err := sandbox.HideProcess(); err != nil {
		fmt.Fprintf(os.Stderr, "logistd: make the process non-dumpable: %v\n", err)
		os.Exit(1)
	}
	os.Exit(run())
}

// run is main's body, so that its deferred stop runs before os.Exit.
func run() int {
	// SIGTERM, SIGINT and SIGHUP stop it gracefully; a second one during
	// the grace period stops waiting (daemon.StopSignals).
	ctx, stop := daemon.SignalContext(context.Background())
	defer stop()
	return daemon.Main(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
}
