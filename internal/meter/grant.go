package meter

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/manifest"
)

// Budget is a job's cost budget as the engine keeps it. It must be safe
// for concurrent use (a call may stream several responses at once, and
// calls of one job may share it) and must not call back into the Proxy.
type Budget interface {
	// Debit adds usd to what the job has spent (a negative usd gives back
	// an estimate that the provider's final usage corrected) and reports
	// what is left and whether the job may go on spending: ok is false
	// once the spending reached the budget. Debit(0) asks without
	// spending.
	Debit(usd float64) (remaining float64, ok bool)
}

// Grant is what one agent call may do through the proxy.
type Grant struct {
	// Job and Call name the call (for Totals and logs); Role is the
	// workflow role that makes it (the log's actor).
	Job, Call, Role string
	// Upstreams are the providers (Config.Upstreams names) the call may
	// use. A request goes to the first of them that speaks its API; a
	// request no listed upstream speaks is refused.
	Upstreams []string
	// Own, if set, is an upstream of this call alone (an agent's own base
	// URL with the steward's key for it), tried before Upstreams.
	Own *Upstream
	// Models, if set, are the models the call may ask for (an entry also
	// allows its dated snapshots: claude-sonnet-4-5 allows
	// claude-sonnet-4-5-20250929). Empty: any model that has a price.
	Models []string
	// Prices are the steward's prices for this call's models (such as
	// command.price, keyed by the agent's model); they win over the table.
	// A model with no price in either is refused: never silently free.
	Prices map[string]manifest.Price
	// Budget is debited as responses flow; nil: no budget (still metered).
	Budget Budget
}

// Totals are a call's figures of record.
type Totals struct {
	Job, Call string
	// Requests counts the model requests forwarded upstream (metered
	// ones; free endpoints such as model lists and token counts are not
	// counted).
	Requests int
	// Refused counts the requests the proxy refused, by error code
	// (BUDGET_SPENT, MODEL_UNPRICED, ...).
	Refused map[string]int
	// UpstreamErrors counts metered requests the provider answered with an
	// error status, or that could not reach it.
	UpstreamErrors int
	// Models are the models the call asked for, sorted.
	Models []string
	// Tokens are the tokens used, by kind.
	Tokens Usage
	// USD is the cost, as debited from the Budget.
	USD float64
	// Cut: a stream was cut because the budget was spent.
	Cut bool
	// Estimated: some figures are estimates, because a response ended
	// (cut, broken, unreadable) before the provider reported its usage.
	Estimated bool
}

// BudgetSpent tells whether the call met a spent budget: a stream was cut
// or a request refused for it.
func (t Totals) BudgetSpent() bool { return t.Cut || t.Refused[codes.BudgetSpent] > 0 }

// tokenKey is a token's SHA-256: tokens are looked up by their hash, never
// kept or compared as they are.
type tokenKey [sha256.Size]byte

func keyOf(token string) tokenKey { return sha256.Sum256([]byte(token)) }

// TokenPrefix starts every token the proxy issues.
const TokenPrefix = "logist-meter-"

// Issue registers a call and returns its token: the "API key" the agent is
// given in place of the real one. Revoke it when the call ends.
func (p *Proxy) Issue(g Grant) (string, error) {
	if g.Job == "" {
		return "", errors.New("meter: a grant needs its job")
	}
	if len(g.Upstreams) == 0 && g.Own == nil {
		return "", errors.New("meter: a grant needs at least one upstream")
	}
	var tr *http.Transport
	if g.Own != nil {
		if err := checkUpstream("of job "+g.Job, *g.Own); err != nil {
			return "", err
		}
		if g.Own.RootCAs != nil {
			base, ok := p.cfg.Transport.(*http.Transport)
			if !ok {
				return "", fmt.Errorf("meter: the upstream of job %s has certificates of its own, which the proxy's transport (%T) cannot take", g.Job, p.cfg.Transport)
			}
			tr = base.Clone()
			tr.TLSClientConfig = &tls.Config{RootCAs: g.Own.RootCAs, MinVersion: tls.VersionTLS12}
		}
	}
	for _, name := range g.Upstreams {
		if _, ok := p.cfg.Upstreams[name]; !ok {
			return "", fmt.Errorf("meter: grant for job %s names upstream %q, which is not configured", g.Job, name)
		}
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("meter: %w", err)
	}
	token := TokenPrefix + hex.EncodeToString(b[:])
	ctx, cancel := context.WithCancel(context.Background())
	c := &call{grant: g, ctx: ctx, cancel: cancel, models: map[string]bool{}, ownTransport: tr,
		totals: Totals{Job: g.Job, Call: g.Call, Refused: map[string]int{}}}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		cancel()
		return "", errors.New("meter: the proxy is closed")
	}
	p.calls[keyOf(token)] = c
	return token, nil
}

