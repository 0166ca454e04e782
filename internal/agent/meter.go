package agent

import (
	"context"
	"crypto/x509"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
)

// Metering: every call of an agent that talks to a model API itself (a CLI
// preset, the http provider) goes through the daemon's metering proxy
// (internal/meter), which holds the real API key, prices the traffic and
// debits the job's budget as it streams. The agent gets a per-call token
// as its key and the proxy as its base URL. This package only states what
// it needs of the proxy (Meter); the daemon, the composition root, wires
// internal/meter in. The proxy's figures are the call's cost of record.

// Meter grants a call a token for the metering proxy and reads back what
// the call spent.
type Meter interface {
	// Open registers one call and returns the token its agent sends as
	// its API key.
	Open(g MeterGrant) (token string, err error)
	// Close revokes the token (requests still in flight end) and returns
	// the call's figures of record.
	Close(token string) MeterTotals
	// Root is where a process that shares the daemon's network (an
	// uncontained run, the http provider in the daemon) reaches the
	// proxy: http://127.0.0.1:PORT.
	Root() string
	// BaseURL is the base URL a client of the api family is given when
	// the proxy is reached at root (the family's SDKs differ in the
	// version path they append themselves).
	BaseURL(root, api string) string
	// Compare sets a call's metered cost against the agent's own report:
	// whether they disagree and a sentence saying both figures.
	Compare(t MeterTotals, reportedUSD float64) (disagree bool, text string)
}

// The API families a metered agent speaks (internal/meter's Family).
const (
	APIAnthropic = "anthropic"
	APIOpenAI    = "openai"
	APIGemini    = "gemini"
)

// MeterGrant is what one call may do through the proxy.
type MeterGrant struct {
	Job, Call, Role string
	// API is the family the agent speaks; BaseURL the upstream the proxy
	// forwards to, as the family's SDK takes it ("" = the provider's
	// public API), and Key the real key it injects (the steward's, from
	// the agent's configuration or the daemon's environment; never the
	// agent's).
	API, BaseURL, Key string
	// Header and RootCAs are what else the upstream needs (an http agent's
	// headers_env and ca_file): extra headers the proxy sends, certificates
	// it checks the upstream's TLS against (nil: the system's).
	Header  http.Header
	RootCAs *x509.CertPool
	// Model and Price: the steward's price of the agent's model
	// (command.price, http.price), nil for the table's. A model with no
	// price is refused by the proxy (MODEL_UNPRICED), never free.
	Model string
	Price *manifest.Price
	// Budget is debited as responses flow (nil: no cost budget).
	Budget Budget
}

// MeterTotals are a call's figures of record.
type MeterTotals struct {
	USD    float64
	Tokens history.Tokens
	// Requests are the model requests forwarded; Refused counts refused
	// ones by code.
	Requests int
	Refused  map[string]int
	// Cut: a stream was cut for the budget; BudgetSpent: cut or refused
	// for it. Estimated: some figure is an estimate (a response ended
	// before the provider reported its usage).
	Cut, BudgetSpent, Estimated bool
}

// Metered is what the proxy's figures add to a call's Result: the cost
// of record is Result.CostUSD (the proxy's); the agent's own report is
// kept beside it.
type Metered struct {
	Requests    int      `json:"requests"`
	Estimated   bool     `json:"estimated,omitempty"`
	ReportedUSD *float64 `json:"reported_usd,omitempty"`
	// Disagreement says both figures when they disagree (a warning,
	// COST_DISAGREEMENT); "" when they agree or the agent reported none.
	Disagreement string `json:"disagreement,omitempty"`
}

// Budget is a job's cost budget as a call's proxy grant debits it (the
// shape internal/meter's Budget has). It must be safe for concurrent use.
type Budget interface {
	Debit(usd float64) (remaining float64, ok bool)
}

// NewBudget is a budget of usd, shared by the calls of one step of a job
// (what the job has left when the step starts).
func NewBudget(usd float64) Budget { return &budget{left: usd} }

type budget struct {
	mu   sync.Mutex
	left float64
}

// Debit implements Budget: ok is false once nothing is left.
func (b *budget) Debit(usd float64) (float64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !math.IsNaN(usd) {
		b.left -= usd
	}
	return b.left, b.left > 0
}

// metering is what the engine hands a step's calls.
type metering struct {
	meter  Meter
	budget Budget
}

type meterKey struct{}

