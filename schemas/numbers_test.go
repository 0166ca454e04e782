package schemas

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// A number's exact value is a rational whose size grows with its text and
// its exponent: math/big refuses exponents past a million (the validator
// took the nil it returned and panicked, so a manifest or an answer with
// 1e1000001 in an integer field crashed logistd), 1e999999 costs 20 ms and
// a million digits over a second. The validator (third_party/jsonschema,
// PATCHED.md) holds numbers beyond 1,000 characters or an exponent of
// ±1,000 out of range: every keyword that needs the value refuses them and
// they equal only the same text.
func TestOutOfRangeNumbersAreRefusedNotParsed(t *testing.T) {
	long := "1" + strings.Repeat("0", 1000)
	cases := []struct {
		schema, doc string
		valid       bool
		msg         string
	}{
		{`{"type":"integer"}`, `1e1000001`, false, "expected integer, but got a number out of range"},
		{`{"type":"integer"}`, `1e999999`, false, "out of range"},
		{`{"type":"integer"}`, `-1E-99999999999999999999`, false, "out of range"},
		{`{"type":"integer"}`, long, false, "out of range"},
		{`{"type":"integer"}`, `1e1000`, true, ""},
		{`{"type":"integer"}`, `1.5e1`, true, ""},
		{`{"type":"integer"}`, `1.5`, false, "expected integer, but got number"},
		{`{"type":["integer","string"]}`, `1e1000001`, false, "out of range"},
		{`{"type":["integer","number"]}`, `1e1000001`, true, ""},
		{`{"type":["integer","null"]}`, `null`, true, ""},
		{`{"type":"number"}`, `1e1000001`, true, ""},
		{`{"minimum":1}`, `1e1000001`, false, "number out of range"},
		{`{"exclusiveMinimum":1}`, `1e1000001`, false, "number out of range"},
		{`{"maximum":5}`, `-1e1000001`, false, "number out of range"},
		{`{"exclusiveMaximum":5}`, `1e-1000001`, false, "number out of range"},
		{`{"multipleOf":0.5}`, `1e1000001`, false, "number out of range"},
		{`{"minimum":1,"maximum":5}`, `1e999`, false, "must be <= 5"},
		{`{"multipleOf":0.5}`, `1.5e-1000`, false, "not multipleOf"},
		{`{"multipleOf":0.5}`, `1e1000`, true, ""},
		{`{"const":1}`, `1e1000001`, false, "value must be"},
		{`{"enum":[1,2,"1e1000001"]}`, `1e1000001`, false, "value must be one of"},
		{`{"enum":[1,2,1e1000001]}`, `1e1000001`, true, ""},
		{`{"enum":[1,2,1e1000001]}`, `10e1000000`, false, "value must be one of"},
		{`{"uniqueItems":true}`, `[1e1000001,1e1000001]`, false, "are equal"},
		{`{"uniqueItems":true}`, `[1e1000001,2e1000001,1]`, true, ""},
		{`{"uniqueItems":true}`, `[1e3,1000,1e1000001]`, false, "are equal"},
		{`{"properties":{"a":{"type":"integer","minimum":1}}}`, `{"a":1e1000001,"b":1e1000001}`, false, "out of range"},
		{`{"properties":{"a":{"type":"integer","minimum":1}}}`, `{"a":3,"b":1e1000001}`, true, ""},
	}
	for _, c := range cases {
		sch, err := jsonschema.CompileString("t.json", `{"$schema":"http://json-schema.org/draft-07/schema#",`+c.schema[1:])
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		for _, useNumber := range []bool{true, false} {
			if !useNumber && (strings.Contains(c.doc, "e1000001") || strings.Contains(c.doc, "e999999") || strings.Contains(c.doc, "-1") || len(c.doc) > 100) {
				continue // beyond float64 (over- or underflow): only json.Number holds it
			}
			var doc any
			dec := json.NewDecoder(bytes.NewReader([]byte(c.doc)))
			if useNumber {
				dec.UseNumber()
			}
			if err := dec.Decode(&doc); err != nil {
				if useNumber {
					t.Fatalf("%s: %v", c.doc, err)
				}
				continue
			}
			err = sch.Validate(doc)
			if (err == nil) != c.valid {
				t.Errorf("%s with %.40s (json.Number %v): valid %v, got %v", c.schema, c.doc, useNumber, c.valid, err)
				continue
			}
			if err != nil && useNumber {
				if got := strings.Join(messages(err.(*jsonschema.ValidationError)), "\n"); !strings.Contains(got, c.msg) {
					t.Errorf("%s with %.40s: %q does not say %q", c.schema, c.doc, got, c.msg)
				}
			}
		}
	}
}

// Through Logist's own schemas: the number case the fuzzer found (a
// manifest's integer limit) and an agent's answer (a parliament vote's
// motive scores, integers 1-5) name the field and why.
func TestOutOfRangeNumbersInLogistDocuments(t *testing.T) {
	for _, c := range []struct{ schema, doc, want string }{
		{Manifest, `{"task_description":"t","limits":{"max_retries":1e1000001}}`, "/limits/max_retries: "},
		{"parliament-answer-vote.json", `{"type":"VOTE","content":{"vote":"YES","reasoning":"r","motive_scores":{"m":1e1000001}}}`, "/content/motive_scores/m: "},
	} {
		err := ValidateJSON(c.schema, []byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("%s: %v, want %q and out of range", c.schema, err, c.want)
		}
	}
}
