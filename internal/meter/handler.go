package meter

import (
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/joblog"
)

// The proxy's error codes are the catalogue's meter area (internal/codes):
// in Totals.Refused, in logs, and in the code of the errors agents get.

// ServeHTTP takes one request of an agent: it checks the token, the route
// and the grant's policy, then forwards with the real key and meters the
// response.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.cfg.ProxyForm != nil && (r.Method == http.MethodConnect || r.URL.IsAbs()) {
		p.cfg.ProxyForm.ServeHTTP(w, r)
		return
	}
	rt, routed := match(r)
	fam := rt.family
	if !routed {
		fam = familyOf(r)
	}
	creds := credentials(r)
	c := p.lookup(creds)
	if c == nil || !c.begin() {
		p.refuse(w, nil, fam, http.StatusUnauthorized, codes.TokenUnknown, "", "the API key is not a live call token (each agent call gets its own; this one was never issued or is revoked)")
		return
	}
	defer c.end()
	if !routed {
		p.refuse(w, c, fam, http.StatusNotFound, codes.EndpointNotMetered, "", fmt.Sprintf("%s %s is not an endpoint it forwards (only the model APIs it meters)", r.Method, r.URL.Path))
		return
	}
	if r.Header.Get("Upgrade") != "" {
		p.refuse(w, c, fam, http.StatusBadRequest, codes.EndpointNotMetered, "", "protocol upgrades (websockets) are not metered")
		return
	}
	up, ok := c.upstream(p.cfg.Upstreams, rt.family)
	if !ok {
		p.refuse(w, c, fam, http.StatusForbidden, codes.UpstreamNotAllowed, "", fmt.Sprintf("this call may not use the %s API", rt.family))
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
			_ = rc.SetWriteDeadline(time.Now()) // the server's writers support it
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
	hidden := append([]string{up.Key}, creds...)
	for _, vs := range up.Header {
		hidden = append(hidden, vs...)
	}
	if rt.api == nil {
		p.forwardFree(ctx, w, r, c, rt, up, body, query, hidden)
		return
	}

	x, err := rt.api.request(rt, query, body)
	if err != nil {
		p.refuse(w, c, fam, http.StatusBadRequest, codes.RequestInvalid, "", err.Error())
		return
	}
	x.api, x.family = rt.api, rt.family
	if !c.allows(x.model) {
		p.refuse(w, c, fam, http.StatusForbidden, codes.ModelNotAllowed, x.model, fmt.Sprintf("this call may not use model %q", x.model))
		return
	}
	price, ok := c.price(x.model, p.cfg.Prices)
	if !ok {
		p.refuse(w, c, fam, http.StatusBadRequest, codes.ModelUnpriced, x.model, fmt.Sprintf("no price is known for model %q, so its cost could not be counted; a steward sets one (the agent's price, or logistd --prices)", x.model))
		return
	}
	if _, ok := c.debit(0); !ok {
		p.refuse(w, c, fam, http.StatusPaymentRequired, codes.BudgetSpent, x.model, "the job's cost budget is spent")
		return
	}
	if abort := p.forwardMetered(ctx, w, rc, r, c, rt, up, x, price, hidden); abort {
		// The client must see a broken response, not a complete one.
		panic(http.ErrAbortHandler)
	}
}

// readBody reads the request body within the size and time bounds,
// decoding gzip and deflate. On error it gives the status and code to
// refuse with.
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, string, error) {
	rc := http.NewResponseController(w)
	// The server's writers support deadlines: these cannot fail here.
	_ = rc.SetReadDeadline(time.Now().Add(p.cfg.ReadTimeout))
	defer rc.SetReadDeadline(time.Time{}) //nolint:errcheck // see above
	max := p.cfg.MaxRequestBytes
	var rd io.Reader = http.MaxBytesReader(w, r.Body, max)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		gz, err := gzip.NewReader(rd)
		if err != nil {
			return nil, http.StatusBadRequest, codes.RequestInvalid, fmt.Errorf("the gzip request body is unreadable: %v", err)
		}
		rd = gz
	case "deflate":
		zr, err := zlib.NewReader(rd)
		if err != nil {
			return nil, http.StatusBadRequest, codes.RequestInvalid, fmt.Errorf("the deflate request body is unreadable: %v", err)
		}
		rd = zr
	default:
		return nil, http.StatusUnsupportedMediaType, codes.EncodingUnsupported, fmt.Errorf("request body encoding %q is not read (gzip, deflate or none)", enc)
	}
	b, err := io.ReadAll(io.LimitReader(rd, max+1))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig) || int64(len(b)) > max:
		return nil, http.StatusRequestEntityTooLarge, codes.RequestTooLarge, fmt.Errorf("the request body is larger than %d bytes", max)
	case err != nil:
		return nil, http.StatusBadRequest, codes.RequestInvalid, fmt.Errorf("the request body could not be read: %v", err)
	}
	return b, 0, "", nil
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
	var pr joblog.Problem
	callID := ""
	if c != nil {
		pr.Job, pr.Actor, callID = c.grant.Job, c.grant.Role, c.grant.Call
	}
	pr.Code = code
	joblog.Log(p.log, proxyMessage(code, msg), pr, "call", callID, "model", model, "http_status", status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorBody(f, status, code, msg)) // logged above; a client gone cannot be told
}

// logExchange logs one metered request: at debug level when it went well,
// as a warning when it was refused (status: the provider's), cut or broke
// off.
func (p *Proxy) logExchange(c *call, x *exchange, outcome string, status int, d time.Duration) {
	u := x.charged
	attrs := []any{"call", c.grant.Call, "api", x.api.name(), "model", x.model,
		"input_tokens", u.Input, "output_tokens", u.Output, "cache_read_tokens", u.CacheRead, "cache_write_tokens", u.CacheWrite,
		"cost_usd", x.chargedUSD, "estimated", x.tally.estimated(), "duration_ms", d.Milliseconds()}
	if status != 0 {
		attrs = append(attrs, "http_status", status)
	}
	pr := joblog.Problem{Job: c.grant.Job, Actor: c.grant.Role, Code: outcome}
	switch outcome {
	case "":
		actor := c.grant.Role
		if actor == "" {
			actor = joblog.System
		}
		p.log.Debug("metered request", append([]any{"job_id", c.grant.Job, "actor", actor}, attrs...)...)
	case codes.BudgetSpent:
		joblog.Log(p.log, "budget spent: stream cut", pr, append(attrs, "remaining_usd", x.remaining)...)
	default:
		joblog.Log(p.log, "metered request ended early", pr, attrs...)
	}
}
