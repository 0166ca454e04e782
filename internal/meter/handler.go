package meter

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logist/logist/internal/manifest"
)

// Error codes of the proxy: in Totals.Refused, in logs, and in the code of
// the errors agents get.
const (
	CodeUnknownToken       = "TOKEN_UNKNOWN"          // 401: not a live token (never issued, revoked, proxy closed)
	CodeNotMetered         = "ENDPOINT_NOT_METERED"   // 404: an endpoint the proxy does not forward
	CodeUpstreamNotAllowed = "UPSTREAM_NOT_ALLOWED"   // 403: the grant names no upstream of the API's family
	CodeRequestInvalid     = "REQUEST_INVALID"        // 400: a body the proxy cannot read (no model, not JSON)
	CodeRequestTooLarge    = "REQUEST_TOO_LARGE"      // 413
	CodeEncoding           = "ENCODING_UNSUPPORTED"   // 415: a request body encoding other than gzip or deflate
	CodeModelNotAllowed    = "MODEL_NOT_ALLOWED"      // 403: a model the grant does not list
	CodeModelUnpriced      = "MODEL_UNPRICED"         // 400: no price known: never silently free
	CodeBudgetSpent        = "BUDGET_SPENT"           // 402 before forwarding; a cut stream
	CodeUpstreamFailed     = "UPSTREAM_FAILED"        // 502/504: the provider could not be reached or broke off
	CodeUnmeterable        = "RESPONSE_UNMETERABLE"   // 502: a response the proxy cannot read (encoding, size)
	CodeRevoked            = "CALL_REVOKED"           // a response ended because its call was revoked
	codeIdle               = "UPSTREAM_IDLE_TIMEOUT"  // the upstream fell silent mid-response
	codeClientGone         = "CLIENT_GONE"            // the agent stopped reading
	codeUpstreamBrokenBody = "UPSTREAM_STREAM_BROKEN" // the upstream's body broke off
)

// ServeHTTP takes one request of an agent: it checks the token, the route
// and the grant's policy, then forwards with the real key and meters the
// response.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, routed := match(r)
	fam := rt.family
	if !routed {
		fam = familyOf(r)
	}
	creds := credentials(r)
	c := p.lookup(creds)
	if c == nil || !c.begin() {
		p.refuse(w, nil, fam, http.StatusUnauthorized, CodeUnknownToken, "", "the API key is not a live call token (each agent call gets its own; this one was never issued or is revoked)")
		return
	}
	defer c.end()
	if !routed {
		p.refuse(w, c, fam, http.StatusNotFound, CodeNotMetered, "", fmt.Sprintf("%s %s is not an endpoint it forwards (only the model APIs it meters)", r.Method, r.URL.Path))
		return
	}
	if r.Header.Get("Upgrade") != "" {
		p.refuse(w, c, fam, http.StatusBadRequest, CodeNotMetered, "", "protocol upgrades (websockets) are not metered")
		return
	}
	up, ok := c.upstream(p.cfg.Upstreams, rt.family)
	if !ok {
		p.refuse(w, c, fam, http.StatusForbidden, CodeUpstreamNotAllowed, "", fmt.Sprintf("this call may not use the %s API", rt.family))
		return
	}

	// The request ends when the agent goes away or the call is revoked; a
	// revoked call's writes fail at once.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	rc := http.NewResponseController(w)
	var mu sync.Mutex
	handling := true
	stop := context.AfterFunc(c.ctx, func() {
		cancel()
		mu.Lock()
		defer mu.Unlock()
		if handling { // the controller is not to be used once the handler returned
			rc.SetWriteDeadline(time.Now())
		}
	})
	defer func() {
		stop()
		mu.Lock()
		handling = false
		mu.Unlock()
	}()

	body, status, code, err := p.readBody(w, r)
	if err != nil {
		p.refuse(w, c, fam, status, code, "", err.Error())
		return
	}
	query := r.URL.Query()
	query.Del("key")
	secrets := append([]string{up.Key}, creds...)
	if rt.api == nil {
		p.forwardFree(ctx, w, r, c, rt, up, body, query, secrets)
		return
	}

	x, err := rt.api.request(rt, query, body)
	if err != nil {
		p.refuse(w, c, fam, http.StatusBadRequest, CodeRequestInvalid, "", err.Error())
		return
	}
	x.api, x.family = rt.api, rt.family
	if !c.allows(x.model) {
		p.refuse(w, c, fam, http.StatusForbidden, CodeModelNotAllowed, x.model, fmt.Sprintf("this call may not use model %q", x.model))
		return
	}
	price, ok := c.price(x.model, p.cfg.Prices)
	if !ok {
		p.refuse(w, c, fam, http.StatusBadRequest, CodeModelUnpriced, x.model, fmt.Sprintf("no price is known for model %q, so its cost could not be counted; a steward sets one (the agent's price, or logistd --prices)", x.model))
		return
	}
	if _, ok := c.debit(0); !ok {
		p.refuse(w, c, fam, http.StatusPaymentRequired, CodeBudgetSpent, x.model, "the job's cost budget is spent")
		return
	}
	if abort := p.forwardMetered(ctx, w, rc, r, c, rt, up, x, price, secrets); abort {
		// The client must see a broken response, not a complete one.
		panic(http.ErrAbortHandler)
	}
}

