package clusterstore

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/logist/logist/internal/manifest"
)

// The engine halts a job at its cost budget (manifest.Exhausted) and the
// store refuses a call past it (Apply: spent >= budget, in micro-dollars):
// both must find the budget used up at the same cost, or a job the engine
// lets start a call is refused by file mode's own store, just under the
// limit, where the two roundings disagree.
func TestEngineAndStoreFindABudgetUsedUpAlike(t *testing.T) {
	for _, limit := range []float64{1, 100, 250, 0.3, 12345.6789} {
		for _, d := range []float64{-1, -0.001, -0.00006, -0.00005, -0.00004, -0.00001, -1e-9, 0, 1e-9, 0.00001, 0.00005, 1} {
			used := limit + d
			if used < 0 {
				continue
			}
			var m manifest.Manifest
			m.CostThreshold = &limit
			m.Metrics.CumulativeCost = used
			engine := m.Exhausted(nil) != nil
			file, err := json.Marshal(map[string]any{"cost_threshold": limit, "metrics": map[string]any{"cumulative_cost": used}})
			if err != nil {
				t.Fatal(err)
			}
			store := CostMicros(file) >= BudgetMicros(file)
			if engine != store {
				t.Errorf("%s: the engine says used up %v, the store %v", fmt.Sprintf("%.10g of %.10g cents", used, limit), engine, store)
			}
		}
	}
}
