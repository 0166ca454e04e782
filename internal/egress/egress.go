// Package egress is the network allowlist's filter: an HTTP forward proxy
// (CONNECT for TLS and other TCP, absolute-form requests for plain HTTP)
// through which a call reaches only the host:port pairs its job lists.
//
// Why a proxy: neither bwrap's network namespace nor Landlock can filter
// by host (Landlock limits TCP by port only, so "github.com:22" would let
// a call reach port 22 of any address, loopback included). The proxy
// resolves names itself and dials exactly the address it checked, so a
// name cannot rebind between the check and the connection; it refuses
// loopback, link-local (cloud metadata), private, unspecified and
// multicast addresses unless the list names that literal IP, and the
// daemon's own listeners always. Each refusal is kept for the call's
// record (Revoke) and logged with the job and the call (seed 004 §7),
// bounded: what an agent looping on refused connections leaves in the
// daemon's memory and log must not grow with its loop (Refused).
//
// A call proves who it is with a token of its own in the proxy URL's
// password (HTTPS_PROXY=http://logist:TOKEN@127.0.0.1:PORT), sent as
// Proxy-Authorization; a token works only for the call it was issued to.
package egress

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/joblog"
)

// Entry is one allowed destination: a host name or a literal IP, and a
// TCP port.
type Entry struct {
	Host string     // lower case, no trailing dot; "" when IP is set
	IP   netip.Addr // a literal address (valid) or none
	Port int
}

// ParseAllow reads a network allowlist: "host" (port 443), "host:port",
// "1.2.3.4:port", "[::1]:port". The one parser of the list.
func ParseAllow(list []string) ([]Entry, error) {
	out := make([]Entry, 0, len(list))
	for _, a := range list {
		host, port := a, 443
		if h, p, err := net.SplitHostPort(a); err == nil {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				return nil, fmt.Errorf("sandbox_network_allow %q: the port must be 1 to 65535", a)
			}
			host, port = h, n
		} else if strings.Contains(a, ":") && !strings.HasPrefix(a, "[") {
			if _, err := netip.ParseAddr(a); err != nil {
				return nil, fmt.Errorf("sandbox_network_allow %q: not host, host:port or [ipv6]:port", a)
			}
		}
		host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
		if host == "" {
			return nil, fmt.Errorf("sandbox_network_allow %q: no host", a)
		}
		e := Entry{Port: port}
		if ip, err := netip.ParseAddr(host); err == nil {
			e.IP = ip.Unmap()
		} else {
			e.Host = strings.ToLower(host)
		}
		out = append(out, e)
	}
	return out, nil
}

// Loopback says whether e names a loopback destination: an address of
// 127.0.0.0/8 or ::1, or localhost (or a name under .localhost).
func (e Entry) Loopback() bool {
	if e.IP.IsValid() {
		return e.IP.IsLoopback()
	}
	return e.Host == "localhost" || strings.HasSuffix(e.Host, ".localhost")
}

// Grant is what one call may reach.
type Grant struct {
	Job, Call, Role string
	Allow           []Entry
}

