package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/cluster"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/metrics"
	"github.com/logist/logist/internal/pgstore"
)

// RunCluster runs this logistd as a node of a cluster (--database-url):
// jobs are claimed from the database and run in the working folder
// o.JobsDir; /metrics carries the node's and the cluster's series,
// /readyz the database's reachability. When ctx ends (SIGTERM) the node
// stops gracefully (cluster.Node.RunUntil): its calls in flight may answer
// for --grace, and a second stop signal kills them at once; it returns once its
// runs ended and their leases were given back.
func RunCluster(ctx context.Context, o Options, logger *slog.Logger) error {
	if o.Once {
		return errors.New("--once is not supported in cluster mode")
	}
	id := o.NodeID
	if id == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-id: %w", err)
		}
		id = h
	}
	store, err := pgstore.Open(ctx, o.DatabaseURL)
	if err != nil {
		return fmt.Errorf("cluster database: %w", err)
	}
	defer store.Close()
	// A node contains and meters its jobs' processes as file mode does:
	// the same proxy and the same containment, fail closed by the same
	// rules (contain.go, meter.go).
	mp, err := startMeter(logger, o.Listen)
	if err != nil {
		return err
	}
	defer mp.close()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, Version, Revision)
	// The working folder is also the node's intake folder: a manifest
	// dropped in it is submitted to the cluster, as file mode takes one.
	n := &cluster.Node{ID: id, Store: store, Dir: o.JobsDir, IntakeDir: o.JobsDir, TTL: o.Lease, MaxParallel: o.MaxParallel, Grace: o.Grace,
		Logger: logger, Effects: builtins.Effects(), Budgets: &o.Budgets, Getenv: o.Getenv,
		Contain: containment(o.Sandbox, o.outputCeiling(), logger, mp, m), Meter: mp.agents, Obs: nodeObserver{m}, Cron: m}
	if err := n.Start(ctx); err != nil {
		return err
	}
	// The start-up checks' (below) working folder, absolute as file
	// mode's (jobstore.New), and token files: the console's, if served.
	workDir, tokenFiles := jobstore.New(o.JobsDir).Dir, []string(nil)
	if o.Listen != "" {
		reg.MustRegister(newClusterCollector(n))
		ln, err := net.Listen("tcp", o.Listen)
		if err != nil {
			return fmt.Errorf("--listen %s: %w", o.Listen, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
			c, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if err := store.Pool().Ping(c); err != nil {
				http.Error(w, "cluster database unreachable: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ready: cluster database reachable")
		})
		if h, err := clusterConsole(ctx, o, store, logger); err != nil {
			return err
		} else if h != nil {
			mux.Handle("/", h)
			tokenFiles = consoleTokenFiles(o, workDir)
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				logger.Warn("HTTP server stopped; /metrics, /healthz and /readyz no longer answer", "err", err.Error())
			}
		}()
		defer func() { _ = srv.Close() }()
		logger.Info("listening", "addr", ln.Addr().String())
	}
	logger.Info("cluster node started", "node", id, "lease", o.Lease.String())
	// The working folder is an intake folder, and runs what lands in it,
	// as file mode's jobs folder does: the same checks (exposure.go).
	warnExposure(logger, workDir, tokenFiles)
	// A second stop signal (SignalContext) ends the grace at once.
	err = n.RunUntil(ctx, hurried(ctx))
	logger.Info("cluster node stopped", "node", id, "signal", stopCause(ctx))
	return err
}

// nodeObserver is a node's engine observer: the file mode's metrics of
// calls, costs, tokens, containment and history writes, less the jobs by
// status, which a node sees only while it holds a job (the cluster's are
// logist_cluster_jobs, read from the database).
type nodeObserver struct{ *metrics.Metrics }

func (nodeObserver) JobStatus(string, lifecycle.Status, lifecycle.Status) {}
