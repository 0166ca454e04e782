package runner

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// A run works over what agents and job authors wrote: answers, workspaces,
// histories, CLI sessions. A fault of Logist's on one job's input (a panic)
// stopped the daemon and every job with it, and met the same input again at
// its restart; on a cluster, every node that took the job over in turn. Now
// the run ends with a runPanic instead: the job is refused as for any run
// error (RUN_FAILED, logged with the stack, noted where logist status shows
// it) and left as a crash at that point would have left it, its clean-ups
// done (history and lock closed, spare sandbox ended); the daemon's next
// start (a Logist with the fault fixed) runs it again from there. The
// daemon and its other jobs carry on.

// runPanic is a run that panicked.
type runPanic struct {
	value any
	stack []byte
}

func (p *runPanic) Error() string {
	return fmt.Sprintf("the run stopped on a fault of Logist's (panic: %v); the daemon's log has its stack: report it", p.value)
}

// keepFault, deferred first by Engine.RunFrom, turns the run's panic into
// its error, and counts it (logistd_faults_total{in="run"}). A turn's
// call runs on a goroutine of its own: guardedTurn keeps its panic, with
// its stack, for playTurns to raise on the run's.
func (e *Engine) keepFault(err *error) {
	p := recover()
	if p == nil {
		return
	}
	if obs := e.Env.Obs; obs != nil {
		obs.RunFault()
	}
	if rp, ok := p.(*runPanic); ok {
		*err = rp
		return
	}
	*err = &runPanic{value: p, stack: debug.Stack()}
}

// FaultStack is the stack of a run that ended on a fault (err from
// Engine.Run), for its log line; ok is false for any other error.
func FaultStack(err error) (stack []byte, ok bool) {
	var p *runPanic
	if errors.As(err, &p) {
		return p.stack, true
	}
	return nil, false
}
