package daemon

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/console"
	"github.com/logist/logist/internal/pgstore"
	"github.com/logist/logist/internal/signing"
)

// clusterConsole is the steward console a cluster node serves on --listen
// (console.NewCluster): the whole cluster's jobs, from any node. A node
// serves no TLS, so on an address other than loopback the console is
// served only with --insecure-listen (a TLS proxy in front); without it
// the node serves /metrics and the probes alone, as before, and says so.
// nil when not served.
func clusterConsole(ctx context.Context, o Options, store *pgstore.Store, logger *slog.Logger) (http.Handler, error) {
	co := o.Console
	if err := console.CheckListen(o.Listen, false, co.InsecureListen); err != nil {
		logger.Info("console not served: " + err.Error())
		return nil, nil
	}
	if err := o.checkListen(); err != nil {
		return nil, err
	}
	tokens, generated, err := console.LoadTokens(o.JobsDir, co.TokenFile, co.ViewerTokenFile)
	if err != nil {
		return nil, err
	}
	if generated != "" {
		logger.Info(tokenFileLine, "token_file", generated)
	}
	key, err := signing.LoadOrCreate(o.JobsDir) // the node's key, registered by its Start
	if err != nil {
		return nil, err
	}
	return console.NewCluster(ctx, console.Options{Logger: logger, Tokens: tokens, Disabled: co.Disable},
		console.Cluster{Store: store, Key: key, Effects: builtins.Effects()})
}
