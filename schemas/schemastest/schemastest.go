// Package schemastest holds the fuzz targets' check that the validator did
// not fault: schemas.Validate turns a panic into the document's refusal so
// that logistd carries on, and a fuzz target would see only an error; this
// makes the fault fail the target, so the fuzzer still finds it as the bug
// it is.
package schemastest

import (
	"testing"

	"github.com/logist/logist/schemas"
)

// NoFault fails t if the validator faults between the call and the call of
// the function it returns: defer schemastest.NoFault(t)().
func NoFault(t testing.TB) func() {
	t.Helper()
	before := schemas.Faults.Load()
	return func() {
		t.Helper()
		if schemas.Faults.Load() != before {
			t.Fatalf("the validator faulted: %v", schemas.LastFault())
		}
	}
}
