// Package builtins wires the effects of Logist's built-in workflows (the
// protocol's phases, the deliberation games) into one effect.Registry. It
// is the one place that names them all: the composition roots — the daemon
// and the CLI — hand its registry to the engine, the steward and the
// schedules, which import no concrete workflow themselves; tests that run
// real workflows use it too.
package builtins

import (
	"github.com/logist/logist/internal/deliberation/negotiation"
	"github.com/logist/logist/internal/deliberation/parliament"
	"github.com/logist/logist/internal/deliberation/play"
	"github.com/logist/logist/internal/effect"
	"github.com/logist/logist/internal/protocol/phases"
)

// The hooks the engine and the steward find by type assertion: a changed
// signature must fail here, not silently skip the hook.
var (
	_ effect.Halter     = (*phases.Phase)(nil)
	_ effect.TurnEffect = (*play.Effect)(nil)
	_ effect.Decider    = (*play.Effect)(nil)
)

// Effects returns a new registry of every built-in effect.
func Effects() effect.Registry {
	r := effect.Registry{}
	effect.Add(r, phases.Effects())
	effect.Add(r, play.Effects(parliament.Game{}, negotiation.Game{}))
	return r
}
