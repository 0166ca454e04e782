package console

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/schemas"
)

// A reply form is built from the answer's schema: one field per
// top-level property (text, number, a choice, a yes/no; JSON for an
// object or a list), named f.KIND.NAME, which answerFromForm puts back
// together. The steward's Reply validates the result as it validates any
// answer: the form is a convenience, never the check.

// awaited is a turn that waits for a human's reply.
type awaited struct {
	Role        string
	Interaction int
	Prompt      string
	Schema      string
	Fields      []formField
}

type formField struct {
	Name        string
	Kind        string // string, text, number, integer, boolean, enum, json
	Enum        []string
	Description string
	Required    bool
}

// awaitedTurns are the turns of a history that wait for a reply, with
// the form of each.
func awaitedTurns(recs []history.Record) []awaited {
	var out []awaited
	for _, in := range steward.Awaiting(recs) {
		a := awaited{Role: in.Role, Interaction: *in.Interaction, Prompt: in.Request.Prompt}
		if name, _ := in.Request.Metadata[history.MetaAnswerSchema].(string); name != "" {
			a.Schema = name
			a.Fields = formFields(name)
		}
		out = append(out, a)
	}
	return out
}

// formFields are the fields of schema name's top-level properties (none
// when it cannot be read: the page offers the JSON box alone).
func formFields(name string) []formField {
	raw, err := schemas.Raw(name)
	if err != nil {
		return nil
	}
	type prop struct {
		Type        any    `json:"type"`
		Enum        []any  `json:"enum"`
		Description string `json:"description"`
		MaxLength   int    `json:"maxLength"`
	}
	var s struct {
		Required   []string        `json:"required"`
		Properties map[string]prop `json:"properties"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	// Required first, then by name.
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	sort.Slice(names, func(i, j int) bool {
		if req[names[i]] != req[names[j]] {
			return req[names[i]]
		}
		return names[i] < names[j]
	})
	var out []formField
	for _, n := range names {
		p := s.Properties[n]
		f := formField{Name: n, Description: p.Description, Required: req[n]}
		typ, _ := p.Type.(string)
		switch {
		case len(p.Enum) > 0:
			f.Kind = "enum"
			for _, e := range p.Enum {
				f.Enum = append(f.Enum, fmt.Sprint(e))
			}
		case typ == "string" && (p.MaxLength == 0 || p.MaxLength > 200):
			f.Kind = "text"
		case typ == "string", typ == "number", typ == "integer", typ == "boolean":
			f.Kind = typ
		default:
			f.Kind = "json"
		}
		out = append(out, f)
	}
	return out
}

// answerFromForm is the answer a reply form's f.KIND.NAME fields make
// (nil when the form has none); an empty optional field is left out.
func answerFromForm(f url.Values) (json.RawMessage, error) {
	obj := map[string]any{}
	found := false
	for key, vals := range f {
		rest, ok := strings.CutPrefix(key, "f.")
		if !ok || len(vals) == 0 {
			continue
		}
		found = true
		kind, name, ok := strings.Cut(rest, ".")
		if !ok || name == "" {
			return nil, fmt.Errorf("form field %q", key)
		}
		v := vals[len(vals)-1] // a checkbox after its hidden "false"
		if v == "" && kind != "string" && kind != "text" {
			continue
		}
		switch kind {
		case "string", "text", "enum":
			if v != "" {
				obj[name] = v
			}
		case "number", "integer":
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q is not a number", name, v)
			}
			obj[name] = n
		case "boolean":
			obj[name] = v == "true"
		case "json":
			var x any
			if err := json.Unmarshal([]byte(v), &x); err != nil {
				return nil, fmt.Errorf("%s: not JSON: %v", name, err)
			}
			obj[name] = x
		default:
			return nil, fmt.Errorf("form field %q", key)
		}
	}
	if !found {
		return nil, nil
	}
	return json.Marshal(obj)
}