// readBody reads the request body within the size and time bounds,
// decoding gzip and deflate. On error it gives the status and code to
// refuse with.
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, string, error) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(p.cfg.ReadTimeout))
	defer rc.SetReadDeadline(time.Time{})
	max := p.cfg.MaxRequestBytes
	var rd io.Reader = http.MaxBytesReader(w, r.Body, max)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		gz, err := gzip.NewReader(rd)
		if err != nil {
			return nil, http.StatusBadRequest, CodeRequestInvalid, fmt.Errorf("the gzip request body is unreadable: %v", err)
		}
		rd = gz
	case "deflate":
		zr, err := zlib.NewReader(rd)
		if err != nil {
			return nil, http.StatusBadRequest, CodeRequestInvalid, fmt.Errorf("the deflate request body is unreadable: %v", err)
		}
		rd = zr
	default:
		return nil, http.StatusUnsupportedMediaType, CodeEncoding, fmt.Errorf("request body encoding %q is not read (gzip, deflate or none)", enc)
	}
	b, err := io.ReadAll(io.LimitReader(rd, max+1))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig) || int64(len(b)) > max:
		return nil, http.StatusRequestEntityTooLarge, CodeRequestTooLarge, fmt.Errorf("the request body is larger than %d bytes", max)
	case err != nil:
		return nil, http.StatusBadRequest, CodeRequestInvalid, fmt.Errorf("the request body could not be read: %v", err)
	}
	return b, 0, "", nil
}

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
func (p *Proxy) forwardFree(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call, rt route, up Upstream, body []byte, query url.Values, secrets []string) {
	req, err := upstreamRequest(ctx, r, rt, up, body, query)
	if err == nil {
		var resp *http.Response
		if resp, err = p.cfg.Transport.RoundTrip(req); err == nil {
			defer resp.Body.Close()
			p.copyResponse(w, c, rt.family, resp)
			return
		}
	}
	if ctx.Err() == nil {
		p.fail(w, c, rt.family, http.StatusBadGateway, CodeUpstreamFailed, "", "the provider could not be reached: "+redact(err.Error(), secrets))
	}
}

// copyResponse passes a response on as it is (decoded), within the size
// bound: an error status, or a free endpoint's answer.
func (p *Proxy) copyResponse(w http.ResponseWriter, c *call, f Family, resp *http.Response) {
	body, err := decodedBody(resp)
	if err != nil {
		p.fail(w, c, f, http.StatusBadGateway, CodeUnmeterable, "", err.Error())
		return
	}
	clientHeader(w.Header(), resp.Header)
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(p.cfg.WriteTimeout))
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, io.LimitReader(body, p.cfg.MaxResponseBytes))
}

