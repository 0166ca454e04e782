package agent

import (
	"fmt"
	"sort"
	"strings"

	"github.com/logist/logist/internal/manifest"
)

// Unpriced is an agent whose calls Logist will count as costing nothing:
// neither the program nor Logist's price table knows what its model costs,
// so the job's cost budget cannot stop it.
type Unpriced struct {
	Role string
	// Via is what runs the role: a preset's name, or "http".
	Via   string
	Model string // "" when the configuration names none
}

func (u Unpriced) String() string {
	if u.Model == "" {
		return fmt.Sprintf("%s: %s names no model, so its price is unknown", u.Role, u.Via)
	}
	return fmt.Sprintf("%s: %s model %q has no price", u.Role, u.Via, u.Model)
}

// UnpricedAgents lists, by role, the agents of m whose calls cannot be
// priced: an http agent, or a preset whose program does not price its own
// calls (or is pointed at command.base_url), with neither a price in the
// configuration nor its model in the price table (LookupPrice: the
// built-in table, plus the daemon's --prices inside logistd). The scripted
// agent states its costs and a human costs nothing; a plain command agent
// reports cost_usd itself, which cannot be known before it runs.
func UnpricedAgents(m *manifest.Manifest) []Unpriced {
	var out []Unpriced
	for role, a := range m.Agents {
		var via, model string
		var price *manifest.Price
		switch {
		case a.Provider == "http" && a.HTTP != nil:
			via, model, price = "http", a.HTTP.Model, a.HTTP.Price
		case a.Provider == "command" && a.Command != nil && a.Command.Preset != "":
			p, ok := LookupPreset(a.Command.Preset)
			if !ok || (p.OwnPrices && a.Command.BaseURL == "") {
				continue
			}
			via, model, price = p.Name, a.Model, a.Command.Price
		default:
			continue
		}
		if price != nil {
			continue
		}
		if _, ok := LookupPrice(model); ok {
			continue
		}
		out = append(out, Unpriced{Role: role, Via: via, Model: model})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Role < out[j].Role })
	return out
}

// CostWarning is what the steward is told about a job with unpriced
// agents (intake's log, logist status and validate): "cost unknown", and
// "budget not enforceable" when the job has a cost budget, naming each
// role and model. It is "" when every call can be priced.
func CostWarning(m *manifest.Manifest) string {
	u := UnpricedAgents(m)
	if len(u) == 0 {
		return ""
	}
	parts := make([]string, len(u))
	for i, x := range u {
		parts[i] = x.String()
	}
	head := "cost unknown"
	if m.CostThreshold != nil {
		head += ": budget not enforceable"
	}
	return head + " (" + strings.Join(parts, "; ") + "; set command.price or http.price, or give logistd --prices)"
}
