package schemas

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// The validator is third-party code (third_party/jsonschema) run over
// documents from outside: a manifest dropped in the jobs folder, an agent's
// answer. A panic there on one document stopped logistd and every job with
// it, and the daemon's restart met the same manifest again. Validate keeps
// such a fault to the document: it is refused with a FaultError, counted
// (logistd_faults_total{in="check"}, the LogistdFault alert), and
// the daemon carries on. Guard is the same for a check of Logist's own
// over a document (the manifest's decoder: its rules, its cron parser).
// The fuzz targets of every decoder that validates fail on a fault
// (schemastest.NoFault), so one is still found as the bug it is.

// Faults counts the documents a check panicked on in this process.
var Faults atomic.Int64

var lastFault atomic.Pointer[FaultError]

// LastFault is the latest fault of this process, or nil.
func LastFault() *FaultError { return lastFault.Load() }

// FaultError is a document a check could not judge: it panicked.
type FaultError struct {
	Check string // the schema, or what Logist's own check was
	Value any    // what it panicked with
	Where string // the innermost frames of Go code that panicked
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("could not be checked against %s: the check failed on it (%v at %s); this is a fault of Logist's, not of the document: report it with the document", e.Check, e.Value, e.Where)
}

// Guard runs check, a check of a document from outside, and turns its
// panic into a FaultError: the document's refusal, counted.
func Guard(what string, check func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			fe := &FaultError{Check: what, Value: p, Where: panicSite()}
			lastFault.Store(fe)
			Faults.Add(1)
			err = fe
		}
	}()
	return check()
}

// validateDoc is the validator's entry point (tests replace it to fault).
var validateDoc = func(s *jsonschema.Schema, doc any) error { return s.Validate(doc) }

// panicSite names the two innermost frames of Go code, outside the
// runtime, where the panic began: after the last runtime.gopanic (a
// deferred function that panics again, as the validator's does, comes
// before it) and above Guard. Called from Guard's deferred recover.
func panicSite() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	var at []string
	for {
		f, more := frames.Next()
		switch {
		case strings.HasSuffix(f.Function, "/schemas.Guard"):
			more = false
		case f.Function == "runtime.gopanic":
			at = at[:0]
		case f.Function != "" && !strings.HasPrefix(f.Function, "runtime."):
			at = append(at, fmt.Sprintf("%s (%s:%d)", f.Function, filepath.Base(f.File), f.Line))
		}
		if !more {
			break
		}
	}
	if len(at) > 2 {
		at = at[:2]
	}
	return strings.Join(at, " in ")
}
