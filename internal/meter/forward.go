package meter

// Forwarding to the provider: the upstream request, the response passed
// on, and the bounds on it (encodings, silence, secrets in errors).

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/secrets"
)

// upstreamRequest builds the request to the provider.
func upstreamRequest(ctx context.Context, r *http.Request, rt route, up Upstream, body []byte, query url.Values) (*http.Request, error) {
	u := strings.TrimRight(up.BaseURL, "/") + rt.path
	if q := query.Encode(); q != "" {
		u += "?" + q
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = upstreamHeader(r.Header, up)
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	return req, nil
}

// forwardFree forwards a request that costs nothing (a model list, a token
// count, a probe): its response is passed on within the size bound.
func (p *Proxy) forwardFree(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call, rt route, up Upstream, body []byte, query url.Values, hidden []string) {
	req, err := upstreamRequest(ctx, r, rt, up, body, query)
	if err == nil {
		var resp *http.Response
		if resp, err = c.transport(p.cfg.Transport, up).RoundTrip(req); err == nil {
			defer resp.Body.Close() //nolint:errcheck // a response body, read only
			p.copyResponse(w, c, rt.family, resp, hidden)
			return
		}
	}
	if ctx.Err() == nil {
		p.fail(w, c, rt.family, http.StatusBadGateway, codes.UpstreamFailed, "", "the provider could not be reached: "+redact(err.Error(), hidden))
	}
}

// copyResponse passes a response on as it is (decoded), within the size
// bound: an error status, or a free endpoint's answer. A redirect is not
// passed on (redirected). The secrets the proxy sent upstream (hidden: the
// real key, headers_env's values) are redacted from its headers and body:
// a provider's 401 that quotes the key it was given ("Incorrect API key
// provided: sk-…") handed the agent the key it must never see.
func (p *Proxy) copyResponse(w http.ResponseWriter, c *call, f Family, resp *http.Response, hidden []string) {
	if resp.StatusCode/100 == 3 {
		p.fail(w, c, f, http.StatusBadGateway, codes.UpstreamFailed, "", redirected(resp))
		return
	}
	body, err := decodedBody(resp)
	if err != nil {
		p.fail(w, c, f, http.StatusBadGateway, codes.ResponseUnmeterable, "", err.Error())
		return
	}
	// Not metered: a provider gone midway leaves what it sent.
	data, _ := io.ReadAll(io.LimitReader(body, p.cfg.MaxResponseBytes))
	h := w.Header()
	clientHeader(h, resp.Header)
	for _, vs := range h {
		for i, v := range vs {
			vs[i] = redact(v, hidden)
		}
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(p.cfg.WriteTimeout)) // the server's writers support it
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write([]byte(redact(string(data), hidden))) // a client gone midway leaves nobody to tell
}

// forwardMetered sends a metered request and meters its response: a
// stream event by event (cut once the budget is spent), a whole response
// when it arrives. It reports whether the client's connection must be
// broken off (a stream that was cut, broke, or whose call was revoked).
func (p *Proxy) forwardMetered(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, r *http.Request, c *call, rt route, up Upstream, x *exchange, price manifest.Price, hidden []string) (abort bool) {
	started := time.Now()
	outcome, logged := "", false // logged: fail already logged the outcome
	refused := 0                 // the provider's status when it refused the request
	defer func() {
		if !logged {
			p.logExchange(c, x, outcome, refused, time.Since(started))
		}
	}()
	upCtx, upCancel := context.WithCancel(ctx)
	defer upCancel()
	req, err := upstreamRequest(upCtx, r, rt, up, x.body, x.query)
	if err != nil {
		logged = true
		p.fail(w, c, rt.family, http.StatusBadGateway, codes.UpstreamFailed, x.model, redact(err.Error(), hidden))
		return false
	}
	c.started(x.model)
	resp, err := c.transport(p.cfg.Transport, up).RoundTrip(req)
	if err != nil {
		c.upstreamError()
		if ctx.Err() != nil {
			// The agent went away or the call was revoked: nobody to tell.
			outcome = codes.ClientGone
			if c.ctx.Err() != nil {
				outcome = codes.CallRevoked
			}
			return false
		}
		logged = true
		status := http.StatusBadGateway
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			status = http.StatusGatewayTimeout
		}
		p.fail(w, c, rt.family, status, codes.UpstreamFailed, x.model, "the provider could not be reached: "+redact(err.Error(), hidden))
		return false
	}
	defer resp.Body.Close() //nolint:errcheck // a response body, read only
	if resp.StatusCode/100 != 2 {
		// Providers do not bill a request they refused.
		c.upstreamError()
		outcome, refused = codes.UpstreamRefused, resp.StatusCode
		p.copyResponse(w, c, rt.family, resp, hidden)
		return false
	}
	body, err := decodedBody(resp)
	if err != nil {
		// Paid for, but unreadable: charged as estimated, not passed on.
		x.settle(c, price)
		c.ended(false, true)
		logged = true
		p.fail(w, c, rt.family, http.StatusBadGateway, codes.ResponseUnmeterable, x.model, err.Error())
		return false
	}
	idle := newIdleReader(body, p.cfg.IdleTimeout, upCancel)
	defer idle.stop()
	cw := &clientWriter{ctx: ctx, w: w, rc: rc, timeout: p.cfg.WriteTimeout}
	if strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream") {
		outcome = p.stream(cw, c, x, price, resp, idle)
		// A stream that did not end well must not look complete.
		abort = outcome != ""
	} else {
		// A whole response was passed on, or an error was answered (and
		// logged).
		outcome = p.whole(cw, c, x, price, resp, idle)
		logged = outcome == codes.ResponseUnmeterable || outcome == codes.UpstreamFailed
	}
	switch {
	case outcome == "" || outcome == codes.BudgetSpent:
	case c.ctx.Err() != nil:
		outcome = codes.CallRevoked
	case idle.fired():
		outcome = codes.UpstreamIdleTimeout
	}
	return abort
}