// Totals returns a call's figures so far.
func (p *Proxy) Totals(token string) (Totals, bool) {
	p.mu.Lock()
	c := p.calls[keyOf(token)]
	p.mu.Unlock()
	if c == nil {
		return Totals{}, false
	}
	return c.snapshot(), true
}

// Revoke ends a call: its token is refused from now on, its requests in
// flight are ended (a stream is cut, a write to the agent fails at once),
// and once they are accounted its final Totals are returned.
func (p *Proxy) Revoke(token string) (Totals, bool) {
	k := keyOf(token)
	p.mu.Lock()
	c := p.calls[k]
	delete(p.calls, k)
	p.mu.Unlock()
	if c == nil {
		return Totals{}, false
	}
	c.stop()
	c.inflight.Wait()
	if c.ownTransport != nil {
		c.ownTransport.CloseIdleConnections()
	}
	return c.snapshot(), true
}

// lookup finds the call of the first credential that is a live token.
func (p *Proxy) lookup(creds []string) *call {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	for _, t := range creds {
		if c := p.calls[keyOf(t)]; c != nil {
			return c
		}
	}
	return nil
}

// call is one issued token's state.
type call struct {
	grant  Grant
	ctx    context.Context // ended at revoke: requests in flight stop
	cancel context.CancelFunc

	mu       sync.Mutex
	revoked  bool
	inflight sync.WaitGroup
	totals   Totals
	models   map[string]bool
	// ownTransport carries the requests to the grant's own upstream when
	// it has certificates of its own (Upstream.RootCAs).
	ownTransport *http.Transport
}

// transport is what carries a request to up: the call's own transport for
// its own upstream with certificates of its own, else the proxy's.
func (c *call) transport(proxy http.RoundTripper, up Upstream) http.RoundTripper {
	if up.RootCAs != nil && c.ownTransport != nil {
		return c.ownTransport
	}
	return proxy
}

// begin admits a request unless the call was revoked.
func (c *call) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.revoked {
		return false
	}
	c.inflight.Add(1)
	return true
}

func (c *call) end() { c.inflight.Done() }

func (c *call) stop() {
	c.mu.Lock()
	c.revoked = true
	c.mu.Unlock()
	c.cancel()
}

func (c *call) snapshot() Totals {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.totals
	t.Refused = make(map[string]int, len(c.totals.Refused))
	for k, v := range c.totals.Refused {
		t.Refused[k] = v
	}
	t.Models = make([]string, 0, len(c.models))
	for m := range c.models {
		t.Models = append(t.Models, m)
	}
	slices.Sort(t.Models)
	return t
}

// upstream is the grant's own upstream if it is of family f, else the
// first of its upstreams of family f.
func (c *call) upstream(ups map[string]Upstream, f Family) (Upstream, bool) {
	if o := c.grant.Own; o != nil && o.Family == f {
		return *o, true
	}
	for _, name := range c.grant.Upstreams {
		if u, ok := ups[name]; ok && u.Family == f {
			return u, true
		}
	}
	return Upstream{}, false
}

// allows tells whether the grant lets the call ask for model.
func (c *call) allows(model string) bool {
	if len(c.grant.Models) == 0 {
		return true
	}
	for _, m := range c.grant.Models {
		if agent.ModelNameMatches(m, model) {
			return true
		}
	}
	return false
}

// price is the model's price: the grant's own first, then the table.
func (c *call) price(model string, table func(string) (manifest.Price, bool)) (manifest.Price, bool) {
	if p, ok := agent.LookupPriceIn(c.grant.Prices, model); ok {
		return p, true
	}
	return table(model)
}

func (c *call) refused(code string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.totals.Refused[code]++
}

// started records a metered request going upstream.
func (c *call) started(model string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.totals.Requests++
	c.models[model] = true
}

func (c *call) upstreamError() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.totals.UpstreamErrors++
}

// ended records how a metered response ended.
func (c *call) ended(cut, estimated bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.totals.Cut = c.totals.Cut || cut
	c.totals.Estimated = c.totals.Estimated || estimated
}

// charge adds tokens and their cost to the totals and debits the budget.
// It reports whether the job may go on spending.
func (c *call) charge(tokens Usage, usd float64) (remaining float64, ok bool) {
	c.mu.Lock()
	c.totals.Tokens = c.totals.Tokens.add(tokens)
	c.totals.USD += usd
	c.mu.Unlock()
	return c.debit(usd)
}

// debit asks the budget (Debit(0) only asks).
func (c *call) debit(usd float64) (remaining float64, ok bool) {
	if c.grant.Budget == nil {
		return 0, true
	}
	return c.grant.Budget.Debit(usd)
}
