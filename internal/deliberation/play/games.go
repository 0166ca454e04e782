package play

import (
	"github.com/logist/logist/internal/deliberation/negotiation"
	"github.com/logist/logist/internal/deliberation/parliament"
)

// The games Logist ships.
func init() {
	Register(negotiation.Game{})
	Register(parliament.Game{})
}
