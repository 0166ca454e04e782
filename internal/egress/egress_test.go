package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/joblog"
)

// fakeDNS maps names to addresses.
type fakeDNS map[string][]netip.Addr

func (f fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

type logBuf struct {
	mu sync.Mutex
	sb strings.Builder
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.Write(p)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.String()
}

// world is a proxy whose "Internet" is local test servers: public names
// resolve to documentation addresses, and dialing one of those reaches
// the test server that plays it.
type world struct {
	t      *testing.T
	p      *Proxy
	root   string
	logs   *logBuf
	public netip.Addr // plays the Internet host
	server *httptest.Server
	port   int
	daemon netip.AddrPort // the daemon's own listener (refused always)
	mu     sync.Mutex
	dialed []string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, logs: &logBuf{}, public: netip.MustParseAddr("203.0.113.7")}
	w.server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(rw, "hello from %s", r.Host)
	}))
	t.Cleanup(w.server.Close)
	srvAddr := netip.MustParseAddrPort(w.server.Listener.Addr().String())
	w.port = int(srvAddr.Port())
	daemon, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { daemon.Close() })
	w.daemon = netip.MustParseAddrPort(daemon.Addr().String())
	dns := fakeDNS{
		"example.test":   {w.public},
		"rebind.test":    {netip.MustParseAddr("127.0.0.1")},
		"metadata.test":  {netip.MustParseAddr("169.254.169.254")},
		"daemon.test":    {netip.MustParseAddr("127.0.0.1")},
		"private.test":   {netip.MustParseAddr("10.1.2.3")},
		"mixed.test":     {netip.MustParseAddr("127.0.0.1"), w.public},
		"v6loop.test":    {netip.MustParseAddr("::1")},
		"mapped.test":    {netip.MustParseAddr("::ffff:127.0.0.1")},
		"unspecif.test":  {netip.MustParseAddr("0.0.0.0")},
		"ula.test":       {netip.MustParseAddr("fd00:ec2::254")},
		"cgnat.test":     {netip.MustParseAddr("100.100.100.200")},
		"multicast.test": {netip.MustParseAddr("224.0.0.1")},
	}
	d := &net.Dialer{}
	w.p = New(Config{Resolver: dns, Deny: []netip.AddrPort{w.daemon},
		Logger: slog.New(slog.NewJSONHandler(w.logs, nil)),
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			w.mu.Lock()
			w.dialed = append(w.dialed, addr)
			w.mu.Unlock()
			ap := netip.MustParseAddrPort(addr)
			if ap.Addr() == w.public {
				addr = netip.AddrPortFrom(srvAddr.Addr(), ap.Port()).String()
			}
			return d.DialContext(ctx, network, addr)
		}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: w.p}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	w.root = "http://" + ln.Addr().String()
	return w
}

func (w *world) issue(allow ...string) string {
	w.t.Helper()
	es, err := ParseAllow(allow)
	if err != nil {
		w.t.Fatal(err)
	}
	tok, err := w.p.Issue(Grant{Job: "j", Call: "000007", Role: "worker", Allow: es})
	if err != nil {
		w.t.Fatal(err)
	}
	return tok
}

