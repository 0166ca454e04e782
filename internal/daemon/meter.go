package daemon

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/meter"
)

// meterProxy is the daemon's metering proxy (one per daemon): every model
// request of an agent call goes through it, with a token of the call in
// place of the real key (docs/metering.md). It listens on a unix socket
// in a private runtime folder, which a contained call's sandbox binds in
// (nothing else of that folder is visible to any call), and on a loopback
// port for what shares the daemon's network: uncontained runs, the http
// provider, and jobs on the host network.
type meterProxy struct {
	p      *meter.Proxy
	socket string
	dir    string
	agents agent.Meter
	port   int
}

// startMeter starts the proxy. Its grants bring their own upstreams (the
// agent's base URL or the provider's public API, with the steward's key),
// priced by the table the daemon loaded (--prices).
// File mode and cluster nodes start it alike (one proxy per logistd).
func startMeter(log *slog.Logger) (*meterProxy, error) {
	p, err := meter.New(meter.Config{Logger: log})
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "logistd-meter-")
	if err != nil {
		return nil, fmt.Errorf("metering proxy: %w", err)
	}
	m := &meterProxy{p: p, dir: dir, socket: filepath.Join(dir, "meter.sock")}
	unix, err := meter.ListenUnix(m.socket)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("metering proxy: %w", err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = unix.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("metering proxy: %w", err)
	}
	m.port = tcp.Addr().(*net.TCPAddr).Port
	m.agents = p.ForAgents("http://" + tcp.Addr().String())
	for _, ln := range []net.Listener{unix, tcp} {
		go func() {
			if err := p.Serve(ln); err != nil {
				log.Error("metering proxy stopped serving", "error", err.Error())
			}
		}()
	}
	log.Info("metering proxy listening", "socket", m.socket, "addr", tcp.Addr().String())
	return m, nil
}

// close stops the proxy (calls in flight are ended) and removes its folder.
func (m *meterProxy) close() {
	_ = m.p.Close()
	_ = os.RemoveAll(m.dir)
}
