package jobtx

import (
	"time"

	"github.com/logist/logist/internal/lifecycle"
)

// Observer hears what the engine does (metrics implement it). It must not
// block.
type Observer interface {
	JobStatus(id string, from, to lifecycle.Status)
	// FirstStart: a job entered its first phase for the first time.
	FirstStart()
	// Contained: a job (re)started with its processes contained by layer
	// ("bwrap+landlock", "landlock", or "none" for the opt-out).
	Contained(layer string)
	AgentCall(role, provider, outcome string, d time.Duration, costUSD float64)
	Violation(code string)
	Retry(cause string)
	Halt(reason string)
	HistoryAppend(d time.Duration, err error)
	TornTail()
	// RunFault: a job's run ended on a fault of Logist's (it panicked and
	// was kept to that run: runner's keepFault).
	RunFault()
}

// Nop is an Observer that ignores everything.
type Nop struct{}

func (Nop) JobStatus(string, lifecycle.Status, lifecycle.Status)     {}
func (Nop) FirstStart()                                              {}
func (Nop) Contained(string)                                         {}
func (Nop) AgentCall(string, string, string, time.Duration, float64) {}
func (Nop) Violation(string)                                         {}
func (Nop) Retry(string)                                             {}
func (Nop) Halt(string)                                              {}
func (Nop) HistoryAppend(time.Duration, error)                       {}
func (Nop) TornTail()                                                {}
func (Nop) RunFault()                                                {}
