package jsonindent

import (
	"bytes"
	"encoding/json"
	"testing"
)

var samples = []string{
	`{}`, `[]`, `1`, `"x"`, `null`, `{"a":[]}`, `{"a":{}}`, `[1,2,[3,{"b":null}]]`,
	`{"k":"a\"b\\","l":"{[,:]}","m":[true,false],"n":{"o":{"p":[{}]}}}`,
	`{"esc":"\u003cscript\u003e \u2028","x":-1.5e+10}`,
	"{\"a\": 1}", "[1, 2]", `{"a":1]`, `{"a":"unterminated`, `}`,
}

func TestAppendIsJSONIndent(t *testing.T) {
	for _, s := range samples {
		same(t, []byte(s))
	}
}

// same asserts that Append gives what json.Indent gives for valid input
// or input with whitespace, and never panics.
func same(t *testing.T, src []byte) {
	t.Helper()
	var want bytes.Buffer
	wantErr := json.Indent(&want, src, "", "  ")
	got, err := Append([]byte("prefix:"), src, "  ")
	compact := !bytes.ContainsAny(src, " \t\r\n") || !json.Valid(src)
	if wantErr != nil {
		if !compact && err == nil {
			t.Errorf("%q: no error, json.Indent says %v", src, wantErr)
		}
		return
	}
	if err != nil || string(got) != "prefix:"+want.String() {
		t.Errorf("%q:\n got %q, %v\nwant %q", src, got, err, "prefix:"+want.String())
	}
}

func TestMarshalIsMarshalIndent(t *testing.T) {
	v := map[string]any{"z": []any{1, "two", map[string]any{}}, "a": map[string]any{"<&>": []int{}}}
	want, _ := json.MarshalIndent(v, "", "  ")
	got, err := Marshal(v, "  ")
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("got %s, %v\nwant %s", got, err, want)
	}
}

func FuzzAppend(f *testing.F) {
	for _, s := range samples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		same(t, src)
		if json.Valid(src) {
			var c bytes.Buffer
			if err := json.Compact(&c, src); err != nil {
				t.Fatal(err)
			}
			same(t, c.Bytes())
		}
	})
}

func BenchmarkAppend(b *testing.B) {
	m := map[string]any{}
	for i := range 40 {
		m[string(rune('a'+i%26))+string(rune('a'+i/26))] = map[string]any{"s": "some text, with: [brackets] and \"quotes\"", "n": i, "l": []int{1, 2, 3}}
	}
	src, _ := json.Marshal(m)
	b.Run("jsonindent", func(b *testing.B) {
		var dst []byte
		for b.Loop() {
			dst, _ = Append(dst[:0], src, "  ")
		}
	})
	b.Run("json.Indent", func(b *testing.B) {
		var dst bytes.Buffer
		for b.Loop() {
			dst.Reset()
			_ = json.Indent(&dst, src, "", "  ")
		}
	})
}
