package schemas

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// The validator builds its record of what a call left unevaluated only
// where it is read (third_party/jsonschema, PATCHED.md). Logist's schemas
// are draft 7, which has no unevaluated keywords, so the golden test does
// not reach them: these cases hold that the record still flows where it
// is needed (through schemas applied in place, at any depth) and that
// additionalProperties still sees what properties and patternProperties
// leave.
func TestUnevaluatedStillTracked(t *testing.T) {
	cases := []struct {
		schema, doc string
		valid       bool
		msg         string
	}{
		{`{"allOf":[{"properties":{"a":{}}}],"properties":{"b":{}},"unevaluatedProperties":false}`, `{"a":1,"b":2}`, true, ""},
		{`{"allOf":[{"properties":{"a":{}}}],"properties":{"b":{}},"unevaluatedProperties":false}`, `{"a":1,"c":3}`, false, "c"},
		{`{"allOf":[{"allOf":[{"properties":{"a":{}}}]}],"unevaluatedProperties":false}`, `{"a":1}`, true, ""},
		{`{"allOf":[{"allOf":[{"properties":{"a":{}}}]}],"unevaluatedProperties":false}`, `{"a":1,"x":1}`, false, "x"},
		{`{"$defs":{"d":{"properties":{"a":{}}}},"$ref":"#/$defs/d","unevaluatedProperties":false}`, `{"a":1}`, true, ""},
		{`{"properties":{"o":{"allOf":[{"properties":{"a":{}}}],"unevaluatedProperties":false}}}`, `{"o":{"a":1}}`, true, ""},
		{`{"properties":{"o":{"allOf":[{"properties":{"a":{}}}],"unevaluatedProperties":false}}}`, `{"o":{"z":1}}`, false, "z"},
		{`{"prefixItems":[{}],"allOf":[{"contains":{"const":2}}],"unevaluatedItems":false}`, `[1,2]`, true, ""},
		{`{"prefixItems":[{}],"allOf":[{"contains":{"const":2}}],"unevaluatedItems":false}`, `[1,3]`, false, ""},
		{`{"patternProperties":{"^x":{}},"properties":{"a":{}},"additionalProperties":false}`, `{"a":1,"xy":2}`, true, ""},
		{`{"patternProperties":{"^x":{}},"properties":{"a":{}},"additionalProperties":false}`, `{"a":1,"q":1}`, false, "additionalProperties 'q' not allowed"},
		{`{"properties":{"a":{}},"additionalProperties":{"type":"string"}}`, `{"a":1,"q":"s"}`, true, ""},
		{`{"properties":{"a":{}},"additionalProperties":{"type":"string"}}`, `{"a":1,"q":2}`, false, "expected string"},
	}
	for _, c := range cases {
		c.schema = `{"$schema":"https://json-schema.org/draft/2020-12/schema",` + c.schema[1:]
		sch, err := jsonschema.CompileString("t.json", c.schema)
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		var doc any
		if err := json.Unmarshal([]byte(c.doc), &doc); err != nil {
			t.Fatal(err)
		}
		err = sch.Validate(doc)
		if (err == nil) != c.valid {
			t.Errorf("%s with %s: valid %v, got %v", c.schema, c.doc, c.valid, err)
			continue
		}
		if err != nil {
			if !strings.Contains(strings.Join(messages(err.(*jsonschema.ValidationError)), "\n"), c.msg) {
				t.Errorf("%s with %s: %#v does not say %q", c.schema, c.doc, err, c.msg)
			}
		}
	}
}

func messages(e *jsonschema.ValidationError) []string {
	out := []string{e.InstanceLocation + " " + e.Message}
	for _, c := range e.Causes {
		out = append(out, messages(c)...)
	}
	return out
}

// The validator's dynamic scope is the list of schemas the call passes
// through, the one being validated last. The patch that moved the
// helpers onto a stack value read the caller's shorter list in three
// places (the "if" keyword's discard mark, twice, and $dynamicRef's
// search), which panicked on a lone "if" at a schema's root; the
// upstream JSON-Schema-Test-Suite found it (third_party/jsonschema,
// PATCHED.md). These hold "if" at the root and nested, and one
// $dynamicRef.
func TestDynamicScopeIsTheCallsOwn(t *testing.T) {
	cases := []struct {
		draft, schema, doc string
		valid              bool
	}{
		{"http://json-schema.org/draft-07/schema#", `{"if":{"const":0}}`, `0`, true},
		{"http://json-schema.org/draft-07/schema#", `{"if":{"const":0}}`, `1`, true},
		{"http://json-schema.org/draft-07/schema#", `{"if":{"const":0},"then":{"type":"integer"},"else":{"type":"string"}}`, `0`, true},
		{"http://json-schema.org/draft-07/schema#", `{"if":{"const":0},"then":{"type":"string"},"else":{"type":"string"}}`, `0`, false},
		{"http://json-schema.org/draft-07/schema#", `{"if":{"const":0},"then":{"type":"integer"},"else":{"type":"string"}}`, `1`, false},
		{"http://json-schema.org/draft-07/schema#", `{"properties":{"a":{"if":{"minimum":5},"then":{"multipleOf":5}}}}`, `{"a":7}`, false},
		{"http://json-schema.org/draft-07/schema#", `{"properties":{"a":{"if":{"minimum":5},"then":{"multipleOf":5}}}}`, `{"a":10}`, true},
		{"https://json-schema.org/draft/2020-12/schema",
			`{"$id":"https://t/root","$dynamicAnchor":"node","type":"object","properties":{"kid":{"$dynamicRef":"#node"}},"$defs":{"strict":{"$id":"https://t/strict","$dynamicAnchor":"node","$ref":"root","unevaluatedProperties":false}}}`,
			`{"kid":{"kid":{}}}`, true},
	}
	for _, c := range cases {
		schema := `{"$schema":"` + c.draft + `",` + c.schema[1:]
		sch, err := jsonschema.CompileString("t.json", schema)
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		var doc any
		if err := json.Unmarshal([]byte(c.doc), &doc); err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(doc); (err == nil) != c.valid {
			t.Errorf("%s with %s: valid %v, got %v", schema, c.doc, c.valid, err)
		}
	}
}
