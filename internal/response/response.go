// Package response holds agent answers to their contract. Judge is the one
// entry point, used by the engine, turn-based play, steward replies,
// logist validate and logist verify's replay, so that an answer is held to
// the same rules wherever it is judged: seed 002's four layers (JSON
// Schema, action enumeration, evidence paths inside the workspace, summary
// constraints), then a phase's own schema and, in a git workspace, the
// workspace's repository (Repository) for a COMPLETED answer; or, for a
// turn of a deliberation, the turn's schema alone. What it tolerates around
// the JSON is documented in docs/agents.md.
package response

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/jsonkeys"
)

// MaxSummary is the seed's summary limit in characters.
const MaxSummary = 500

// Codes is every validation code, in the order that picks the one an
// answer is refused for when it breaks its contract in several ways (all
// of them are listed in Verdict.Violations and recorded): first an answer
// that cannot be read at all (these exclude every other), then an evidence
// path that leaves the workspace (the security-relevant one, which must be
// audited whatever else is wrong), then the action and summary layers,
// which name a problem better than the generic schema message does.
// Metrics and logist verify take the list from here.
var Codes = []string{codes.AgentEmpty, codes.NotJSON, codes.SeveralObjects, codes.ProtocolViolation, codes.ActionInvalid, codes.SummaryMissing, codes.SchemaInvalid}

// Error is a validation failure: a code (for logs, metrics and the
// escalation matrix) and a reason a steward can act on.
type Error struct {
	Code   string
	Reason string
	// Schema names the phase's or turn's own schema that refused the
	// answer ("" for the base contract).
	Schema string
	// Path is the evidence path a PROTOCOL_VIOLATION is about; Workspace
	// marks one the workspace decided (a symlink out, a path that could
	// not be resolved, or with no Path its repository: Repository), not
	// the answer's own text.
	Path      string
	Workspace bool
}

func (e *Error) Error() string { return e.Code + ": " + e.Reason }

// Explain is what a steward is told: the refusing schema and the reason
// for a phase's own schema, else the code and the reason.
func (e *Error) Explain() string {
	if e.Schema != "" {
		return e.Schema + ": " + e.Reason
	}
	return e.Error()
}

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
		return nil, &Error{Code: codes.AgentEmpty, Reason: "the agent answered nothing"}
	}
	if bytes.HasPrefix(s, []byte("```")) {
		body, ok := unfence(s)
		if !ok {
			return nil, &Error{Code: codes.NotJSON, Reason: "a code fence that does not wrap the whole answer"}
		}
		s = body
	}
	dec := json.NewDecoder(bytes.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &Error{Code: codes.NotJSON, Reason: "not a JSON object: " + err.Error()}
	}
	var extra any
	if err := dec.Decode(&extra); err != io.EOF {
		if err == nil {
			return nil, &Error{Code: codes.SeveralObjects, Reason: "more than one JSON value; answer exactly one object"}
		}
		return nil, &Error{Code: codes.NotJSON, Reason: "text after the JSON object: " + err.Error()}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Code: codes.NotJSON, Reason: fmt.Sprintf("the answer is a JSON %s, not an object", kind(v))}
	}
	if key, at := jsonkeys.DuplicateIn(s, v); key != "" {
		// Go keeps the last, other readers the first: the answer acted on
		// and the one a person reads in raw_response would differ.
		return nil, &Error{Code: codes.NotJSON, Reason: fmt.Sprintf("key %q appears twice in the object at %s; give each key once", key, at)}
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