// redirected says why a provider's redirect is refused. The agent's HTTP
// client would follow it (Go's, Node's, Python's do) to wherever Location
// points: its request, prompt and all, would go past the proxy to a host
// the steward never named, and whatever answered there would reach the
// job unmetered. The steward points the base URL at the API instead.
func redirected(resp *http.Response) string {
	where := "no Location"
	if loc := resp.Header.Get("Location"); loc != "" {
		if u, err := url.Parse(loc); err == nil {
			loc = u.Redacted()
		}
		if len(loc) > 120 {
			loc = loc[:120] + "…"
		}
		where = fmt.Sprintf("Location %q", loc)
	}
	return fmt.Sprintf("the provider answered HTTP %d, a redirect (%s), not passed on (it leads past the metering): "+
		"set the base URL to the API's own address", resp.StatusCode, where)
}

// decodedBody is a response's body with its content encoding undone (the
// proxy asks for identity; a server may send gzip or deflate anyway).
func decodedBody(resp *http.Response) (io.Reader, error) {
	switch enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return resp.Body, nil
	case "gzip":
		return gzip.NewReader(resp.Body)
	case "deflate":
		return zlib.NewReader(resp.Body)
	default:
		return nil, fmt.Errorf("the provider answered in encoding %q, which the proxy cannot read for usage", enc)
	}
}

// redact removes secrets (the real key, the agent's credentials) from a
// message before it is logged or shown; a value too short to redact
// (secrets.Redactable) is left, as it would rewrite the text around it.
func redact(s string, values []string) string {
	for _, v := range values {
		if secrets.Redactable(v) {
			s = strings.ReplaceAll(s, v, "[REDACTED]")
		}
	}
	return s
}

// idleReader ends the upstream request when the upstream is silent for
// longer than the idle timeout.
type idleReader struct {
	r     io.Reader
	d     time.Duration
	t     *time.Timer
	timed atomic.Bool
}

func newIdleReader(r io.Reader, d time.Duration, cancel context.CancelFunc) *idleReader {
	ir := &idleReader{r: r, d: d}
	ir.t = time.AfterFunc(d, func() {
		ir.timed.Store(true)
		cancel()
	})
	return ir
}

func (ir *idleReader) Read(b []byte) (int, error) {
	n, err := ir.r.Read(b)
	if !ir.timed.Load() {
		ir.t.Reset(ir.d)
	}
	return n, err
}

func (ir *idleReader) stop()       { ir.t.Stop() }
func (ir *idleReader) fired() bool { return ir.timed.Load() }
