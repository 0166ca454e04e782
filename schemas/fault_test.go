package schemas

import (
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// A panic of the validator on one document is that document's refusal,
// counted, naming where it happened; the next document is checked as ever.
func TestValidatorFaultIsTheDocumentsRefusal(t *testing.T) {
	real := validateDoc
	t.Cleanup(func() { validateDoc = real })
	validateDoc = func(s *jsonschema.Schema, doc any) error {
		if m, ok := doc.(map[string]any); ok && m["boom"] != nil {
			var none []int
			_ = none[len(m)] // the kind of panic a validator bug would be
		}
		return real(s, doc)
	}
	before := Faults.Load()
	err := ValidateJSON(Response, []byte(`{"boom":1}`))
	var fe *FaultError
	if !errors.As(err, &fe) {
		t.Fatalf("a panicking validation returned %v, want a FaultError", err)
	}
	if got := Faults.Load() - before; got != 1 {
		t.Errorf("Faults grew by %d, want 1", got)
	}
	for _, want := range []string{"could not be checked against " + Response + ": the check failed on it (runtime error: index out of range [1] with length 0 at github.com/logist/logist/schemas.TestValidatorFaultIsTheDocumentsRefusal.func2 (fault_test.go:", "not of the document"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if err := ValidateJSON(Response, []byte(`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"x"}`)); err != nil {
		t.Errorf("the next document: %v", err)
	}
	var se *Error
	if err := ValidateJSON(Response, []byte(`{"action":1}`)); !errors.As(err, &se) {
		t.Errorf("an invalid document after the fault: %v, want its violations", err)
	}
	if Faults.Load()-before != 1 {
		t.Errorf("documents that did not fault were counted")
	}
}