// Refusal is one destination a call was refused: the first reason it
// was given and how many times it was refused.
type Refusal struct {
	Host   string `json:"host"`
	Port   int    `json:"port"`
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// MaxRefusals is how many destinations a call's Refused keeps.
const MaxRefusals = 16

// maxText is the most of a host name or a reason a Refusal keeps: both
// come from the agent's request (a DNS name has at most 253 bytes).
const maxText = 512

// Refused is what a call was refused, bounded whatever the agent does:
// the first MaxRefusals distinct destinations (in the order they were
// first refused), each with its first reason and its count, and Total,
// every refused attempt, to those destinations or others.
type Refused struct {
	Kept  []Refusal `json:"kept"`
	Total int       `json:"total"`
}

// add counts one refusal and says whether it is the first of a
// destination Kept (new: logged; any other is counted only).
func (r *Refused) add(f Refusal) (kept bool) {
	r.Total += f.Count
	for i := range r.Kept {
		if r.Kept[i].Host == f.Host && r.Kept[i].Port == f.Port {
			r.Kept[i].Count += f.Count
			return false
		}
	}
	if len(r.Kept) >= MaxRefusals {
		return false
	}
	f.Host, f.Reason = clip(f.Host), clip(f.Reason)
	r.Kept = append(r.Kept, f)
	return true
}

// Merge adds what o counts to r, under the same bound: the refusals of
// the several runs of one call (its program, its tools).
func (r *Refused) Merge(o Refused) {
	kept := 0
	for _, f := range o.Kept {
		r.add(f)
		kept += f.Count
	}
	r.Total += o.Total - kept // attempts o counted without keeping them
}

// Dropped is how many refused attempts were to destinations Kept does
// not name (past MaxRefusals).
func (r Refused) Dropped() int {
	n := r.Total
	for _, f := range r.Kept {
		n -= f.Count
	}
	return n
}

func clip(s string) string {
	if len(s) <= maxText {
		return s
	}
	return strings.ToValidUTF8(s[:maxText], "") + "…"
}

// Resolver finds a name's addresses (net.DefaultResolver; tests give
// their own).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Proxy.
type Config struct {
	Resolver Resolver
	// Dial connects to the checked address (default a net.Dialer with a
	// 30 s timeout).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Deny are the daemon's own listeners (its --listen address, the
	// metering proxy's port): never reachable, even when listed. An
	// unspecified address denies the port on every address.
	Deny   []netip.AddrPort
	Logger *slog.Logger
}

// Proxy is the egress proxy. It is an http.Handler.
type Proxy struct {
	cfg   Config
	mu    sync.Mutex
	calls map[string]*call
}

type call struct {
	g       Grant
	mu      sync.Mutex
	refused Refused
}

// New makes a Proxy.
func New(cfg Config) *Proxy {
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second}
		cfg.Dial = d.DialContext
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Proxy{cfg: cfg, calls: map[string]*call{}}
}

// TokenPrefix starts every token.
const TokenPrefix = "logist-egress-"

// Issue gives a call its token.
func (p *Proxy) Issue(g Grant) (string, error) {
	if g.Job == "" {
		return "", errors.New("egress: a grant needs its job")
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("egress: %w", err)
	}
	tok := TokenPrefix + hex.EncodeToString(b[:])
	p.mu.Lock()
	p.calls[tok] = &call{g: g}
	p.mu.Unlock()
	return tok, nil
}

// Revoke ends a call's token and returns what it was refused. When more
// was refused than was logged (a destination's first refusal each), it
// logs the call's summary.
func (p *Proxy) Revoke(token string) Refused {
	p.mu.Lock()
	c := p.calls[token]
	delete(p.calls, token)
	p.mu.Unlock()
	if c == nil {
		return Refused{}
	}
	c.mu.Lock()
	r := Refused{Kept: slices.Clone(c.refused.Kept), Total: c.refused.Total}
	c.mu.Unlock()
	if r.Total > len(r.Kept) {
		joblog.Log(p.cfg.Logger, fmt.Sprintf("egress refused %d connections during the call; the first to each of %d destinations was logged",
			r.Total, len(r.Kept)), joblog.Problem{Job: c.g.Job, Actor: c.g.Role, Code: codes.EgressRefused},
			"call", c.g.Call, "refused", r.Total)
	}
	return r
}

// Agents is the proxy as the agent package's executors use it
// (agent.Egress): a token opened for each run of a call, with the job's
// allowlist, and closed with what it was refused.
type Agents struct{ P *Proxy }

// Open issues a token for call of job with allow.
func (a Agents) Open(job, call string, allow []Entry) (string, error) {
	return a.P.Issue(Grant{Job: job, Call: call, Allow: allow})
}

