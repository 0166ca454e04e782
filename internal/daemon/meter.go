package daemon

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/egress"
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
	// egress is the network allowlist's proxy, served on the same
	// listeners (requests in a forward proxy's form).
	egress *egress.Proxy
}

// startMeter starts the proxy. Its grants bring their own upstreams (the
// agent's base URL or the provider's public API, with the steward's key),
// priced by the table the daemon loaded (--prices).
// File mode and cluster nodes start it alike (one proxy per logistd);
// listen is the daemon's --listen address, which the egress proxy denies.
func startMeter(log *slog.Logger, listen string) (*meterProxy, error) {
	eg := egress.New(egress.Config{Logger: log})
	if ap, ok := listenAddr(listen); ok {
		eg.Deny(ap)
	}
	p, err := meter.New(meter.Config{Logger: log, ProxyForm: eg})
	if err != nil {
		return nil, err
	}
	sweepMeterDirs(log, time.Now())
	dir, err := makeMeterDir()
	if err != nil {
		return nil, fmt.Errorf("metering proxy: %w", err)
	}
	m := &meterProxy{p: p, dir: dir, socket: filepath.Join(dir, meterSocket), egress: eg}
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
	eg.Deny(netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(m.port))) // the proxies themselves
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

// listenAddr is the daemon's --listen address as the egress proxy denies
// it: a host name or none is every address of the port.
func listenAddr(listen string) (netip.AddrPort, bool) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return netip.AddrPort{}, false
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 || n > 65535 {
		return netip.AddrPort{}, false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		a = netip.IPv4Unspecified()
	}
	return netip.AddrPortFrom(a, uint16(n)), true
}
