// Command logistd supervises the AI-agent jobs in a jobs folder.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/logist/logist/internal/daemon"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(daemon.Main(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr))
}
