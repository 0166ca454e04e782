// Package response turns an agent's raw output into a validated answer, by
// the four layers of seed 002: JSON Schema, action enumeration, evidence
// file resolution inside the workspace, summary constraints. What it
// tolerates around the JSON is documented in docs/agents.md.
package response

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/logist/logist/internal/pathguard"
	"github.com/logist/logist/internal/workflow"
	"github.com/logist/logist/schemas"
)

// MaxSummary is the seed's summary limit in characters.
const MaxSummary = 500

// Error codes of failed validation; each leads to STUCK per the escalation
// matrix.
const (
	CodeEmpty             = "AGENT_EMPTY"
	CodeNotJSON           = "NOT_JSON"
	CodeSeveralObjects    = "SEVERAL_OBJECTS"
	CodeSchemaInvalid     = "SCHEMA_INVALID"
	CodeActionInvalid     = "ACTION_INVALID"
	CodeSummaryMissing    = "SUMMARY_MISSING"
	CodeProtocolViolation = "PROTOCOL_VIOLATION"
)

// Error is a validation failure: a code (for logs, metrics and the
// escalation matrix) and a reason a steward can act on.
type Error struct {
	Code   string
	Reason string
}

func (e *Error) Error() string { return e.Code + ": " + e.Reason }

// Answer is a valid agent answer.
type Answer struct {
	Action        string   `json:"action"`
	EvidenceFiles []string `json:"evidence_files"`
	Summary       string   `json:"summary_for_supervisor"`
	CostUSD       *float64 `json:"cost_usd,omitempty"`
}

// Warning is accepted but recorded (missing evidence files).
type Warning struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// Extract finds the one JSON object in raw output. It tolerates surrounding
// whitespace, a UTF-8 BOM, and the whole answer wrapped in one Markdown code
// fence (```json ... ```). Anything else around the object — prose, a second
// object — is refused.
func Extract(raw []byte) (map[string]any, error) {
	s := bytes.TrimSpace(bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")))
	if len(s) == 0 {
		return nil, &Error{CodeEmpty, "the agent answered nothing"}
	}
	if bytes.HasPrefix(s, []byte("```")) {
		body, ok := unfence(s)
		if !ok {
			return nil, &Error{CodeNotJSON, "a code fence that does not wrap the whole answer"}
		}
		s = body
	}
	dec := json.NewDecoder(bytes.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &Error{CodeNotJSON, "not a JSON object: " + err.Error()}
	}
	var extra any
	if err := dec.Decode(&extra); err != io.EOF {
		if err == nil {
			return nil, &Error{CodeSeveralObjects, "more than one JSON value; answer exactly one object"}
		}
		return nil, &Error{CodeNotJSON, "text after the JSON object: " + err.Error()}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{CodeNotJSON, fmt.Sprintf("the answer is a JSON %s, not an object", kind(v))}
	}
	return obj, nil
}

func unfence(s []byte) ([]byte, bool) {
	nl := bytes.IndexByte(s, '\n')
	if nl < 0 {
		return nil, false
	}
	info := strings.TrimSpace(string(s[3:nl]))
	if info != "" && info != "json" && info != "JSON" {
		return nil, false
	}
	body := bytes.TrimSpace(s[nl+1:])
	if !bytes.HasSuffix(body, []byte("```")) {
		return nil, false
	}
	body = bytes.TrimSpace(bytes.TrimSuffix(body, []byte("```")))
	if bytes.Contains(body, []byte("```")) {
		return nil, false
	}
	return body, true
}

func kind(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// Validate runs all four layers on raw output. workspace is the job's
// workspace; evidence paths are resolved inside it. It returns the answer
// and warnings, or *Error.
func Validate(raw []byte, workspace string) (*Answer, []Warning, error) {
	ans, err := Check(raw)
	if err != nil {
		return nil, nil, err
	}
	var warns []Warning
	for _, p := range ans.EvidenceFiles {
		_, exists, err := pathguard.Resolve(workspace, p)
		if err != nil {
			var esc *pathguard.EscapeError
			if errors.As(err, &esc) {
				return nil, nil, &Error{CodeProtocolViolation, "evidence_files: " + esc.Error()}
			}
			return nil, nil, &Error{CodeProtocolViolation, "evidence_files: " + err.Error()}
		}
		if !exists {
			warns = append(warns, Warning{Code: "EVIDENCE_MISSING", Detail: fmt.Sprintf("evidence file %q does not exist in the workspace", p)})
		}
	}
	return ans, warns, nil
}

// Check runs the layers that need no workspace: extraction, action,
// summary, schema. Replay (logist verify) uses it on recorded answers.
func Check(raw []byte) (*Answer, error) {
	obj, err := Extract(raw)
	if err != nil {
		return nil, err
	}
	// Layers 2 and 4 first where they name the problem better than the
	// generic schema message does.
	if a, ok := obj["action"]; ok {
		s, isStr := a.(string)
		if !isStr || !validAction(s) {
			return nil, &Error{CodeActionInvalid, fmt.Sprintf("action %s is not one of %s", jsonText(a), strings.Join(workflow.Actions, ", "))}
		}
	}
	if sum, ok := obj["summary_for_supervisor"]; !ok {
		return nil, &Error{CodeSummaryMissing, "summary_for_supervisor is missing"}
	} else if s, isStr := sum.(string); isStr && strings.TrimSpace(s) == "" {
		return nil, &Error{CodeSummaryMissing, "summary_for_supervisor is empty"}
	}
	if err := schemas.Validate(schemas.Response, obj); err != nil {
		var se *schemas.Error
		if errors.As(err, &se) {
			parts := make([]string, len(se.Violations))
			for i, v := range se.Violations {
				parts[i] = v.String()
			}
			return nil, &Error{CodeSchemaInvalid, strings.Join(parts, "; ")}
		}
		return nil, &Error{CodeSchemaInvalid, err.Error()}
	}
	b, _ := json.Marshal(obj)
	var ans Answer
	if err := json.Unmarshal(b, &ans); err != nil {
		return nil, &Error{CodeSchemaInvalid, err.Error()}
	}
	if n := len([]rune(ans.Summary)); n > MaxSummary {
		return nil, &Error{CodeSchemaInvalid, fmt.Sprintf("summary_for_supervisor has %d characters, at most %d", n, MaxSummary)}
	}
	if ans.EvidenceFiles == nil {
		ans.EvidenceFiles = []string{}
	}
	return &ans, nil
}

func validAction(s string) bool {
	for _, a := range workflow.Actions {
		if a == s {
			return true
		}
	}
	return false
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

// DropNulls removes null members of objects, recursively: an agent held to
// a strict schema says null for an optional field it leaves out.
func DropNulls(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, m := range x {
			if m == nil {
				delete(x, k)
			} else {
				DropNulls(m)
			}
		}
	case []any:
		for _, m := range x {
			DropNulls(m)
		}
	}
}
