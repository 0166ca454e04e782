package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/logist/logist/internal/console"
	"github.com/logist/logist/internal/secrets"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/steward"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// tokenFileLine logs the console token file logistd keeps when no token
// file is given: made at the first start, read at the next ones.
const tokenFileLine = "console steward token: log in with the token this file holds (made once, kept across restarts)"

// serve answers on addr: /metrics, /healthz, /readyz, with --pprof
// /debug/pprof/, and the steward console at / and /api/v1/.
func (d *Daemon) serve(addr string, reg *prometheus.Registry, st *steward.Steward) (*http.Server, error) {
	co := d.opts.Console
	useTLS := co.TLSCert != "" || co.TLSKey != ""
	if err := d.opts.checkListen(); err != nil {
		return nil, err
	}
	tokens, generated, err := console.LoadTokens(d.store.Dir, co.TokenFile, co.ViewerTokenFile)
	if err != nil {
		return nil, err
	}
	if generated != "" {
		d.log.Info(tokenFileLine, "token_file", generated)
	}
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
		scan := "start-up scan complete"
		select {
		case <-d.scanDone:
		default:
			scan = "start-up scan under way (job gauges incomplete)"
		}
		fmt.Fprintln(w, "ready: watcher running, history writable; "+scan)
	})
	cons := console.New(console.Options{Store: d.store, Steward: st, Logger: d.log, Tokens: tokens,
		Disabled: co.Disable, Secure: useTLS, Changed: func(id string) { d.sched.Nudge(id) },
		ContentKey: secrets.KeyPath(d.store.Dir, signing.Dir, d.opts.Getenv)})
	if d.opts.Pprof {
		// The daemon's command line, memory and traces: the steward's
		// alone, as the console's actions are (console.Guard).
		mux.Handle("/debug/pprof/", cons.Guard(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/cmdline", cons.Guard(http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", cons.Guard(http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", cons.Guard(http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", cons.Guard(http.HandlerFunc(pprof.Trace)))
	}
	mux.Handle("/", cons)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		// Serve ends with ErrServerClosed when the daemon closes it;
		// anything else leaves /metrics and the probes dead: say so.
		serve := func() error { return srv.Serve(ln) }
		if useTLS {
			serve = func() error { return srv.ServeTLS(ln, co.TLSCert, co.TLSKey) }
		}
		if err := serve(); !errors.Is(err, http.ErrServerClosed) {
			d.log.Warn("HTTP server stopped; /metrics, /healthz and /readyz no longer answer", "err", err.Error())
		}
	}()
	d.log.Info("listening", "addr", ln.Addr().String(), "console", consoleURL(ln.Addr().String(), useTLS))
	return srv, nil
}

// notReady says why the daemon is not ready, or "" when it is: the
// watcher runs (new work is picked up; the start-up scan may still be
// under way), and a file can be written and fsync'd where histories live.
func (d *Daemon) notReady() string {
	if !d.ready.Load() {
		return "starting"
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

// consoleURL is where the console answers on addr.
func consoleURL(addr string, useTLS bool) string {
	if useTLS {
		return "https://" + addr + "/"
	}
	return "http://" + addr + "/"
}
