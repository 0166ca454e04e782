// Command logistd supervises the AI-agent jobs in a jobs folder.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/logist/logist/internal/daemon"
	"github.com/logist/logist/internal/sandbox"
)

func main() {
	// A sandboxed call's launcher and in-sandbox helper are this binary
	// run again with a helper verb: they run and exit here.
	sandbox.Helper()
	// Non-dumpable: no other process of this user can read the daemon's
	// environment (API keys) or memory through /proc.
	sandbox.HideProcess()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(daemon.Main(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr))
}
