package history

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
)

// A stored line is an envelope around the record's exact bytes:
//
//	{"hash":"<sha256 of rec>","key":"<key id>","sig":"<signature of the hash>","rec":<rec>}
//
// (key and sig only when signed), then a newline. The hash covers the
// record's bytes as stored, so the envelope is rendered by hand around
// them, never re-encoded. A unit's lines are encoded straight into the
// buffer of its one write (appendLine): the record is encoded after room
// left for the envelope's head, which is filled in once the record's hash
// and signature are known. TestLinesAsBefore holds that every line is
// byte for byte what json.Marshal of the record inside envelopeLine gave.

// sigChars is the length of a signature in base64 (Ed25519's): the room
// appendLine leaves for it before it has signed.
var sigChars = base64.StdEncoding.EncodedLen(ed25519.SignatureSize)

// headSize is the length of appendHead's output for a key and a signature
// of sigLen characters (a hash is 64).
func headSize(key string, sigLen int) int {
	n := len(`{"hash":"`) + sha256.Size*2 + len(`"`) + len(`,"rec":`)
	if key != "" || sigLen > 0 {
		n += len(`,"key":"`) + len(key) + len(`","sig":"`) + sigLen + len(`"`)
	}
	return n
}

// appendHead appends the envelope's head, everything before the record.
func appendHead(b []byte, hash, key, sig string) []byte {
	b = append(b, `{"hash":"`...)
	b = append(b, hash...)
	b = append(b, '"')
	if key != "" || sig != "" {
		b = append(b, `,"key":"`...)
		b = append(b, key...)
		b = append(b, `","sig":"`...)
		b = append(b, sig...)
		b = append(b, '"')
	}
	return append(b, `,"rec":`...)
}

// envelopeLine is the one rendering of a stored line: the envelope of
// body with its hash and, when signed, the signer's key id and signature.
func envelopeLine(body []byte, hash, key, sig string) []byte {
	b := make([]byte, 0, headSize(key, len(sig))+len(body)+2)
	b = appendHead(b, hash, key, sig)
	b = append(b, body...)
	return append(b, '}', '\n')
}

// encodeLine is rec's stored line (appendLine's) on its own.
func encodeLine(rec *Record, signer Signer) (line []byte, hash string, err error) {
	return appendLine(nil, rec, signer)
}

// appendLine appends rec's stored line (envelopeLine's rendering) to buf
// and returns it with the record's hash. On error buf is returned as it
// was.
func appendLine(buf []byte, rec *Record, signer Signer) (_ []byte, hash string, err error) {
	start := len(buf)
	var key string
	room := headSize("", 0)
	if signer != nil {
		key = signer.ID()
		room = headSize(key, sigChars)
	}
	buf = append(buf, make([]byte, room)...)
	at := len(buf)
	if buf, err = appendRecord(buf, rec); err != nil {
		return buf[:start], "", fmt.Errorf("encode history record: %w", err)
	}
	sum := sha256.Sum256(buf[at:])
	hash = hex.EncodeToString(sum[:])
	var sig string
	if signer != nil {
		sig = base64.StdEncoding.EncodeToString(signer.Sign(sum[:]))
	}
	if headSize(key, len(sig)) != room {
		// A signature of another length than Ed25519's (a test's
		// signer): the record moves to where the head ends.
		body := bytes.Clone(buf[at:])
		buf = append(appendHead(buf[:start], hash, key, sig), body...)
	} else {
		appendHead(buf[start:start], hash, key, sig)
	}
	return append(buf, '}', '\n'), hash, nil
}

// sliceWriter appends what is written to b.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

type lineEncoder struct {
	w   sliceWriter
	enc *json.Encoder
}

// encoders write records straight into a unit's buffer: json.Marshal
// would hand back a copy of its own, to be copied again.
var encoders = sync.Pool{New: func() any {
	e := &lineEncoder{}
	e.enc = json.NewEncoder(&e.w)
	return e
}}

// appendJSON appends v as json.Marshal encodes it (HTML escaped, no
// newline).
func appendJSON(buf []byte, v any) ([]byte, error) {
	e := encoders.Get().(*lineEncoder)
	e.w.b = buf
	err := e.enc.Encode(v) // json.Marshal's bytes, then a newline
	out := e.w.b
	e.w.b = nil
	encoders.Put(e)
	if err != nil {
		return buf, err
	}
	return out[:len(out)-1], nil
}

// appendRecord appends rec as json.Marshal encodes it. A commit's manifest
// the encoder knows to be compact JSON already (verbatim) is appended as it
// is, after the rest of the record: json.Marshal would scan its kilobyte
// again to compact it, byte by byte, for nothing. The commit is the
// record's last member.
func appendRecord(buf []byte, rec *Record) ([]byte, error) {
	c := rec.Commit
	if c == nil || !verbatim(c) {
		return appendJSON(buf, rec)
	}
	r := *rec
	r.Commit = nil
	out, err := appendJSON(buf, &r)
	if err != nil {
		return buf, err
	}
	out = append(out[:len(out)-1], `,"commit":{"base_manifest_sha256":"`...) // over the record's closing brace
	out = append(out, c.Base...)
	out = append(out, `","manifest_sha256":"`...)
	out = append(out, c.Sum...)
	out = append(out, `","manifest":`...)
	out = append(out, c.Manifest...)
	return append(out, "}}"...), nil
}

// verbatim says whether c encodes as its fields are, with nothing to
// escape or compact: hashes in hex, and a manifest that is Plain itself
// (its writer's json.Marshal: compact, HTML escaped, see Commit.Plain) or
// a packed one (a string of base64 after the prefix).
func verbatim(c *Commit) bool {
	if !hexOnly(c.Base) || !hexOnly(c.Sum) || len(c.Manifest) == 0 {
		return false
	}
	if len(c.Plain) > 0 && len(c.Plain) == len(c.Manifest) && &c.Plain[0] == &c.Manifest[0] {
		return true
	}
	m := c.Manifest
	if len(m) < 2+len(PackedPrefix) || m[0] != '"' || m[len(m)-1] != '"' || string(m[1:1+len(PackedPrefix)]) != PackedPrefix {
		return false
	}
	for _, b := range m[1+len(PackedPrefix) : len(m)-1] {
		if !('A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '+' || b == '/' || b == '=') {
			return false
		}
	}
	return true
}

func hexOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
