// Package jsonindent lays out JSON that encoding/json has just encoded
// the way json.Indent does, in a single pass without a JSON scanner.
//
// Logist writes indented JSON a person reads on every commit (job.json),
// every call (the request file) and every job's end (jobHistory.json).
// json.Indent checks the syntax of its input with a state machine per
// byte; for the compact output of json.Marshal, which is valid by
// construction, that check was most of the layout's cost (about a tenth
// of the engine's CPU per call in BenchmarkCallLoop's profile). So the
// layout here trusts its input's syntax: it is for what json.Marshal
// (or json.Compact) returned. Input with whitespace between tokens goes
// to json.Indent, which checks it.
package jsonindent

import (
	"bytes"
	"encoding/json"
)

// Append appends compact, valid JSON without whitespace between its
// tokens, laid out as json.Indent(dst, compact, "", indent) would; other
// input is json.Indent's to lay out or refuse. Invalid compact input
// gets a layout, not an error.
func Append(dst, compact []byte, indent string) ([]byte, error) {
	if out, ok := appendCompact(dst, compact, indent); ok {
		return out, nil
	}
	var b bytes.Buffer
	b.Write(dst)
	if err := json.Indent(&b, compact, "", indent); err != nil {
		return dst, err
	}
	return b.Bytes(), nil
}

// Marshal is json.MarshalIndent(v, "", indent).
func Marshal(v any, indent string) ([]byte, error) {
	compact, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Append(make([]byte, 0, len(compact)+len(compact)/2), compact, indent)
}

// appendCompact lays out src, or reports false where src has whitespace
// between tokens or its brackets do not balance (json.Indent then lays
// it out, or refuses it).
func appendCompact(dst, src []byte, indent string) ([]byte, bool) {
	depth := 0
	newline := func() {
		dst = append(dst, '\n')
		for range depth {
			dst = append(dst, indent...)
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case '"':
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(src) {
				return dst, false
			}
			dst = append(dst, src[i:j+1]...)
			i = j
		case '{', '[':
			dst = append(dst, c)
			if i+1 < len(src) && (src[i+1] == '}' || src[i+1] == ']') {
				dst = append(dst, src[i+1])
				i++
				continue
			}
			depth++
			newline()
		case '}', ']':
			depth--
			if depth < 0 {
				return dst, false
			}
			newline()
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			newline()
		case ':':
			dst = append(dst, ':', ' ')
		case ' ', '\t', '\n', '\r':
			return dst, false
		default:
			dst = append(dst, c)
		}
	}
	return dst, depth == 0
}
