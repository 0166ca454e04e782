package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serve answers on addr: /metrics, /healthz, /readyz, and with --pprof
// /debug/pprof/.
func (d *Daemon) serve(addr string, reg *prometheus.Registry) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if problem := d.notReady(); problem != "" {
			http.Error(w, problem, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready: jobs folder loaded, watcher running, history writable")
	})
	if d.opts.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		// Serve ends with ErrServerClosed when the daemon closes it;
		// anything else leaves /metrics and the probes dead: say so.
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			d.log.Warn("HTTP server stopped; /metrics, /healthz and /readyz no longer answer", "err", err.Error())
		}
	}()
	d.log.Info("listening", "addr", ln.Addr().String())
	return srv, nil
}

// notReady says why the daemon is not ready, or "" when it is: the jobs
// folder has been loaded, the watcher runs, and a file can be written and
// fsync'd where histories live.
func (d *Daemon) notReady() string {
	if !d.ready.Load() {
		return "loading jobs folder"
	}
	if !d.opts.Once && d.watcher == nil {
		return "watcher not running"
	}
	f, err := os.CreateTemp(d.store.Dir, ".readyz-*")
	if err != nil {
		return "history not writable: " + err.Error()
	}
	defer os.Remove(f.Name()) //nolint:errcheck // the probe's scratch file
	defer f.Close()           //nolint:errcheck // the fsync below is the probe
	if _, err := f.Write([]byte("ok")); err != nil {
		return "history not writable: " + err.Error()
	}
	if err := f.Sync(); err != nil {
		return "history not writable: " + err.Error()
	}
	return ""
}
