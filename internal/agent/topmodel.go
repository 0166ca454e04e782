package agent

import (
	"maps"
	"slices"
)

// topModel is the model with the most tokens in a run's per-model usage:
// the main model, where routing, titles and other helpers use small ones.
// Names are tried in sorted order, so a tie does not depend on map order.
func topModel[U any](usage map[string]U, tokens func(U) int64) string {
	best, most := "", int64(-1)
	for _, n := range slices.Sorted(maps.Keys(usage)) {
		if t := tokens(usage[n]); t > most {
			best, most = n, t
		}
	}
	return best
}
