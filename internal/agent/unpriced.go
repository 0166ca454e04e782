package agent

import (
	"fmt"
	"sort"
	"strings"

	"github.com/logist/logist/internal/manifest"
)

// The rule for a model Logist cannot price, stated once here (and in
// docs/agents.md, "Prices"): Logist never runs a model call it cannot
// count. Every job runs under a cost budget (its own cost_threshold, else
// logistd's --default-cost-threshold), and every call of an http agent and
// of a CLI preset goes through the metering proxy, which refuses a model
// with no price (MODEL_UNPRICED: the call fails and the job stops in
// INTERVENTION_REQUIRED for a steward). An http agent sends its model as
// named, so the refusal is certain ahead: CheckPrices refuses such a
// manifest where a steward meets it (validate, submit, set) and at the
// daemon's intake, before any call, naming the price field. A preset passes
// its model to a program that may resolve it (an alias, a default model),
// so what it will ask for is known only at the run: CostWarning warns.

// Unpriced is an agent whose calls Logist cannot price: neither its
// configuration nor the price table (LookupPrice: the built-in table, plus
// logistd's --prices) knows what its model costs.
type Unpriced struct {
	Role string
	// Via is what runs the role: a preset's name, or "http".
	Via   string
	Model string // "" when the configuration names none
}

// Field is the configuration field that prices the agent: http.price or
// command.price.
func (u Unpriced) Field() string {
	if u.Via == "http" {
		return "http.price"
	}
	return "command.price"
}

// Pointer is Field's JSON pointer in the manifest.
func (u Unpriced) Pointer() string {
	return "/agents/" + u.Role + "/" + strings.ReplaceAll(u.Field(), ".", "/")
}

// Refused says whether the metering proxy will refuse the agent's calls
// for certain: an http agent, whose model is sent as named.
func (u Unpriced) Refused() bool { return u.Via == "http" }

func (u Unpriced) String() string {
	if u.Model == "" {
		return fmt.Sprintf("%s: %s names no model, so its price is unknown", u.Role, u.Via)
	}
	return fmt.Sprintf("%s: %s model %q has no price", u.Role, u.Via, u.Model)
}

// UnpricedAgents lists, by role, the agents of m whose calls cannot be
// priced: an http agent, or a preset whose program does not price its own
// calls (or is pointed at command.base_url), with neither a price in the
// configuration nor its model in the price table. The scripted agent
// states its costs and a human costs nothing; a plain command agent
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

// CheckPrices returns one problem per agent whose calls the metering proxy
// will refuse (Unpriced.Refused), naming file, the price field and why.
func CheckPrices(file string, m *manifest.Manifest) manifest.Errors {
	var es manifest.Errors
	for _, u := range UnpricedAgents(m) {
		if !u.Refused() {
			continue
		}
		es = append(es, &manifest.Error{File: file, Pointer: u.Pointer(), Reason: fmt.Sprintf("%s model %q has no price, "+
			"and Logist runs no call whose cost it cannot count against the job's cost budget: the metering proxy would "+
			"refuse every call (MODEL_UNPRICED) and the job stop at the first; set %s (USD per million tokens, "+
			`e.g. {"input_per_mtok": 0, "output_per_mtok": 0} for a free local model), or price the model in logistd's `+
			"--prices file", u.Via, u.Model, u.Field())})
	}
	return es
}

// CostWarning is what the steward is told about a job with unpriced
// preset agents (intake's log, logist status and validate), naming each
// role, model and price field; "" when there is none. (An unpriced http
// agent is refused instead: CheckPrices.)
func CostWarning(m *manifest.Manifest) string {
	var parts []string
	for _, u := range UnpricedAgents(m) {
		if !u.Refused() {
			parts = append(parts, fmt.Sprintf("%s: set %s", u, u.Pointer()))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "cost unknown: the metering proxy refuses a model it cannot price, so the job stops at the first call " +
		"(MODEL_UNPRICED) unless the program asks for a priced one (" + strings.Join(parts, "; ") + ", or give logistd --prices)"
}
