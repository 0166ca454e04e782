package meter

// Metering a response as it passes: a stream event by event, a whole
// response when it has arrived.

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/manifest"
)

// stream meters a streamed response event by event: each event's usage
// (reported or estimated) is charged before the event is passed on, and
// when the budget is spent before the provider's final usage the stream
// ends with the API's error in place of that event. It returns "" for a
// stream that ended well, else why it did not.
func (p *Proxy) stream(cw *clientWriter, c *call, x *exchange, price manifest.Price, resp *http.Response, body io.Reader) (outcome string) {
	h := cw.w.Header()
	clientHeader(h, resp.Header)
	var f framer = sseFramer{cw}
	if x.array {
		h.Set("Content-Type", "application/json; charset=UTF-8")
		f = &arrayFramer{cw: cw}
	}
	cw.w.WriteHeader(resp.StatusCode)
	_ = cw.rc.Flush() // the server's writers flush; a client gone shows at the first event
	defer func() { c.ended(outcome == codes.BudgetSpent, x.tally.estimated()) }()
	sr := newSSEReader(body, p.cfg.MaxEventBytes)
	for {
		raw, ev, err := sr.next()
		if err == nil {
			drop := x.api.event(x, ev.name, ev.data)
			// Once the final usage is in, the answer is paid for: the
			// rest of the stream costs nothing and is passed on, like a
			// whole response.
			if !x.settle(c, price) && !x.final {
				// A client gone by now changes nothing: the stream ends here.
				_ = x.api.cut(x, f, codes.BudgetSpent, "the job's cost budget is spent; the stream was cut")
				return codes.BudgetSpent
			}
			if !drop {
				if f.event(raw, ev.data) != nil {
					return codes.ClientGone
				}
			}
			continue
		}
		x.settle(c, price)
		if len(raw) > 0 && f.tail(raw) != nil {
			return codes.ClientGone
		}
		if err == io.EOF {
			if f.end() != nil {
				return codes.ClientGone
			}
			return ""
		}
		if errors.Is(err, errEventTooLarge) {
			// What was read of the event counts as output.
			x.tally.addOutput(len(raw))
			x.settle(c, price)
			return codes.ResponseUnmeterable
		}
		return codes.UpstreamStreamBroken
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
		p.fail(cw.w, c, x.family, http.StatusBadGateway, codes.ResponseUnmeterable, x.model, fmt.Sprintf("the response is larger than %d bytes", p.cfg.MaxResponseBytes))
		return codes.ResponseUnmeterable
	case err != nil && cw.ctx.Err() != nil:
		return codes.ClientGone // the agent went away or the call was revoked
	case err != nil:
		status, msg := http.StatusBadGateway, "the provider's response broke off: "+err.Error()
		if ir, ok := body.(*idleReader); ok && ir.fired() {
			status, msg = http.StatusGatewayTimeout, fmt.Sprintf("the provider fell silent for longer than %v in the middle of its response", p.cfg.IdleTimeout)
		}
		p.fail(cw.w, c, x.family, status, codes.UpstreamFailed, x.model, msg)
		return codes.UpstreamFailed
	}
	h := cw.w.Header()
	clientHeader(h, resp.Header)
	h.Set("Content-Length", fmt.Sprint(len(data)))
	cw.w.WriteHeader(resp.StatusCode)
	if cw.write(data) != nil {
		return codes.ClientGone
	}
	return ""
}
