package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// A number the schema takes as an integer (1e2, 3.0, -0.0, 1e308: JSON
// Schema's integers are the values, not the spelling) may still not fit
// the Go field it is decoded into: encoding/json reads an int field only
// from digits, and only within its range. Its error named a Go struct
// field (`cannot unmarshal number 1e+308 into Go struct field
// ScriptStep.agents.script.delay_ms of type int64`), not the manifest's
// field. typeError says it as every manifest error is said: the field's
// JSON pointer and why, in the manifest's words.

// typeError turns err, from decoding data, into an Error naming the field
// when it is an *json.UnmarshalTypeError; otherwise nil.
func typeError(file string, data []byte, err error) *Error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Type == nil {
		return nil
	}
	ptr := pointerAt(data, te.Offset)
	if ptr == "" {
		ptr = "/" + strings.ReplaceAll(te.Field, ".", "/") // near enough: no indices or keys
	}
	value := strings.TrimPrefix(te.Value, "number ")
	var lo, hi string
	switch te.Type.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := te.Type.Bits()
		lo, hi = strconv.FormatInt(math.MinInt64>>(64-bits), 10), strconv.FormatInt(math.MaxInt64>>(64-bits), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		lo, hi = "0", strconv.FormatUint(math.MaxUint64>>(64-te.Type.Bits()), 10)
	default:
		return &Error{File: file, Pointer: ptr, Reason: fmt.Sprintf("%s cannot be read as a %s", te.Value, te.Type.Kind())}
	}
	return &Error{File: file, Pointer: ptr, Reason: fmt.Sprintf(
		"%s is not a whole number Logist can hold here: write it in digits, without a fraction or an exponent, from %s to %s",
		value, lo, hi)}
}

// pointerAt is the JSON pointer of the scalar value of data that ends at
// or after byte off (the offset an UnmarshalTypeError gives, just past
// the value); "" if none.
func pointerAt(data []byte, off int64) string {
	type frame struct {
		obj, wantKey bool
		key          string
		idx          int
	}
	var st []frame
	begin := func() {
		if n := len(st); n > 0 {
			if st[n-1].obj {
				st[n-1].wantKey = true // after this value
			} else {
				st[n-1].idx++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				begin()
				st = append(st, frame{obj: d == '{', wantKey: d == '{', idx: -1})
			default:
				if len(st) > 0 {
					st = st[:len(st)-1]
				}
			}
			continue
		}
		if n := len(st); n > 0 && st[n-1].obj && st[n-1].wantKey {
			st[n-1].key, _ = tok.(string)
			st[n-1].wantKey = false
			continue
		}
		begin()
		if dec.InputOffset() < off {
			continue
		}
		var b strings.Builder
		for _, f := range st {
			b.WriteByte('/')
			if f.obj {
				b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(f.key))
			} else {
				b.WriteString(strconv.Itoa(f.idx))
			}
		}
		return b.String()
	}
}
