package e2e

import (
	"context"

	"github.com/logist/logist/internal/daemon"
)

// signalContext is logistd's own (TERM, INT, HUP; a second one hurries).
func signalContext() (context.Context, func()) {
	return daemon.SignalContext(context.Background())
}
