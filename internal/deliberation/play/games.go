package play

import (
	"github.com/logist/logist/internal/negotiation"
	"github.com/logist/logist/internal/parliament"
)

// The games Logist ships.
func init() {
	Register(negotiation.Game{})
	Register(parliament.Game{})
}
