package lifecycle

import (
	"fmt"
	"strings"
)

// Mermaid is the state diagram of the transition table (mermaid's
// stateDiagram-v2): one arrow per pair of statuses, labelled with every
// event that makes that move, and an end mark on the statuses nothing
// leaves. The README shows it between markers; a test keeps the two the
// same (go test ./internal/lifecycle -update rewrites the README's copy).
func Mermaid() string {
	type pair struct{ from, to Status }
	var order []pair
	events := map[pair][]string{}
	leaves := map[Status]bool{}
	for _, t := range Table() {
		p := pair{t.From, t.To}
		if _, ok := events[p]; !ok {
			order = append(order, p)
		}
		events[p] = append(events[p], string(t.Event))
		leaves[t.From] = true
	}
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	for _, p := range order {
		fmt.Fprintf(&b, "  %s --> %s: %s\n", p.from, p.to, strings.Join(events[p], ", "))
	}
	for _, s := range All {
		if !leaves[s] {
			fmt.Fprintf(&b, "  %s --> [*]\n", s)
		}
	}
	return b.String()
}
