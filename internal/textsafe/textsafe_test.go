package textsafe

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// dangerous is the test's own list of what must never reach a terminal raw,
// written out rather than taken from Unsafe.
func dangerous(r rune, block bool) bool {
	if block && (r == '\n' || r == '\t') {
		return false
	}
	if r <= 0x1f || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
		return true
	}
	for _, x := range []rune{0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c, 0x2028, 0x2029} {
		if r == x {
			return true
		}
	}
	return false
}

func TestLineAndBlock(t *testing.T) {
	for _, c := range []struct{ in, line, block string }{
		{"plain text, ünïcödé, 漢字, 👍", "plain text, ünïcödé, 漢字, 👍", "plain text, ünïcödé, 漢字, 👍"},
		{"", "", ""},
		{"\x1b[2J\x1b[H wiped \r", `\x1b[2J\x1b[H wiped \r`, `\x1b[2J\x1b[H wiped \r`},
		{"two\nlines\tand tab", `two\nlines\tand tab`, "two\nlines\tand tab"},
		{"abc\u202edcba\u2066x\u2069", `abc\u202edcba\u2066x\u2069`, `abc\u202edcba\u2066x\u2069`},
		{"c1 \u009b31m and del \x7f", `c1 \u009b31m and del \x7f`, `c1 \u009b31m and del \x7f`},
		{"lrm\u200e rlm\u200f alm\u061c ls\u2028 ps\u2029", `lrm\u200e rlm\u200f alm\u061c ls\u2028 ps\u2029`, `lrm\u200e rlm\u200f alm\u061c ls\u2028 ps\u2029`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`, `bad \xff\xfe utf8`},
		{"bell\a nul\x00", `bell\x07 nul\x00`, `bell\x07 nul\x00`},
		{"family 👨\u200d👩\u200d👧 soft\u00adhyphen", "family 👨\u200d👩\u200d👧 soft\u00adhyphen", "family 👨\u200d👩\u200d👧 soft\u00adhyphen"},
	} {
		if got := Line(c.in); got != c.line {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.line)
		}
		if got := Block(c.in); got != c.block {
			t.Errorf("Block(%q) = %q, want %q", c.in, got, c.block)
		}
	}
}

func TestEscapeJSONKeepsValues(t *testing.T) {
	v := map[string]any{"summary": "\x1b[2J\u009b1m\u202eevil\u2066 \u2028 ok 漢字", "n": 1}
	b, _ := json.Marshal(v)
	out := EscapeJSON(b)
	for _, r := range string(out) {
		if dangerous(r, false) {
			t.Fatalf("EscapeJSON left %U raw in %s", r, out)
		}
	}
	var back map[string]any
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("EscapeJSON made invalid JSON %s: %v", out, err)
	}
	if back["summary"] != v["summary"] {
		t.Fatalf("value changed: %q, want %q", back["summary"], v["summary"])
	}
	plain := []byte(`{"a":"漢字 plain"}`)
	if got := EscapeJSON(plain); string(got) != string(plain) {
		t.Errorf("EscapeJSON changed safe JSON: %s", got)
	}
}

func TestWidthAndFit(t *testing.T) {
	for _, c := range []struct {
		in string
		w  int
	}{{"abc", 3}, {"漢字", 4}, {"e\u0301", 1}, {"👍", 2}, {"", 0}} {
		if got := Width(c.in); got != c.w {
			t.Errorf("Width(%q) = %d, want %d", c.in, got, c.w)
		}
	}
	for _, c := range []struct {
		in   string
		w    int
		want string
	}{
		{"hello world", 20, "hello world"},
		{"hello world", 11, "hello world"},
		{"hello world", 6, "hello…"},
		{"漢字漢字", 5, "漢字…"},
		{"漢字漢字", 4, "漢…"},
		{"abc", 1, "…"},
		{"abc", 0, ""},
	} {
		got := Fit(c.in, c.w)
		if got != c.want {
			t.Errorf("Fit(%q, %d) = %q, want %q", c.in, c.w, got, c.want)
		}
		if Width(got) > c.w {
			t.Errorf("Fit(%q, %d) = %q is %d wide", c.in, c.w, got, Width(got))
		}
	}
	if got := Pad("漢", 4); got != "漢  " {
		t.Errorf("Pad = %q", got)
	}
}

// FuzzClean: whatever the input, the output carries no unsafe rune (but
// the newlines and tabs Block keeps) and is valid UTF-8; text with nothing
// unsafe comes out unchanged; Line's output is one line.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[2J\x1b[H wiped \r", "a\u202eb", "\xff", "\u009b", "x\ny\tz", "漢字👍", `\x1b literal`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		safe := utf8.ValidString(s)
		for _, r := range s {
			if dangerous(r, false) {
				safe = false
			}
		}
		blockSafe := utf8.ValidString(s)
		for _, r := range s {
			if dangerous(r, true) {
				blockSafe = false
			}
		}
		line, block := Line(s), Block(s)
		if n, safe := LineRunes([]byte(s)); safe != (line == s) || safe && n != utf8.RuneCountInString(s) {
			t.Fatalf("LineRunes(%q) = %d, %v, but Line gives %q", s, n, safe, line)
		}
		if !utf8.ValidString(line) || !utf8.ValidString(block) {
			t.Fatalf("invalid UTF-8 out of %q: %q / %q", s, line, block)
		}
		for _, r := range line {
			if dangerous(r, false) {
				t.Fatalf("Line(%q) = %q keeps %U", s, line, r)
			}
		}
		for _, r := range block {
			if dangerous(r, true) {
				t.Fatalf("Block(%q) = %q keeps %U", s, block, r)
			}
		}
		if strings.ContainsAny(line, "\n\r") {
			t.Fatalf("Line(%q) = %q spans lines", s, line)
		}
		if safe && line != s {
			t.Fatalf("Line changed safe text %q to %q", s, line)
		}
		if blockSafe && block != s {
			t.Fatalf("Block changed safe text %q to %q", s, block)
		}
		if strings.Count(block, "\n") != strings.Count(s, "\n") {
			t.Fatalf("Block(%q) = %q changed the line count", s, block)
		}
		b, _ := json.Marshal(s)
		esc := EscapeJSON(b)
		var back string
		if err := json.Unmarshal(esc, &back); err != nil {
			t.Fatalf("EscapeJSON(%s) = %s: %v", b, esc, err)
		}
		var orig string
		_ = json.Unmarshal(b, &orig)
		if back != orig {
			t.Fatalf("EscapeJSON changed the value: %q, want %q", back, orig)
		}
		for _, r := range string(esc) {
			if dangerous(r, false) {
				t.Fatalf("EscapeJSON(%s) = %s keeps %U", b, esc, r)
			}
		}
		if w := Width(Fit(line, 10)); w > 10 {
			t.Fatalf("Fit(%q, 10) is %d wide", line, w)
		}
	})
}
