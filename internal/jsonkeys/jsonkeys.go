// Package jsonkeys finds a key given twice in one JSON object. RFC 8259
// only says names "SHOULD be unique"; readers disagree on which of two
// they keep (Go keeps the last, others the first), so a document a person
// reads one way could act another. Logist refuses such a document
// wherever it takes JSON from outside: an agent's answer, a job's
// manifest, a console request's body. One function, so the rule and its
// message are the same everywhere.
package jsonkeys

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// Duplicate is the first key that appears twice in one object of the JSON
// value s (well formed: decoded once already) and the JSON pointer of that
// object ("/" for the top one); "" when every object's keys are distinct.
// A long key is cut to 64 bytes and "…".
func Duplicate(s []byte) (key, at string) {
	dec := json.NewDecoder(bytes.NewReader(s))
	dec.UseNumber()
	key, at, _ = duplicateIn(dec, "")
	if at == "" {
		at = "/"
	}
	if len(key) > 64 {
		key = strings.ToValidUTF8(key[:64], "") + "…"
	}
	return key, at
}

// pointerEscaper escapes a key as a JSON pointer's segment (RFC 6901). Made
// once: a Replacer is safe for concurrent use, and making one per key was
// most of Duplicate's cost.
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// duplicateIn reads the next value of dec, at pointer ptr, and finds a
// duplicate key in it (Duplicate).
func duplicateIn(dec *json.Decoder, ptr string) (key, at string, err error) {
	t, err := dec.Token()
	if err != nil {
		return "", "", err
	}
	switch t {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return "", "", err
			}
			k, _ := kt.(string)
			if seen[k] {
				return k, ptr, nil
			}
			seen[k] = true
			if key, at, err := duplicateIn(dec, ptr+"/"+pointerEscaper.Replace(k)); key != "" || err != nil {
				return key, at, err
			}
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if key, at, err := duplicateIn(dec, ptr+"/"+strconv.Itoa(i)); key != "" || err != nil {
				return key, at, err
			}
		}
	default:
		return "", "", nil // a scalar
	}
	_, err = dec.Token() // the closing delimiter
	return "", "", err
}

// DuplicateIn is Duplicate for s already decoded into doc (what
// encoding/json makes of it in an any: maps, slices, scalars). Decoding
// keeps one entry per key, so s has a duplicate exactly when its text
// names more keys than doc's objects hold: a count of both, one pass over
// the bytes and one over doc without allocating, decides the common case;
// only a document with a duplicate is read again to find it.
func DuplicateIn(s []byte, doc any) (key, at string) {
	if keysIn(s) == entries(doc) {
		return "", ""
	}
	return Duplicate(s)
}

// keysIn counts the object keys of the well-formed JSON text s: the
// strings followed by a colon.
func keysIn(s []byte) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '"' {
			continue
		}
		for i++; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' {
				i++ // the escaped byte (a \" included)
			}
		}
		j := i + 1
		for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
			j++
		}
		if j < len(s) && s[j] == ':' {
			n++
		}
	}
	return n
}

// entries counts the keys of every object in doc.
func entries(doc any) int {
	switch v := doc.(type) {
	case map[string]any:
		n := len(v)
		for _, e := range v {
			n += entries(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range v {
			n += entries(e)
		}
		return n
	}
	return 0
}
