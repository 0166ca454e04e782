// Package meter is the metering proxy that every agent's model traffic goes
// through. It exists because an agent that holds the real API key, or talks
// to the provider directly, can spend without limit and report whatever cost
// it likes. Instead, each agent call gets a token of its own as its "API
// key"; the proxy maps the token to the call's job and policy, injects the
// real key upstream, reads the provider's own usage fields as the response
// streams through, prices them with the price table (internal/agent), debits
// the job's Budget as it goes and cuts the stream once the budget is spent.
// Its figures (Totals) are the call's cost of record.
//
// It speaks Anthropic Messages, OpenAI Chat Completions and Responses, and
// Gemini generateContent/streamGenerateContent, streaming (SSE) or not.
// Each API is one file (api_*.go) that reads its own usage fields; the rest
// (routing, credentials, forwarding, the stream loop, accounting) is shared.
// docs/metering.md explains the design, the overshoot bound and what is and
// is not metered.
package meter

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/manifest"
)

// Family is a provider's wire family: which APIs an upstream speaks and how
// its key is presented.
type Family string

// The families the proxy speaks.
const (
	// Anthropic speaks Messages (/v1/messages); the key goes in x-api-key.
	Anthropic Family = "anthropic"
	// OpenAI speaks Chat Completions and Responses (also OpenAI-compatible
	// servers); the key goes in Authorization: Bearer.
	OpenAI Family = "openai"
	// Gemini speaks generateContent and streamGenerateContent; the key goes
	// in x-goog-api-key (never in the URL, where an error message could
	// carry it into a log).
	Gemini Family = "gemini"
)

// Upstream is a provider the proxy forwards to.
type Upstream struct {
	Family Family
	// BaseURL is what the family's SDK takes as its base URL: for example
	// https://api.anthropic.com, https://api.openai.com/v1 (an
	// OpenAI-compatible server's URL ending in /v1), or
	// https://generativelanguage.googleapis.com.
	BaseURL string
	// Key is the real API key. It never reaches an agent and is never
	// logged.
	Key string
	// Header are extra headers sent with every request (an http agent's
	// headers_env: a gateway's own credentials); like Key they replace
	// what the agent sent, never reach it and are never logged.
	Header http.Header
	// RootCAs, if set, are the certificates the upstream's TLS is checked
	// against (an http agent's ca_file added to the system's): such an
	// upstream gets a transport of its own, a clone of the proxy's.
	RootCAs *x509.CertPool
}

// Default upstream base URLs, the providers' public APIs.
const (
	AnthropicURL = "https://api.anthropic.com"
	OpenAIURL    = "https://api.openai.com/v1"
	GeminiURL    = "https://generativelanguage.googleapis.com"
)

// DefaultUpstreams are the providers' public APIs with the keys of the
// daemon's environment: "anthropic" (ANTHROPIC_API_KEY), "openai"
// (OPENAI_API_KEY) and "gemini" (GEMINI_API_KEY). A provider whose key is
// not set is left out.
func DefaultUpstreams(getenv func(string) string) map[string]Upstream {
	out := map[string]Upstream{}
	for _, d := range []struct {
		name, env string
		up        Upstream
	}{
		{"anthropic", "ANTHROPIC_API_KEY", Upstream{Family: Anthropic, BaseURL: AnthropicURL}},
		{"openai", "OPENAI_API_KEY", Upstream{Family: OpenAI, BaseURL: OpenAIURL}},
		{"gemini", "GEMINI_API_KEY", Upstream{Family: Gemini, BaseURL: GeminiURL}},
	} {
		if k := getenv(d.env); k != "" {
			d.up.Key = k
			out[d.name] = d.up
		}
	}
	return out
}

// BaseURL is the base URL to give a client of family f when the proxy is
// reached at root (such as http://127.0.0.1:PORT): Anthropic and Gemini
// SDKs append their version path themselves, OpenAI-style clients are given
// root/v1 and append /chat/completions or /responses.
func BaseURL(root string, f Family) string {
	root = strings.TrimRight(root, "/")
	if f == OpenAI {
		return root + "/v1"
	}
	return root
}

// Config configures a Proxy. Zero values take the defaults below.
type Config struct {
	// Upstreams are the providers by name; a Grant names the ones a call
	// may use.
	Upstreams map[string]Upstream
	// Prices finds a model's price (default agent.LookupPrice: the daemon's
	// overrides, then the built-in table). A Grant's own prices come first.
	Prices func(model string) (manifest.Price, bool)
	// Logger receives JSON logs; never a key, a token or a body.
	Logger *slog.Logger
	// ProxyForm, if set, takes the requests in a forward proxy's form
	// (CONNECT, or an absolute URI): the network allowlist's egress proxy
	// (internal/egress), reached by the calls the same way as this one.
	ProxyForm http.Handler
	// Transport carries upstream requests (default: a clone of
	// http.DefaultTransport, HTTP/1.1 or HTTP/2, the environment's proxy
	// settings, no transparent compression, ResponseHeaderTimeout). A
	// transport given here brings its own timeouts.
	Transport http.RoundTripper

	// MaxRequestBytes bounds a request body (default 32 MiB).
	MaxRequestBytes int64
	// MaxResponseBytes bounds a response that does not stream, and an
	// error body (default 64 MiB).
	MaxResponseBytes int64
	// MaxEventBytes bounds one server-sent event (default 16 MiB).
	MaxEventBytes int

	// ResponseHeaderTimeout bounds the wait for the upstream's response
	// headers (default 10 min: a long answer that does not stream comes
	// all at once); it configures the default Transport.
	ResponseHeaderTimeout time.Duration
	// IdleTimeout bounds a silence of the upstream in the middle of a
	// response body (default 5 min).
	IdleTimeout time.Duration
	// WriteTimeout bounds one write to the agent (default 2 min): an agent
	// that stops reading does not hold an upstream stream open.
	WriteTimeout time.Duration
	// ReadTimeout bounds reading a request's headers and body from the
	// agent (default 2 min).
	ReadTimeout time.Duration
}

