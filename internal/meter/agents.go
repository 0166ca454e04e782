package meter

import (
	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/manifest"
)

// ForAgents is the proxy as the engine's agent.Meter (the daemon wires it
// in): each metered agent call gets a grant whose own upstream is the
// agent's base URL (or the provider's public API) with the steward's key.
// root is the proxy's loopback address (http://127.0.0.1:PORT), where an
// uncontained run and the daemon's http provider reach it.
func (p *Proxy) ForAgents(root string) agent.Meter { return agentMeter{p: p, root: root} }

type agentMeter struct {
	p    *Proxy
	root string
}

// publicURL is the public API of each family.
var publicURL = map[Family]string{Anthropic: AnthropicURL, OpenAI: OpenAIURL, Gemini: GeminiURL}

func (a agentMeter) Open(g agent.MeterGrant) (string, error) {
	f := Family(g.API)
	base := g.BaseURL
	if base == "" {
		base = publicURL[f]
	}
	gr := Grant{Job: g.Job, Call: g.Call, Role: g.Role, Own: &Upstream{Family: f, BaseURL: base, Key: g.Key, Header: g.Header, RootCAs: g.RootCAs}}
	if g.Price != nil && g.Model != "" {
		gr.Prices = map[string]manifest.Price{g.Model: *g.Price}
	}
	if g.Budget != nil {
		gr.Budget = g.Budget
	}
	return a.p.Issue(gr)
}

func (a agentMeter) Close(token string) agent.MeterTotals {
	t, _ := a.p.Revoke(token)
	return totalsForAgents(t)
}

func totalsForAgents(t Totals) agent.MeterTotals {
	return agent.MeterTotals{USD: t.USD, Tokens: t.Tokens.Tokens(), Requests: t.Requests, Refused: t.Refused,
		Cut: t.Cut, BudgetSpent: t.BudgetSpent(), Estimated: t.Estimated}
}

func (a agentMeter) Root() string { return a.root }

func (a agentMeter) BaseURL(root, api string) string { return BaseURL(root, Family(api)) }

func (a agentMeter) Compare(t agent.MeterTotals, reportedUSD float64) (bool, string) {
	c := Compare(Totals{USD: t.USD}, reportedUSD, DefaultTolerance)
	return c.Disagree, c.String()
}
