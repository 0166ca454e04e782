package agent

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/schemas"
)

// AnswerSchema is the base answer schema in the subset strict structured
// output accepts (see strictSchema).
func AnswerSchema() (map[string]any, error) { return PhaseAnswerSchema("") }

// AnswerSchemaFor is the schema the request's answer must satisfy: its
// phase's own (metadata answer_schema) or the base one.
func AnswerSchemaFor(req *Request) (map[string]any, error) {
	name, _ := req.Metadata[history.MetaAnswerSchema].(string)
	return PhaseAnswerSchema(name)
}

// PhaseAnswerSchema is a phase's answer schema ("" = the base contract,
// schemas/llm-chat-schema.json) flattened — its allOf parts merged, the
// base contract referenced by $ref included — and reduced to the subset
// strict structured output accepts: every property required (optional
// ones may be null, which Logist reads as absent), no additional
// properties, only type, enum, items and descriptions. cost_usd is dropped
// (the provider computes the cost); limits the subset lacks (maxLength,
// patterns, bounds) are stated in descriptions and still checked on the
// answer.
func PhaseAnswerSchema(name string) (map[string]any, error) {
	if name == "" {
		name = schemas.Response
	}
	s, err := loadSchema(name)
	if err != nil {
		return nil, err
	}
	flat, err := flatten(s)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	out := strictSchema(flat, true)
	delete(out, "description")
	return out, nil
}

// FullAnswerSchemaFor is the request's answer schema flattened (allOf
// merged, $refs inlined) but otherwise as written, for programs that
// validate with a full JSON Schema validator. cost_usd is dropped.
func FullAnswerSchemaFor(req *Request) (map[string]any, error) {
	name, _ := req.Metadata[history.MetaAnswerSchema].(string)
	if name == "" {
		name = schemas.Response
	}
	s, err := loadSchema(name)
	if err != nil {
		return nil, err
	}
	flat, err := flatten(s)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	out := map[string]any{}
	for k, v := range flat {
		switch k {
		case "$schema", "$id", "title", "x-schema-version", "allOf":
		default:
			out[k] = v
		}
	}
	if props, ok := out["properties"].(map[string]any); ok {
		delete(props, "cost_usd")
	}
	return out, nil
}

func loadSchema(name string) (map[string]any, error) {
	raw, err := schemas.Raw(name)
	if err != nil {
		return nil, err
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return s, nil
}

// flatten merges a schema's allOf parts (and the schemas they $ref) into
// one object schema.
func flatten(s map[string]any) (map[string]any, error) {
	if ref, ok := s["$ref"].(string); ok {
		r, err := loadSchema(ref)
		if err != nil {
			return nil, err
		}
		return flatten(r)
	}
	all, ok := s["allOf"].([]any)
	if !ok {
		return s, nil
	}
	out := map[string]any{"type": "object"}
	props := map[string]any{}
	var req []any
	for _, p := range all {
		pm, ok := p.(map[string]any)
		if !ok {
			continue
		}
		f, err := flatten(pm)
		if err != nil {
			return nil, err
		}
		if ps, ok := f["properties"].(map[string]any); ok {
			for k, v := range ps {
				props[k] = v
			}
		}
		if r, ok := f["required"].([]any); ok {
			req = append(req, r...)
		}
	}
	out["properties"], out["required"] = props, req
	return out, nil
}

func strictSchema(n map[string]any, required bool) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"type", "enum", "description"} {
		if v, ok := n[k]; ok {
			out[k] = v
		}
	}
	var limits []string
	for _, k := range []string{"maxLength", "minLength", "pattern", "minimum", "maximum", "minItems", "maxItems"} {
		if v, ok := n[k]; ok {
			limits = append(limits, fmt.Sprintf("%s %v", k, v))
		}
	}
	if len(limits) > 0 {
		d, _ := out["description"].(string)
		out["description"] = strings.TrimSpace(fmt.Sprintf("%s (%s)", d, strings.Join(limits, ", ")))
	}
	if _, ok := out["type"]; !ok {
		if _, isEnum := out["enum"]; !isEnum {
			if _, isObj := n["properties"]; isObj {
				out["type"] = "object"
			}
		}
	}
	if it, ok := n["items"].(map[string]any); ok {
		out["items"] = strictSchema(it, true)
	}
	if props, ok := n["properties"].(map[string]any); ok {
		req := map[string]bool{}
		if r, ok := n["required"].([]any); ok {
			for _, x := range r {
				if s, ok := x.(string); ok {
					req[s] = true
				}
			}
		}
		ps := map[string]any{}
		names := []string{}
		for name, p := range props {
			pm, ok := p.(map[string]any)
			if !ok || name == "cost_usd" {
				continue
			}
			ps[name] = strictSchema(pm, req[name])
			names = append(names, name)
		}
		sort.Strings(names)
		out["properties"], out["required"], out["additionalProperties"] = ps, names, false
	}
	if !required {
		// Strict output requires every property; an optional one may be null.
		switch t := out["type"].(type) {
		case string:
			out["type"] = []any{t, "null"}
		}
		if e, ok := out["enum"].([]any); ok {
			out["enum"] = append(append([]any{}, e...), nil)
		}
	}
	return out
}