// get fetches target through the proxy as a client configured with
// HTTP_PROXY would: plain HTTP in absolute form.
func (w *world) get(tok, target string) (int, string) {
	w.t.Helper()
	pu, _ := url.Parse(ProxyURL(w.root, tok))
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	resp, err := c.Get(target)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// connect opens a CONNECT tunnel to hostport and speaks HTTP through it,
// as a client configured with HTTPS_PROXY does (TLS aside).
func (w *world) connect(tok, hostport string) (int, string) {
	w.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(w.root, "http://"))
	if err != nil {
		w.t.Fatal(err)
	}
	defer c.Close()
	req, _ := http.NewRequest(http.MethodConnect, "", nil)
	req.Host = hostport
	req.URL = &url.URL{Host: hostport}
	pu, _ := url.Parse(ProxyURL(w.root, tok))
	pw, _ := pu.User.Password()
	req.SetBasicAuth(pu.User.Username(), pw)
	req.Header.Set("Proxy-Authorization", req.Header.Get("Authorization"))
	req.Header.Del("Authorization")
	if err := req.Write(c); err != nil {
		w.t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		w.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", hostport)
	in, err := http.ReadResponse(br, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	b, _ := io.ReadAll(in.Body)
	return in.StatusCode, string(b)
}

func TestListedHostReachable(t *testing.T) {
	w := newWorld(t)
	hp := "example.test:" + strconv.Itoa(w.port)
	tok := w.issue(hp)
	if code, body := w.connect(tok, hp); code != 200 || !strings.Contains(body, "hello from") {
		t.Errorf("CONNECT %s: %d %q", hp, code, body)
	}
	if code, body := w.get(tok, "http://"+hp+"/x"); code != 200 || body != "hello from "+hp {
		t.Errorf("GET http://%s: %d %q", hp, code, body)
	}
	// "*.test" lists every subdomain of test at that port, not test itself.
	if code, _ := w.connect(w.issue("*.test:"+strconv.Itoa(w.port)), hp); code != 200 {
		t.Errorf("CONNECT %s with *.test listed: %d", hp, code)
	}
	if _, err := w.p.Check(context.Background(), []Entry{{Host: "*.test", Port: w.port}}, "test", w.port); err == nil {
		t.Error("*.test let the bare domain through")
	}
	// A name that resolves to both a host address and a public one is
	// dialed at the public one only.
	mixed := "mixed.test:" + strconv.Itoa(w.port)
	if code, _ := w.connect(w.issue(mixed), mixed); code != 200 {
		t.Errorf("CONNECT %s: %d", mixed, code)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range w.dialed {
		if !strings.HasPrefix(d, w.public.String()+":") {
			t.Errorf("dialed %s, want only the public address", d)
		}
	}
}

func TestUnlistedRefused(t *testing.T) {
	w := newWorld(t)
	port := strconv.Itoa(w.port)
	tok := w.issue("example.test:" + port)
	for _, hp := range []string{"example.test:22", "other.test:" + port, w.public.String() + ":" + port} {
		if code, body := w.connect(tok, hp); code != http.StatusForbidden || !strings.Contains(body, codes.EgressRefused) {
			t.Errorf("CONNECT %s: %d %q, want refused", hp, code, body)
		}
	}
	if code, _ := w.get(tok, "http://other.test:"+port+"/"); code != http.StatusForbidden {
		t.Errorf("GET unlisted: %d", code)
	}
	// Each refusal is kept for the call's record, a destination once with
	// its count, and its first logged with the job and the call (seed 004
	// §7); the summary says how many were refused in all.
	refused := w.p.Revoke(tok)
	if len(refused.Kept) != 3 || refused.Total != 4 || refused.Kept[0].Host != "example.test" || refused.Kept[0].Port != 22 ||
		refused.Kept[0].Count != 1 || refused.Kept[1].Host != "other.test" || refused.Kept[1].Count != 2 {
		t.Errorf("refusals %+v", refused)
	}
	lines := joblog.Lines([]byte(w.logs.String()))
	if len(lines) != 4 || !strings.Contains(fmt.Sprint(lines[3]["msg"]), "refused 4 connections") {
		t.Fatalf("%d log lines, want 3 and a summary:\n%s", len(lines), w.logs.String())
	}
	for _, l := range lines {
		if err := joblog.Check(l); err != nil {
			t.Errorf("%v: %v", err, l)
		}
		if l["job_id"] != "j" || l["call"] != "000007" || l["actor"] != "worker" || l["error_code"] != codes.EgressRefused {
			t.Errorf("log line %v", l)
		}
	}
	// A revoked token, or none, gets nothing.
	if code, _ := w.connect(tok, "example.test:"+port); code != http.StatusProxyAuthRequired {
		t.Errorf("revoked token: %d", code)
	}
	if code, _ := w.connect("", "example.test:"+port); code != http.StatusProxyAuthRequired {
		t.Errorf("no token: %d", code)
	}
}

// A listed name that resolves to an address of the host or a private
// network (DNS rebinding to the daemon, a metadata service) is refused
// unless the list names that literal address too.
func TestNameResolvingInsideRefused(t *testing.T) {
	w := newWorld(t)
	port := strconv.Itoa(w.port)
	for _, name := range []string{"rebind", "metadata", "private", "v6loop", "mapped", "unspecif", "ula", "cgnat", "multicast"} {
		hp := name + ".test:" + port
		if code, body := w.connect(w.issue(hp), hp); code != http.StatusForbidden || !strings.Contains(body, "private network") {
			t.Errorf("CONNECT %s: %d %q, want refused", hp, code, body)
		}
	}
	hp := "rebind.test:" + port
	tok := w.issue(hp, "127.0.0.1:"+port)
	if code, body := w.connect(tok, hp); code != 200 || !strings.Contains(body, "hello from") {
		t.Errorf("CONNECT %s with its address listed: %d %q", hp, code, body)
	}
	if code, _ := w.connect(tok, "127.0.0.1:"+port); code != 200 {
		t.Errorf("CONNECT the listed literal address: %d", code)
	}
}

// The daemon's own listener is refused even when the list names it.
func TestDaemonPortRefused(t *testing.T) {
	w := newWorld(t)
	dp := strconv.Itoa(int(w.daemon.Port()))
	tok := w.issue("127.0.0.1:"+dp, "daemon.test:"+dp, "localhost:"+dp)
	for _, hp := range []string{"127.0.0.1:" + dp, "daemon.test:" + dp, "[::ffff:127.0.0.1]:" + dp} {
		if code, body := w.connect(tok, hp); code != http.StatusForbidden || !strings.Contains(body, codes.EgressRefused) {
			t.Errorf("CONNECT %s: %d %q, want refused", hp, code, body)
		}
	}
}

func TestParseAllow(t *testing.T) {
	es, err := ParseAllow([]string{"Registry.NPMJS.org", "github.com:22", "10.0.0.5:8080", "[::1]:80", "host.example.:8443"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{Host: "registry.npmjs.org", Port: 443}, {Host: "github.com", Port: 22},
		{IP: netip.MustParseAddr("10.0.0.5"), Port: 8080}, {IP: netip.MustParseAddr("::1"), Port: 80}, {Host: "host.example", Port: 8443}}
	if fmt.Sprint(es) != fmt.Sprint(want) {
		t.Errorf("entries %v\nwant %v", es, want)
	}
	for _, bad := range []string{"host:0", "host:70000", "host:x", ":443", "a:b:c"} {
		if _, err := ParseAllow([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Loopback destinations, which a manifest may not list (agent.
// CheckNetworkAllow): addresses of 127/8 and ::1 (mapped too) and localhost.
func TestEntryLoopback(t *testing.T) {
	t.Parallel()
	es, err := ParseAllow([]string{"127.0.0.1:18080", "127.1.2.3:80", "[::1]:11434", "[::ffff:127.0.0.1]:80", "localhost:11434",
		"LocalHost.", "api.localhost:8080", "10.0.0.5:11434", "api.openai.com", "localhost.example.com", "[::2]:80"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, true, true, true, true, true, false, false, false, false} {
		if got := es[i].Loopback(); got != want {
			t.Errorf("%+v: Loopback %v, want %v", es[i], got, want)
		}
	}
}

// TestRefusalsBounded: an agent looping on refused connections, to a few
// destinations again and again and to ever new ones, leaves the proxy at
// most MaxRefusals destinations to hold and as many log lines plus one
// summary, and every attempt counted.
func TestRefusalsBounded(t *testing.T) {
	w := newWorld(t)
	tok := w.issue("example.test:" + strconv.Itoa(w.port))
	pu, _ := url.Parse(ProxyURL(w.root, tok))
	pw, _ := pu.User.Password()
	c, err := net.Dial("tcp", strings.TrimPrefix(w.root, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	const n = 5000
	long := strings.Repeat("a", 4000) + ".test:443" // a host no DNS name is
	for i := range n {
		hp := fmt.Sprintf("again%d.test:443", i%3) // three, over and over
		switch {
		case i%2 == 1:
			hp = fmt.Sprintf("new%d.test:443", i) // a new one each time
		case i == 10:
			hp = long
		}
		// One keep-alive connection: a 403 leaves it open for the next.
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", hp, hp,
			base64.StdEncoding.EncodeToString([]byte("logist:"+pw)))
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatalf("CONNECT %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("CONNECT %s: %d, want refused", hp, resp.StatusCode)
		}
	}
	w.p.mu.Lock()
	held := len(w.p.calls[tok].refused.Kept)
	w.p.mu.Unlock()
	if held > MaxRefusals {
		t.Errorf("the call holds %d refusals, more than %d", held, MaxRefusals)
	}
	r := w.p.Revoke(tok)
	if r.Total != n || len(r.Kept) != MaxRefusals {
		t.Fatalf("total %d, %d kept; want %d, %d", r.Total, len(r.Kept), n, MaxRefusals)
	}
	counted := 0
	for _, f := range r.Kept {
		counted += f.Count
		if len(f.Host) > maxText+len("…") || len(f.Reason) > maxText+len("…") {
			t.Errorf("a kept refusal of %d, %d bytes", len(f.Host), len(f.Reason))
		}
	}
	if r.Kept[0].Host != "again0.test" || r.Kept[0].Count != 834 || r.Dropped() != n-counted {
		t.Errorf("first kept %+v, dropped %d", r.Kept[0], r.Dropped())
	}
	lines := joblog.Lines([]byte(w.logs.String()))
	if len(lines) != MaxRefusals+1 {
		t.Fatalf("%d log lines, want one per kept destination and a summary", len(lines))
	}
	if last := lines[len(lines)-1]; !strings.Contains(fmt.Sprint(last["msg"]), "refused 5000 connections") {
		t.Errorf("summary %v", last)
	}

	// The refusals of a call's several runs add up under the same bound.
	var sum Refused
	sum.Merge(r)
	sum.Merge(Refused{Kept: []Refusal{{Host: "again0.test", Port: 443, Reason: "x", Count: 2}, {Host: "other.test", Port: 80, Count: 1}}, Total: 7})
	if sum.Total != n+7 || len(sum.Kept) != MaxRefusals || sum.Kept[0].Count != 836 || sum.Dropped() != r.Dropped()+5 {
		t.Errorf("merged: total %d, first %+v, dropped %d", sum.Total, sum.Kept[0], sum.Dropped())
	}
}