// forwardMetered sends a metered request and meters its response: a
// stream event by event (cut once the budget is spent), a whole response
// when it arrives. It reports whether the client's connection must be
// broken off (a stream that was cut, broke, or whose call was revoked).
func (p *Proxy) forwardMetered(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, r *http.Request, c *call, rt route, up Upstream, x *exchange, price manifest.Price, secrets []string) (abort bool) {
	started := time.Now()
	outcome := ""
	defer func() {
		p.logExchange(c, x, outcome, time.Since(started))
	}()
	upCtx, upCancel := context.WithCancel(ctx)
	defer upCancel()
	req, err := upstreamRequest(upCtx, r, rt, up, x.body, x.query)
	if err != nil {
		outcome = CodeUpstreamFailed
		p.fail(w, c, rt.family, http.StatusBadGateway, CodeUpstreamFailed, x.model, redact(err.Error(), secrets))
		return false
	}
	c.started(x.model)
	resp, err := p.cfg.Transport.RoundTrip(req)
	if err != nil {
		c.upstreamError()
		outcome = CodeUpstreamFailed
		if ctx.Err() != nil {
			// The agent went away or the call was revoked: nobody to tell.
			return false
		}
		status := http.StatusBadGateway
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			status = http.StatusGatewayTimeout
		}
		p.fail(w, c, rt.family, status, CodeUpstreamFailed, x.model, "the provider could not be reached: "+redact(err.Error(), secrets))
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		// Providers do not bill a request they refused.
		c.upstreamError()
		outcome = fmt.Sprintf("HTTP_%d", resp.StatusCode)
		p.copyResponse(w, c, rt.family, resp)
		return false
	}
	body, err := decodedBody(resp)
	if err != nil {
		// Paid for, but unreadable: charged as estimated, not passed on.
		x.settle(c, price)
		c.ended(false, true)
		outcome = CodeUnmeterable
		p.fail(w, c, rt.family, http.StatusBadGateway, CodeUnmeterable, x.model, err.Error())
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
		// A whole response was passed on, or an error was answered.
		outcome = p.whole(cw, c, x, price, resp, idle)
	}
	switch {
	case outcome == "" || outcome == CodeBudgetSpent:
	case c.ctx.Err() != nil:
		outcome = CodeRevoked
	case idle.fired():
		outcome = codeIdle
	}
	return abort
}

// stream meters a streamed response event by event: each event's usage
// (reported or estimated) is charged before the event is passed on, and
// when the budget is spent before the provider's final usage the stream
// ends with the API's error in place of that event. It returns "" for a stream that ended well, else why it
// did not.
func (p *Proxy) stream(cw *clientWriter, c *call, x *exchange, price manifest.Price, resp *http.Response, body io.Reader) (outcome string) {
	h := cw.w.Header()
	clientHeader(h, resp.Header)
	var f framer = sseFramer{cw}
	if x.array {
		h.Set("Content-Type", "application/json; charset=UTF-8")
		f = &arrayFramer{cw: cw}
	}
	cw.w.WriteHeader(resp.StatusCode)
	cw.rc.Flush()
	defer func() { c.ended(outcome == CodeBudgetSpent, x.tally.estimated()) }()
	sr := newSSEReader(body, p.cfg.MaxEventBytes)
	for {
		raw, ev, err := sr.next()
		if err == nil {
			drop := x.api.event(x, ev.name, ev.data)
			// Once the final usage is in, the answer is paid for: the
			// rest of the stream costs nothing and is passed on, like a
			// whole response.
			if !x.settle(c, price) && !x.final {
				x.api.cut(x, f, CodeBudgetSpent, "the job's cost budget is spent; the stream was cut")
				return CodeBudgetSpent
			}
			if !drop {
				if f.event(raw, ev.data) != nil {
					return codeClientGone
				}
			}
			continue
		}
		x.settle(c, price)
		if len(raw) > 0 && f.tail(raw) != nil {
			return codeClientGone
		}
		if err == io.EOF {
			if f.end() != nil {
				return codeClientGone
			}
			return ""
		}
		if errors.Is(err, errEventTooLarge) {
			// What was read of the event counts as output.
			x.tally.addOutput(len(raw))
			x.settle(c, price)
			return CodeUnmeterable
		}
		return codeUpstreamBrokenBody
	}
}