// Close revokes token and returns what its call was refused.
func (a Agents) Close(token string) Refused { return a.P.Revoke(token) }

// ProxyURL is the proxy URL a call is given (HTTPS_PROXY, HTTP_PROXY,
// ALL_PROXY) when the proxy is reached at root (http://127.0.0.1:PORT, or
// the sandbox's http://{proxy_addr} placeholder, which is no valid URL
// until the launcher fills it in): the token goes in as the password.
func ProxyURL(root, token string) string {
	scheme, rest, ok := strings.Cut(root, "://")
	if !ok {
		scheme, rest = "http", root
	}
	return scheme + "://logist:" + url.PathEscape(token) + "@" + strings.TrimRight(rest, "/")
}

// Deny adds a listener of the daemon's that no call may reach (its
// --listen address once it is known).
func (p *Proxy) Deny(ap netip.AddrPort) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg.Deny = append(p.cfg.Deny, ap)
}

func (p *Proxy) lookup(r *http.Request) *call {
	auth := r.Header.Get("Proxy-Authorization")
	const basic = "Basic "
	if len(auth) <= len(basic) || !strings.EqualFold(auth[:len(basic)], basic) {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(auth[len(basic):]))
	if err != nil {
		return nil
	}
	_, tok, _ := strings.Cut(string(b), ":")
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[tok]
}

// ServeHTTP takes one request of a call: CONNECT host:port, or a plain
// HTTP request in absolute form.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := p.lookup(r)
	if c == nil {
		w.Header().Set("Proxy-Authenticate", `Basic realm="logist egress"`)
		http.Error(w, "logist egress proxy: the proxy credentials are not a live call token", http.StatusProxyAuthRequired)
		return
	}
	switch {
	case r.Method == http.MethodConnect:
		p.connect(w, r, c)
	case r.URL.IsAbs() && r.URL.Scheme == "http":
		p.forward(w, r, c)
	default:
		http.Error(w, "logist egress proxy: only CONNECT and absolute http:// requests are forwarded", http.StatusBadRequest)
	}
}

// Check decides where a call may connect for host:port: the address to
// dial, or why not. The one rule of the allowlist.
func (p *Proxy) Check(ctx context.Context, allow []Entry, host string, port int) (netip.AddrPort, error) {
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	literal, err := netip.ParseAddr(host)
	isLiteral := err == nil
	if isLiteral {
		literal = literal.Unmap()
	}
	listed := func(e Entry) bool {
		if e.Port != port {
			return false
		}
		if isLiteral {
			return e.IP.IsValid() && e.IP == literal
		}
		if rest, ok := strings.CutPrefix(e.Host, "*"); ok && strings.HasPrefix(rest, ".") {
			return strings.HasSuffix(host, rest) // "*.example.com": its subdomains
		}
		return e.Host == host
	}
	ok := false
	for _, e := range allow {
		ok = ok || listed(e)
	}
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("%s is not on the job's network allowlist", net.JoinHostPort(host, strconv.Itoa(port)))
	}
	addrs := []netip.Addr{literal}
	if !isLiteral {
		if addrs, err = p.cfg.Resolver.LookupNetIP(ctx, "ip", host); err != nil || len(addrs) == 0 {
			return netip.AddrPort{}, fmt.Errorf("%s does not resolve: %v", host, err)
		}
	}
	var why error
	for _, a := range addrs {
		a = a.Unmap()
		if err := p.addrAllowed(allow, a, port); err != nil {
			why = err
			continue
		}
		return netip.AddrPortFrom(a, uint16(port)), nil
	}
	return netip.AddrPort{}, fmt.Errorf("%s: %w", host, why)
}

