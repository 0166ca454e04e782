// Package schemas holds Logist's JSON Schemas (the contract with agents and
// manifest authors) and validates documents against them. The .json files in
// this folder are the source of truth and are embedded into the binaries.
package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

//go:embed *.json
var files embed.FS

// Schema file names.
const (
	Response = "llm-chat-schema.json"
	Manifest = "job-manifest-schema.json"
)

var (
	once     sync.Once
	mu       sync.Mutex // guards compiler and compiled
	compiler *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema
	compErr  error
)

// load registers every embedded schema with one compiler; each is compiled
// the first time it is used (a CLI command that checks one manifest should
// not pay for compiling every workflow's schemas).
func load() {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft7
	c.AssertFormat = true
	entries, err := files.ReadDir(".")
	if err != nil {
		compErr = err
		return
	}
	for _, e := range entries {
		b, _ := files.ReadFile(e.Name())
		if err := c.AddResource(e.Name(), bytes.NewReader(b)); err != nil {
			compErr = fmt.Errorf("schema %s: %w", e.Name(), err)
			return
		}
	}
	compiler, compiled = c, map[string]*jsonschema.Schema{}
}

// schema returns a compiled schema, compiling it on first use.
func schema(name string) (*jsonschema.Schema, error) {
	once.Do(load)
	if compErr != nil {
		return nil, compErr
	}
	mu.Lock()
	defer mu.Unlock()
	if s, ok := compiled[name]; ok {
		return s, nil
	}
	if _, err := files.ReadFile(name); err != nil {
		return nil, fmt.Errorf("unknown schema %q", name)
	}
	s, err := compiler.Compile(name)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	compiled[name] = s
	return s, nil
}

// Warm compiles the named schemas now, so that the first document checked
// against each does not wait for its compilation (the daemon: the first
// manifest dropped, the first answer).
func Warm(names ...string) error {
	for _, n := range names {
		if _, err := schema(n); err != nil {
			return err
		}
	}
	return nil
}

// CompileAll compiles every embedded schema (tests: each must compile).
func CompileAll() error {
	entries, err := files.ReadDir(".")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, err := schema(e.Name()); err != nil {
			return err
		}
	}
	return nil
}

// Raw returns the text of an embedded schema.
func Raw(name string) ([]byte, error) { return files.ReadFile(name) }

// Names lists the schema files, sorted.
func Names() []string {
	entries, _ := files.ReadDir(".") // embedded: cannot fail
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// Violation is one reason a document does not conform: where (JSON pointer
// into the document) and why.
type Violation struct {
	Pointer string `json:"pointer"`
	Reason  string `json:"reason"`
}

func (v Violation) String() string {
	p := v.Pointer
	if p == "" {
		p = "/"
	}
	return p + ": " + v.Reason
}

// Error reports every violation of a document against a schema.
type Error struct {
	Schema     string      `json:"schema"`
	Violations []Violation `json:"violations"`
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.String()
	}
	return fmt.Sprintf("does not match %s: %s", e.Schema, strings.Join(parts, "; "))
}

// Validate checks a decoded JSON value (from encoding/json with UseNumber or
// plain) against the named schema. It returns *Error when the document does
// not conform.
func Validate(name string, doc any) error {
	s, err := schema(name)
	if err != nil {
		return err
	}
	err = Guard(name, func() error { return validateDoc(s, doc) })
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	return &Error{Schema: name, Violations: leaves(ve)}
}

// ValidateJSON decodes data and validates it.
func ValidateJSON(name string, data []byte) error {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return err
	}
	return Validate(name, doc)
}

// explain gives the reason for a failed keyword: the failing schema's own
// "x-reasons" entry for the keyword, or its "x-reason" (what the value must
// be, in words), if it has one, instead of the validator's message for a
// pattern or a "not" ("not failed" says nothing), before it for any other
// keyword. loc is the keyword's absolute
// location ("file.json#/definitions/relpath/not").
func explain(loc, msg string) string {
	file, ptr, ok := strings.Cut(loc, "#")
	if !ok {
		return msg
	}
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		file = file[i+1:]
	}
	i := strings.LastIndexByte(ptr, '/')
	if i < 0 {
		return msg
	}
	keyword := ptr[i+1:]
	node := schemaNode(file, ptr[:i])
	if by, ok := node["x-reasons"].(map[string]any); ok {
		if r, ok := by[keyword].(string); ok {
			return r
		}
	}
	reason, _ := node["x-reason"].(string)
	switch {
	case reason == "":
		return msg
	case keyword == "not" || keyword == "pattern":
		return reason
	default:
		return reason + " (" + msg + ")"
	}
}

var (
	docsMu sync.Mutex
	docs   = map[string]any{}
)

// schemaNode is the object at JSON pointer ptr in the embedded schema
// file (nil if there is none).
func schemaNode(file, ptr string) map[string]any {
	docsMu.Lock()
	doc, ok := docs[file]
	if !ok {
		if b, err := files.ReadFile(file); err == nil {
			_ = json.Unmarshal(b, &doc) // embedded and compiled: valid JSON
		}
		docs[file] = doc
	}
	docsMu.Unlock()
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n := doc.(type) {
		case map[string]any:
			doc = n[tok]
		case []any:
			k, err := strconv.Atoi(tok)
			if err != nil || k < 0 || k >= len(n) {
				return nil
			}
			doc = n[k]
		default:
			return nil
		}
	}
	m, _ := doc.(map[string]any)
	return m
}

// leaves flattens the error tree to its most specific causes, which name the
// exact field; intermediate nodes only say "doesn't validate with ...".
func leaves(ve *jsonschema.ValidationError) []Violation {
	var out []Violation
	seen := map[string]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			v := Violation{Pointer: pointer(e.InstanceLocation), Reason: explain(e.AbsoluteKeywordLocation, e.Message)}
			if !seen[v.String()] {
				seen[v.String()] = true
				out = append(out, v)
			}
			return
		}
		for _, c := range alternatives(e) {
			walk(c)
		}
	}
	walk(ve)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Pointer < out[j].Pointer })
	return out
}

// alternatives are the causes of e worth reporting: of a oneOf or anyOf
// (a value that may be a string or an object), the branches whose type
// the value has, when there are some: "expected string, but got object"
// beside the object branch's own problems only misleads.
func alternatives(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	kw := e.KeywordLocation[strings.LastIndexByte(e.KeywordLocation, '/')+1:]
	if kw != "oneOf" && kw != "anyOf" {
		return e.Causes
	}
	var kept []*jsonschema.ValidationError
	for _, c := range e.Causes {
		if !typeOnly(c, e.InstanceLocation) {
			kept = append(kept, c)
		}
	}
	if len(kept) == 0 {
		return e.Causes
	}
	return kept
}

// typeOnly says whether e only says the value at loc is of another type
// (through a $ref or not).
func typeOnly(e *jsonschema.ValidationError, loc string) bool {
	if e.InstanceLocation != loc {
		return false
	}
	if len(e.Causes) == 0 {
		return strings.HasSuffix(e.KeywordLocation, "/type")
	}
	for _, c := range e.Causes {
		if !typeOnly(c, loc) {
			return false
		}
	}
	return true
}

// pointer is a violation's JSON pointer as the document names it: the
// validator escapes it as a URI fragment (a space as %20).
func pointer(loc string) string {
	if p, err := url.PathUnescape(loc); err == nil {
		return p
	}
	return loc
}
