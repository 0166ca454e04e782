package play

import "github.com/logist/logist/internal/negotiation"

// The games Logist ships.
func init() {
	Register(negotiation.Game{})
}