// addrAllowed refuses the daemon's own listeners always, and addresses
// of the host or its private networks unless the list names the literal
// address with the port.
func (p *Proxy) addrAllowed(allow []Entry, a netip.Addr, port int) error {
	p.mu.Lock()
	deny := slices.Clone(p.cfg.Deny)
	p.mu.Unlock()
	for _, d := range deny {
		da := d.Addr().Unmap()
		if int(d.Port()) == port && (da == a || da.IsUnspecified() || (da.IsLoopback() && a.IsLoopback())) {
			return fmt.Errorf("%s is the daemon's own listener", netip.AddrPortFrom(a, uint16(port)))
		}
	}
	if !internal(a) {
		return nil
	}
	for _, e := range allow {
		if e.IP.IsValid() && e.IP == a && e.Port == port {
			return nil
		}
	}
	return fmt.Errorf("resolves to %s, an address of the host or a private network, which the allowlist does not name", a)
}

// cgnat and thisNet are ranges netip has no predicate for.
var (
	cgnat   = netip.MustParsePrefix("100.64.0.0/10")
	thisNet = netip.MustParsePrefix("0.0.0.0/8")
)

// internal reports whether a is an address of the host itself or of a
// network not on the Internet: loopback, link-local (cloud metadata
// services), private, shared (CGNAT), unspecified, multicast.
func internal(a netip.Addr) bool {
	return a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() ||
		a.IsMulticast() || a.IsPrivate() || a.IsUnspecified() || cgnat.Contains(a) || thisNet.Contains(a)
}

// refuse answers 403 and counts the refusal; the first of a destination
// the call keeps is logged with the job and call (Revoke sums up the
// rest).
func (p *Proxy) refuse(w http.ResponseWriter, c *call, host string, port int, err error) {
	c.mu.Lock()
	first := c.refused.add(Refusal{Host: host, Port: port, Reason: err.Error(), Count: 1})
	c.mu.Unlock()
	if first {
		joblog.Log(p.cfg.Logger, "egress refused: "+clip(err.Error()), joblog.Problem{Job: c.g.Job, Actor: c.g.Role, Code: codes.EgressRefused},
			"call", c.g.Call, "host", clip(host), "port", port)
	}
	http.Error(w, codes.EgressRefused+": "+err.Error(), http.StatusForbidden)
}

func splitTarget(hostport string, def int) (string, int, error) {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport, def, nil //nolint:nilerr // no port: the scheme's
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", hostport)
	}
	return h, n, nil
}

// connect opens a tunnel to a checked address.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request, c *call) {
	host, port, err := splitTarget(r.Host, 443)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	to, err := p.Check(r.Context(), c.g.Allow, host, port)
	if err != nil {
		p.refuse(w, c, host, port, err)
		return
	}
	up, err := p.cfg.Dial(r.Context(), "tcp", to.String())
	if err != nil {
		http.Error(w, "logist egress proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = up.Close()
		http.Error(w, "logist egress proxy: cannot tunnel over this connection", http.StatusInternalServerError)
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		_ = conn.Close()
		_ = up.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(up, buf) // what the client sent, buffered first
		closeWrite(up)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(conn, up)
		closeWrite(conn)
		done <- struct{}{}
	}()
	<-done
	<-done
	_ = conn.Close()
	_ = up.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// hop are the hop-by-hop headers a proxy drops.
var hop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward passes a plain HTTP request to a checked address.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, c *call) {
	host, port, err := splitTarget(r.URL.Host, 80)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	to, err := p.Check(r.Context(), c.g.Allow, host, port)
	if err != nil {
		p.refuse(w, c, host, port, err)
		return
	}
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return p.cfg.Dial(ctx, "tcp", to.String()) // the checked address, whatever the URL says
		}}
	defer tr.CloseIdleConnections()
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for _, k := range hop {
		out.Header.Del(k)
	}
	resp, err := tr.RoundTrip(out)
	if err != nil {
		http.Error(w, "logist egress proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close() //nolint:errcheck // a response body, read only
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	for _, k := range hop {
		w.Header().Del(k)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
