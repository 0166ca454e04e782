package agent

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/logist/logist/internal/codes"
)

// endpointTimeout bounds the check that a model API can be reached.
const endpointTimeout = 5 * time.Second

// unreachable checks, before an agent CLI is started, that the model API
// it is pointed at (command.base_url) accepts connections, and returns the
// error when it does not (connection refused, no route, unknown host,
// nothing within endpointTimeout). Several CLIs retry a refused connection
// by themselves for one to three minutes and cannot be told not to
// (docs/agents.md, "Retries"); checking first makes an endpoint that is
// down a transient API_ERROR at once, retried by Logist's own policy, and
// nothing is started or spent. It checks nothing (nil) for a URL it cannot
// read and when the program's environment names a proxy: the program then
// does not connect to the host itself.
func unreachable(ctx context.Context, baseURL string, env []string) error {
	u, err := url.Parse(baseURL)
	if err != nil || u.Hostname() == "" || proxied(env) {
		return nil
	}
	port := u.Port()
	switch {
	case port != "":
	case u.Scheme == "http":
		port = "80"
	case u.Scheme == "https":
		port = "443"
	default:
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, endpointTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return err
	}
	// A probe: the connection carried nothing, so closing it cannot lose data.
	_ = c.Close()
	return nil
}

// proxied tells whether an environment sends a program's HTTP through a
// proxy.
func proxied(env []string) bool {
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY":
			if v != "" {
				return true
			}
		}
	}
	return false
}

// unreachableError is the call's outcome when its model API cannot be
// reached: transient, so the engine retries it with backoff.
func unreachableError(program, baseURL string, err error) *Error {
	if u, perr := url.Parse(baseURL); perr == nil {
		baseURL = u.Redacted()
	}
	return &Error{Code: codes.APIError, Transient: true,
		Msg: fmt.Sprintf("model API %s unreachable (%v); %s was not started", baseURL, err, program)}
}
