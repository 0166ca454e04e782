package agent

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
)

//go:embed prices.json
var pricesJSON []byte

var (
	pricesOnce sync.Once
	builtin    map[string]manifest.Price
	overMu     sync.RWMutex
	overrides  map[string]manifest.Price
)

func builtinPrices() map[string]manifest.Price {
	pricesOnce.Do(func() {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(pricesJSON, &raw); err != nil {
			panic("agent: embedded prices.json: " + err.Error())
		}
		builtin = map[string]manifest.Price{}
		for k, v := range raw {
			if strings.HasPrefix(k, "_") {
				continue
			}
			var p manifest.Price
			if err := json.Unmarshal(v, &p); err != nil {
				panic("agent: embedded prices.json " + k + ": " + err.Error())
			}
			builtin[k] = p
		}
	})
	return builtin
}

// LoadPrices reads a price file (the daemon's --prices): a JSON object
// model → {input_per_mtok, output_per_mtok, cached_input_per_mtok}, keys
// starting with "_" ignored. Its entries override and extend the built-in
// table.
func LoadPrices(path string) (map[string]manifest.Price, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("prices %s: not a JSON object: %w", path, err)
	}
	out := map[string]manifest.Price{}
	for k, v := range raw {
		if strings.HasPrefix(k, "_") {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		var p manifest.Price
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("prices %s: model %q: %w", path, k, err)
		}
		if p.InputPerMTok < 0 || p.OutputPerMTok < 0 || (p.CachedInputPerMTok != nil && *p.CachedInputPerMTok < 0) {
			return nil, fmt.Errorf("prices %s: model %q: a price is negative", path, k)
		}
		out[k] = p
	}
	return out, nil
}

// SetPriceOverrides replaces the daemon-wide price overrides.
func SetPriceOverrides(p map[string]manifest.Price) {
	overMu.Lock()
	defer overMu.Unlock()
	overrides = p
}

// LookupPrice finds a model's price: the daemon's overrides first, then
// the built-in table; in each, the exact name, else the longest entry the
// name extends with "-" (dated snapshots such as gpt-4o-2024-08-06,
// claude-sonnet-4-5-20250929).
func LookupPrice(model string) (manifest.Price, bool) {
	overMu.RLock()
	o := overrides
	overMu.RUnlock()
	if p, ok := LookupPriceIn(o, model); ok {
		return p, true
	}
	return LookupPriceIn(builtinPrices(), model)
}

// LookupPriceIn finds a model's price in one table: the exact name, else
// the longest entry the name extends (ModelNameMatches).
func LookupPriceIn(table map[string]manifest.Price, model string) (manifest.Price, bool) {
	best := ""
	for k := range table {
		if ModelNameMatches(k, model) && len(k) > len(best) {
			best = k
		}
	}
	if best == "" {
		return manifest.Price{}, false
	}
	return table[best], true
}

// ModelNameMatches tells whether a table entry (of prices, of allowed
// models) names a model: the same name, or the name with a "-" suffix
// (a dated snapshot such as gpt-4o-2024-08-06 of gpt-4o).
func ModelNameMatches(entry, model string) bool {
	return entry != "" && (entry == model || strings.HasPrefix(model, entry+"-"))
}

// TokenCost prices tokens: cached input tokens are part of t.Input and
// priced at the cached rate (the input rate when the price has none). It is
// the one pricing rule: presets, the http provider and the metering proxy
// all use it.
func TokenCost(t history.Tokens, p manifest.Price) float64 {
	cached := p.InputPerMTok
	if p.CachedInputPerMTok != nil {
		cached = *p.CachedInputPerMTok
	}
	uncached := max(t.Input-t.Cache, 0)
	cost := (float64(uncached)*p.InputPerMTok + float64(t.Cache)*cached + float64(t.Output)*p.OutputPerMTok) / 1e6
	return min(cost, MaxCallCostUSD)
}