// Defaults of Config.
const (
	DefaultMaxRequestBytes       = 32 << 20
	DefaultMaxResponseBytes      = 64 << 20
	DefaultMaxEventBytes         = 16 << 20
	DefaultResponseHeaderTimeout = 10 * time.Minute
	DefaultIdleTimeout           = 5 * time.Minute
	DefaultWriteTimeout          = 2 * time.Minute
	DefaultReadTimeout           = 2 * time.Minute
)

// Proxy is a running metering proxy. It is an http.Handler; Serve runs it
// on listeners (loopback TCP, unix sockets).
type Proxy struct {
	cfg Config
	log *slog.Logger
	srv *http.Server

	mu     sync.Mutex
	calls  map[tokenKey]*call
	closed bool
}

// New checks the configuration and makes a Proxy.
func New(cfg Config) (*Proxy, error) {
	for name, up := range cfg.Upstreams {
		if up.RootCAs != nil {
			return nil, fmt.Errorf("meter: upstream %q: certificates of its own are for a grant's own upstream (Grant.Own); give the proxy a Transport instead", name)
		}
		if err := checkUpstream(fmt.Sprintf("%q", name), up); err != nil {
			return nil, err
		}
	}
	if cfg.Prices == nil {
		cfg.Prices = agent.LookupPrice
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Transport == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// The proxy asks for identity encoding itself and decodes gzip if
		// a server sends it anyway.
		tr.DisableCompression = true
		tr.ForceAttemptHTTP2 = true
		tr.ResponseHeaderTimeout = orDefault(cfg.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
		cfg.Transport = tr
	}
	cfg.MaxRequestBytes = orDefault(cfg.MaxRequestBytes, DefaultMaxRequestBytes)
	cfg.MaxResponseBytes = orDefault(cfg.MaxResponseBytes, DefaultMaxResponseBytes)
	cfg.MaxEventBytes = orDefault(cfg.MaxEventBytes, DefaultMaxEventBytes)
	cfg.ResponseHeaderTimeout = orDefault(cfg.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
	cfg.IdleTimeout = orDefault(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.WriteTimeout = orDefault(cfg.WriteTimeout, DefaultWriteTimeout)
	cfg.ReadTimeout = orDefault(cfg.ReadTimeout, DefaultReadTimeout)
	p := &Proxy{cfg: cfg, log: cfg.Logger, calls: map[tokenKey]*call{}}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: cfg.ReadTimeout,
		// No ReadTimeout or WriteTimeout: responses stream for as long as
		// the model talks. Each body read and write has its own deadline.
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 1 << 20,
		ErrorLog:       slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	return p, nil
}

// checkUpstream checks an upstream's family and base URL.
func checkUpstream(name string, up Upstream) error {
	switch up.Family {
	case Anthropic, OpenAI, Gemini:
	default:
		return fmt.Errorf("meter: upstream %s: unknown family %q (anthropic, openai or gemini)", name, up.Family)
	}
	u, err := url.Parse(up.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("meter: upstream %s: base URL %q is not an http(s) URL", name, up.BaseURL)
	}
	if u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("meter: upstream %s: base URL must have no query and no user info", name)
	}
	return nil
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Serve answers requests on ln until Close; it may run on several
// listeners at once. It returns nil after Close.
func (p *Proxy) Serve(ln net.Listener) error {
	err := p.srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving, drops open connections and ends every call's
// requests in flight. Tokens stay readable (Totals, Revoke) but are refused.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	calls := make([]*call, 0, len(p.calls))
	for _, c := range p.calls {
		calls = append(calls, c)
	}
	p.mu.Unlock()
	for _, c := range calls {
		c.stop()
	}
	return p.srv.Close()
}

// Shutdown stops taking requests and waits for those in flight until ctx
// ends.
func (p *Proxy) Shutdown(ctx context.Context) error { return p.srv.Shutdown(ctx) }

// ListenUnix listens on a unix socket at path (an old socket file there is
// replaced) readable and writable by the owner only. Put it in a directory
// only the daemon can enter: the mode is set right after the socket is
// bound.
func ListenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("meter: %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("meter: %w", err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("meter: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close() // the error is Chmod's
		return nil, fmt.Errorf("meter: %w", err)
	}
	return ln, nil
}