// WithMeter returns ctx whose calls are metered by m with budget b (nil:
// no cost budget). A nil m leaves ctx as it is: calls go to their APIs
// directly.
func WithMeter(ctx context.Context, m Meter, b Budget) context.Context {
	if m == nil {
		return ctx
	}
	return context.WithValue(ctx, meterKey{}, &metering{meter: m, budget: b})
}

// BudgetFrom is the budget ctx's calls debit (nil: none, or no meter).
func BudgetFrom(ctx context.Context) Budget {
	if m := meteringFrom(ctx); m != nil {
		return m.budget
	}
	return nil
}

func meteringFrom(ctx context.Context) *metering {
	m, _ := ctx.Value(meterKey{}).(*metering)
	return m
}

// proxyRoot is where a run of ex reaches the proxy: inside a sandbox whose
// network is the proxy, its forwarder's address; otherwise (the host's
// network) the proxy's loopback listener.
func proxyRoot(ex Executor, m Meter) string {
	if r, ok := ex.(interface{ ProxyRoot() string }); ok {
		if root := r.ProxyRoot(); root != "" {
			return root
		}
	}
	return m.Root()
}

// upstreamBase is a base URL the steward gave the agent (command.base_url)
// as the proxy's upstream takes it for api: Anthropic's and Gemini's SDKs
// append their version path themselves.
func upstreamBase(api, base string) string {
	base = strings.TrimSuffix(base, "/")
	switch api {
	case APIAnthropic:
		return strings.TrimSuffix(base, "/v1")
	case APIGemini:
		return strings.TrimSuffix(base, "/v1beta")
	}
	return base
}

// meterCall is one open grant.
type meterCall struct {
	m     Meter
	token string
	// priceField is where a steward prices the agent's model
	// (http.price, command.price), for a refusal's message.
	priceField string
}

// openMeter opens a grant for a call that speaks g.API (g holds the
// upstream, its key and the model's price; the call and the budget come
// from req and ctx), or returns nil when ctx carries no meter.
func openMeter(ctx context.Context, req *Request, g MeterGrant) (*meterCall, error) {
	mt := meteringFrom(ctx)
	if mt == nil || g.API == "" {
		return nil, nil
	}
	g.Job, g.Call, g.Role, g.Budget = req.JobID, fmt.Sprintf("%06d", req.Interaction), req.Role, mt.budget
	g.BaseURL = upstreamBase(g.API, g.BaseURL)
	tok, err := mt.meter.Open(g)
	if err != nil {
		return nil, &Error{Code: codes.AgentStart, Msg: "metering proxy: " + err.Error()}
	}
	return &meterCall{m: mt.meter, token: tok}, nil
}

// field is where a steward prices the call's model.
func (mc *meterCall) field() string {
	if mc.priceField == "" {
		return "command.price"
	}
	return mc.priceField
}

// settle closes the grant and makes the proxy's figures the call's cost of
// record: on the result (with the agent's own report kept, compared) or on
// the error. A call that met a spent budget fails BUDGET_SPENT whatever
// the agent made of it, unless it produced an answer.
func (mc *meterCall) settle(res *Result, err error, reported *float64) (*Result, error) {
	t := mc.m.Close(mc.token)
	info := &Metered{Requests: t.Requests, Estimated: t.Estimated, ReportedUSD: reported}
	if reported != nil {
		if dis, text := mc.m.Compare(t, *reported); dis {
			info.Disagreement = text
		}
	}
	if res != nil && err == nil {
		res.CostUSD, res.Metered = t.USD, info
		tk := t.Tokens
		res.Tokens = &tk
		return res, nil
	}
	ae, ok := AsError(err)
	if !ok {
		ae = &Error{Code: codes.APIError, Transient: true, Msg: err.Error()}
	}
	e := *ae
	e.CostUSD, e.Metered = t.USD, info
	if t.BudgetSpent {
		e.Code, e.Transient, e.Retake = codes.BudgetSpent, false, false
		e.Msg = fmt.Sprintf("the metering proxy stopped the call: the job's cost budget is spent (metered $%.6f in %d requests; the agent said: %s)", t.USD, t.Requests, truncateText(ae.Msg, 300))
	} else if n := t.Refused[codes.ModelUnpriced]; n > 0 && ae.Code != codes.ModelUnpriced {
		e.Code, e.Transient = codes.ModelUnpriced, false
		e.Msg = "the metering proxy refused the model: no price is known for it (set " + mc.field() + " or logistd --prices); the agent said: " + truncateText(ae.Msg, 300)
	}
	return nil, &e
}
