package schemas

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestEmbeddedSchemasCompile(t *testing.T) {
	for _, name := range []string{Response, Manifest} {
		// An empty object is decodable JSON; any error must be a
		// validation *Error, never a load or compile failure.
		err := Validate(name, map[string]any{})
		var se *Error
		if !errors.As(err, &se) {
			t.Fatalf("Validate(%s, {}) = %v (%T), want *Error (schema must compile)", name, err, err)
		}
		if se.Schema != name || len(se.Violations) == 0 {
			t.Errorf("error %+v", se)
		}
	}
	if err := CompileAll(); err != nil {
		t.Fatalf("compile error: %v", err)
	}
	ents, err := files.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(compiled) != len(ents) || len(ents) < 2 {
		t.Errorf("%d schemas compiled of %d embedded files", len(compiled), len(ents))
	}
}

func TestRaw(t *testing.T) {
	for _, c := range []struct{ name, title string }{
		{Response, "Agent Response Schema"},
		{Manifest, "Job Manifest Schema"},
	} {
		b, err := Raw(c.name)
		if err != nil {
			t.Fatalf("Raw(%s): %v", c.name, err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("Raw(%s) is not JSON: %v", c.name, err)
		}
		if doc["title"] != c.title || doc["$schema"] != "http://json-schema.org/draft-07/schema#" {
			t.Errorf("Raw(%s): title %v $schema %v", c.name, doc["title"], doc["$schema"])
		}
		if doc["x-schema-version"] != float64(1) {
			t.Errorf("Raw(%s): x-schema-version %v", c.name, doc["x-schema-version"])
		}
	}
	if _, err := Raw("nope.json"); err == nil {
		t.Error("Raw of a missing schema succeeded")
	}
}

func TestUnknownSchema(t *testing.T) {
	err := Validate("nope.json", map[string]any{})
	var se *Error
	if err == nil || errors.As(err, &se) || !strings.Contains(err.Error(), "nope.json") {
		t.Errorf("Validate(unknown) = %v", err)
	}
}

func TestResponseSchema(t *testing.T) {
	ok := []string{
		`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"x"}`,
		`{"action":"STUCK","evidence_files":["a","b/c"],"summary_for_supervisor":"","cost_usd":0,"usage":{}}`,
		`{"action":"RETRY","evidence_files":[],"summary_for_supervisor":"` + strings.Repeat("ü", 500) + `"}`,
	}
	for _, s := range ok {
		if err := ValidateJSON(Response, []byte(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	bad := []struct{ doc, pointer string }{
		{`{"action":"DONE","evidence_files":[],"summary_for_supervisor":"x"}`, "/action"},
		{`{"action":"completed","evidence_files":[],"summary_for_supervisor":"x"}`, "/action"},
		{`{"action":"COMPLETED","evidence_files":"a","summary_for_supervisor":"x"}`, "/evidence_files"},
		{`{"action":"COMPLETED","evidence_files":[1],"summary_for_supervisor":"x"}`, "/evidence_files/0"},
		{`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"` + strings.Repeat("ü", 501) + `"}`, "/summary_for_supervisor"},
		{`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"x","cost_usd":-0.5}`, "/cost_usd"},
		{`{"evidence_files":[],"summary_for_supervisor":"x"}`, ""},
		{`[]`, ""},
	}
	for _, c := range bad {
		err := ValidateJSON(Response, []byte(c.doc))
		var se *Error
		if !errors.As(err, &se) {
			t.Errorf("%s: %v, want *Error", c.doc, err)
			continue
		}
		found := false
		for _, v := range se.Violations {
			if v.Pointer == c.pointer {
				found = true
			}
			if v.Reason == "" {
				t.Errorf("%s: violation without reason", c.doc)
			}
		}
		if !found {
			t.Errorf("%s: violations %+v, want one at %q", c.doc, se.Violations, c.pointer)
		}
		if !strings.Contains(se.Error(), "does not match "+Response) {
			t.Errorf("Error() = %q", se.Error())
		}
	}
}

func TestViolationsAreLeavesSortedAndDistinct(t *testing.T) {
	doc := `{"status":"NOPE","job_id":"a/b","cost_threshold":"x","agents":{"worker":{"provider":"magic"}}}`
	err := ValidateJSON(Manifest, []byte(doc))
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("%v", err)
	}
	seen := map[string]bool{}
	ptrs := map[string]bool{}
	for i, v := range se.Violations {
		if seen[v.String()] {
			t.Errorf("duplicate violation %s", v)
		}
		seen[v.String()] = true
		ptrs[v.Pointer] = true
		if i > 0 && se.Violations[i-1].Pointer > v.Pointer {
			t.Errorf("violations not sorted by pointer: %q before %q", se.Violations[i-1].Pointer, v.Pointer)
		}
		if strings.Contains(v.Reason, "doesn't validate with") {
			t.Errorf("intermediate node reported: %s", v)
		}
	}
	for _, want := range []string{"/status", "/job_id", "/cost_threshold", "/agents/worker/provider", ""} {
		if !ptrs[want] {
			t.Errorf("no violation at %q in %v", want, se.Violations)
		}
	}
}

func TestViolationString(t *testing.T) {
	if s := (Violation{Pointer: "", Reason: "r"}).String(); s != "/: r" {
		t.Errorf("root violation %q", s)
	}
	if s := (Violation{Pointer: "/a/0", Reason: "r"}).String(); s != "/a/0: r" {
		t.Errorf("violation %q", s)
	}
	e := &Error{Schema: "s.json", Violations: []Violation{{"/a", "x"}, {"", "y"}}}
	if e.Error() != "does not match s.json: /a: x; /: y" {
		t.Errorf("Error() = %q", e.Error())
	}
}

func TestValidateJSONSyntaxError(t *testing.T) {
	err := ValidateJSON(Response, []byte(`{"action":`))
	var se *Error
	if err == nil || errors.As(err, &se) {
		t.Errorf("ValidateJSON(truncated) = %v, want a decode error", err)
	}
}

// Numbers decoded with or without UseNumber validate alike.
func TestValidatePlainAndNumberDecoding(t *testing.T) {
	var plain any
	if err := json.Unmarshal([]byte(`{"action":"RETRY","evidence_files":[],"summary_for_supervisor":"x","cost_usd":1.5}`), &plain); err != nil {
		t.Fatal(err)
	}
	if err := Validate(Response, plain); err != nil {
		t.Errorf("plain float64: %v", err)
	}
	if err := Validate(Response, map[string]any{"action": "RETRY", "evidence_files": []any{}, "summary_for_supervisor": "x", "cost_usd": json.Number("-1")}); err == nil {
		t.Error("negative json.Number cost accepted")
	}
}

func TestManifestSchemaMinimal(t *testing.T) {
	ok := `{"task_description":"t","agents":{"worker":{"provider":"script","script":[{}]}}}`
	if err := ValidateJSON(Manifest, []byte(ok)); err != nil {
		t.Errorf("minimal manifest: %v", err)
	}
	// A script agent needs at least one step: an empty script cannot
	// answer, and would not survive being re-encoded (omitempty).
	err := ValidateJSON(Manifest, []byte(`{"task_description":"t","agents":{"worker":{"provider":"script","script":[]}}}`))
	var se *Error
	if !errors.As(err, &se) || se.Violations[0].Pointer != "/agents/worker/script" {
		t.Errorf("empty script: %v", err)
	}
}

// Warm compiles the schemas it is given, and names one it does not know.
func TestWarm(t *testing.T) {
	if err := Warm(Manifest, Response); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	_, m := compiled[Manifest]
	_, r := compiled[Response]
	mu.Unlock()
	if !m || !r {
		t.Fatalf("after Warm: manifest compiled %v, response compiled %v", m, r)
	}
	if err := Warm("no-such-schema.json"); err == nil || !strings.Contains(err.Error(), "no-such-schema.json") {
		t.Fatalf("Warm of an unknown schema: %v", err)
	}
}

// A violation says why, not just which keyword failed (hostile inputs
// H23, H27, H102): "not failed" told a manifest's author nothing.
func TestViolationsSayWhy(t *testing.T) {
	t.Parallel()
	const agents = `"agents":{"worker":{"provider":"script","script":[{}]}}`
	for _, c := range []struct{ doc, want string }{
		{`{"task_description":"t","job_id":"../escape",` + agents + `}`, "/job_id: must be a plain name (it names the job's folder)"},
		{`{"task_description":"t","job_id":"a..b",` + agents + `}`, "/job_id: must be a plain name"},
		{`{"task_description":"t","context_files":["../../x"],` + agents + `}`, "/context_files/0: leaves the job folder (a '..' part)"},
		{`{"task_description":"t","context_files":["/etc/passwd"],` + agents + `}`, "/context_files/0: must be relative to the job folder (not absolute)"},
		{`{"task_description":"t","context_files":[3],` + agents + `}`, "/context_files/0: must be a path relative to the job folder that stays inside it: not absolute, no '..' part, no NUL byte, 1 to 1024 bytes (expected string, but got number)"},
		{`{"task_description":"t","prompts":{"worker":"../p.md"},` + agents + `}`, "/prompts/worker: leaves the job folder"},
	} {
		err := ValidateJSON(Manifest, []byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %q", c.doc, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "not failed") {
			t.Errorf("%s: %v", c.doc, err)
		}
	}
}