// whole meters a response that does not stream: its usage is charged when
// it has arrived, and it is passed on even when that spends the budget
// (it is paid for; the next request is refused).
func (p *Proxy) whole(cw *clientWriter, c *call, x *exchange, price manifest.Price, resp *http.Response, body io.Reader) (outcome string) {
	data, err := io.ReadAll(io.LimitReader(body, p.cfg.MaxResponseBytes+1))
	tooBig := int64(len(data)) > p.cfg.MaxResponseBytes
	if err == nil && !tooBig {
		if x.api.whole(x, data) != nil {
			// Usage unreadable: the body's size stands in for the output.
			x.tally.addOutput(len(data))
		}
	} else {
		x.tally.addOutput(len(data))
	}
	x.settle(c, price)
	c.ended(false, x.tally.estimated())
	switch {
	case tooBig:
		p.fail(cw.w, c, x.family, http.StatusBadGateway, CodeUnmeterable, x.model, fmt.Sprintf("the response is larger than %d bytes", p.cfg.MaxResponseBytes))
		return CodeUnmeterable
	case err != nil:
		p.fail(cw.w, c, x.family, http.StatusBadGateway, CodeUpstreamFailed, x.model, "the provider's response broke off")
		return codeUpstreamBrokenBody
	}
	h := cw.w.Header()
	clientHeader(h, resp.Header)
	h.Set("Content-Length", fmt.Sprint(len(data)))
	cw.w.WriteHeader(resp.StatusCode)
	if cw.write(data) != nil {
		return codeClientGone
	}
	return ""
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

// refuse answers a request the proxy will not forward and counts it for
// the call (when there is one).
func (p *Proxy) refuse(w http.ResponseWriter, c *call, f Family, status int, code, model, msg string) {
	if c != nil {
		c.refused(code)
	}
	p.fail(w, c, f, status, code, model, msg)
}

// fail answers with an error in the family's shape and logs it.
func (p *Proxy) fail(w http.ResponseWriter, c *call, f Family, status int, code, model, msg string) {
	actor, job, callID := "SYSTEM", "", ""
	if c != nil {
		job, callID = c.grant.Job, c.grant.Call
		if c.grant.Role != "" {
			actor = c.grant.Role
		}
	}
	p.log.Warn(proxyMessage(code, msg), "type", "error", "job_id", job, "status", "", "actor", actor, "error_code", code,
		"attempt", 0, "checkpoint_id", "", "call", callID, "model", model, "http_status", status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(errorBody(f, status, code, msg))
}

// logExchange logs one metered request: at debug level when it went well,
// as a warning when it was cut or broke off.
func (p *Proxy) logExchange(c *call, x *exchange, outcome string, d time.Duration) {
	actor := c.grant.Role
	if actor == "" {
		actor = "SYSTEM"
	}
	u := x.charged
	attrs := []any{"job_id", c.grant.Job, "call", c.grant.Call, "actor", actor, "api", x.api.name(), "model", x.model,
		"input_tokens", u.Input, "output_tokens", u.Output, "cache_read_tokens", u.CacheRead, "cache_write_tokens", u.CacheWrite,
		"cost_usd", x.chargedUSD, "estimated", x.tally.estimated(), "duration_ms", d.Milliseconds()}
	switch outcome {
	case "":
		p.log.Debug("metered request", attrs...)
	case CodeBudgetSpent:
		p.log.Warn("budget spent: stream cut", append(attrs, "type", "error", "status", "", "error_code", outcome,
			"attempt", 0, "checkpoint_id", "", "remaining_usd", x.remaining)...)
	default:
		p.log.Log(context.Background(), slog.LevelWarn, "metered request ended early", append(attrs, "type", "error", "status", "",
			"error_code", outcome, "attempt", 0, "checkpoint_id", "")...)
	}
}

// redact removes secrets (the real key, the agent's credentials) from a
// message before it is logged or shown.
func redact(s string, secrets []string) string {
	for _, v := range secrets {
		if len(v) >= 4 {
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
