package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// CanonicalJSON is the byte form every protocol hash is computed over:
//
//   - UTF-8 JSON with no insignificant whitespace;
//   - object keys sorted by their bytes (encoding/json sorts map keys);
//   - no HTML escaping (<, >, & stay as they are);
//   - every number in encoding/json's shortest form of its float64 value
//     (3, 0.85, 1e+21), because the value is first taken through a JSON
//     round trip into plain values (map[string]any, []any, float64, string,
//     bool, nil).
//
// The round trip is what makes a hash stable: an event built in memory
// (ints, []string, nested maps) and the same event decoded again from
// history.jsonl (float64s, []any) have the same canonical bytes. Integers
// are therefore exact only up to 2^53, which covers exit codes, durations
// and sizes; NaN and infinities are refused.
func CanonicalJSON(v any) ([]byte, error) {
	plain, err := plainValue(v)
	if err != nil {
		return nil, err
	}
	return encodePlain(plain)
}

// plainValue converts v to what encoding/json decodes JSON into.
func plainValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return out, nil
}

func encodePlain(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// plainBody returns body as plain JSON values (nil for a nil body), the
// form the guards read and the schema validator accepts.
func plainBody(body map[string]any) (map[string]any, error) {
	if body == nil {
		return nil, nil
	}
	v, err := plainValue(body)
	if err != nil {
		return nil, err
	}
	m, _ := v.(map[string]any)
	return m, nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Accessors for plain bodies: a missing or mistyped field reads as the zero
// value, so the guards never panic on a body the schema check refused.

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func num(m map[string]any, k string) (float64, bool) {
	f, ok := m[k].(float64)
	return f, ok
}

func strs(m map[string]any, k string) []string {
	a, _ := m[k].([]any)
	out := make([]string, 0, len(a))
	for _, x := range a {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
