// Package textsafe makes text that Logist did not write safe to show on a
// terminal. Agent answers, reasons, stderr tails, guidance and the like are
// data: recorded as they came (the history is evidence), but a summary
// holding "\x1b[2J" must not clear the steward's screen, a "\r" must not
// overwrite a job id, and a bidi override must not make a line read
// differently from what it says. Every human-facing printer (the CLI's
// tables, markdown and text, logist watch and logs, the daemon's text logs)
// goes through this one package; JSON output stays exact, with the same
// runes escaped as \uXXXX (EscapeJSON).
package textsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Unsafe reports whether r must not reach a terminal as is: C0 controls
// (newline and tab included: the callers decide which they keep), DEL, C1
// controls, the bidi embeddings, overrides, isolates and marks (U+202A–
// U+202E, U+2066–U+2069, U+200E, U+200F, U+061C), and the line and
// paragraph separators (U+2028, U+2029). Other format characters (zero
// width joiners, soft hyphens) stay: emoji and scripts need them and they
// move no cursor.
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x200e, r == 0x200f, r == 0x061c, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// Line neutralises s for one line: every unsafe rune, newline and tab
// included, and every byte that is not UTF-8, becomes a visible escape
// (\x1b, \n, \u202e, \xff). Text without them is returned unchanged.
func Line(s string) string { return clean(s, false) }

// LineRunes reports whether Line leaves b as it is (nothing to
// neutralise) and, if so, how many runes b has: for a printer that builds
// its text in a buffer of its own, lays it out by runes, and calls Line
// only on what needs it.
func LineRunes(b []byte) (runes int, safe bool) {
	for i := 0; i < len(b); runes++ {
		if c := b[i]; c >= 0x20 && c < 0x7f {
			i++ // printable ASCII: see clean
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if (r == utf8.RuneError && n == 1) || Unsafe(r) {
			return 0, false
		}
		i += n
	}
	return runes, true
}

// Block is Line for text shown over several lines: newlines and tabs stay,
// everything else unsafe is escaped.
func Block(s string) string { return clean(s, true) }

func clean(s string, block bool) string {
	keep := func(r rune) bool { return block && (r == '\n' || r == '\t') }
	i := 0
	for i < len(s) {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			// Printable ASCII, most of any text: safe, one byte, no
			// decode (a listing of 50,000 jobs cleans 300,000 cells).
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || (Unsafe(r) && !keep(r)) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !Unsafe(r) || keep(r):
			b.WriteString(s[i : i+n])
		default:
			b.WriteString(escape(r))
		}
		i += n
	}
	return b.String()
}

// escape is the visible form of an unsafe rune.
func escape(r rune) string {
	switch r {
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	if r < 0x80 {
		return fmt.Sprintf(`\x%02x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// EscapeJSON rewrites the unsafe runes that JSON allows raw inside strings
// (DEL, C1 controls, bidi runes, separators: JSON encoders escape C0
// already) as \uXXXX escapes. The document decodes to exactly the same values; it
// only no longer carries them raw to a terminal that shows it. b must be
// JSON (or JSON lines): outside strings such runes cannot occur.
func EscapeJSON(b []byte) []byte {
	// C0 bytes are left alone: raw in JSON they can only be the
	// whitespace between tokens (an encoder escapes them in strings).
	unsafe := func(r rune) bool { return r >= 0x7f && Unsafe(r) }
	i := 0
	for i < len(b) {
		if b[i] < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if unsafe(r) {
			break
		}
		i += n
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for i < len(b) {
		if b[i] < 0x7f {
			out = append(out, b[i])
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if unsafe(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

// JSONWriter writes to w what it is given, EscapeJSON applied: for a log
// handler that writes each record as one JSON document in one Write (as
// log/slog's JSON handler does).
func JSONWriter(w io.Writer) io.Writer { return jsonWriter{w} }

type jsonWriter struct{ w io.Writer }

func (j jsonWriter) Write(p []byte) (int, error) {
	if _, err := j.w.Write(EscapeJSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
