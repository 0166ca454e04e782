package textsafe

import (
	"strings"
	"unicode"
)

// Display width, for views that must fit a terminal (logist watch). This
// is the simple model terminals share: combining marks and format
// characters take no column, East Asian wide and fullwidth characters and
// most emoji take two, everything else one. Text is made safe (Line)
// before it is measured.

// wide are the ranges drawn two columns wide.
var wide = []struct{ lo, hi rune }{
	{0x1100, 0x115f},   // Hangul Jamo initials
	{0x2e80, 0x303e},   // CJK radicals, punctuation
	{0x3041, 0x33ff},   // kana, CJK symbols
	{0x3400, 0x4dbf},   // CJK extension A
	{0x4e00, 0x9fff},   // CJK unified ideographs
	{0xa000, 0xa4cf},   // Yi
	{0xac00, 0xd7a3},   // Hangul syllables
	{0xf900, 0xfaff},   // CJK compatibility ideographs
	{0xfe30, 0xfe4f},   // CJK compatibility forms
	{0xff00, 0xff60},   // fullwidth forms
	{0xffe0, 0xffe6},   // fullwidth signs
	{0x1f300, 0x1f64f}, // pictographs, emoticons
	{0x1f900, 0x1f9ff}, // supplemental pictographs
	{0x20000, 0x2fffd}, // CJK extensions B–F
	{0x30000, 0x3fffd}, // CJK extension G
}

// RuneWidth is the number of columns r takes.
func RuneWidth(r rune) int {
	if unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf) {
		return 0
	}
	for _, w := range wide {
		if r < w.lo {
			break
		}
		if r <= w.hi {
			return 2
		}
	}
	return 1
}

// Width is the number of columns s takes on one line.
func Width(s string) int {
	n := 0
	for _, r := range s {
		n += RuneWidth(r)
	}
	return n
}

// Fit cuts s to at most w columns, ending it with "…" when it was cut.
func Fit(s string, w int) string {
	if Width(s) <= w {
		return s
	}
	if w <= 0 {
		return ""
	}
	var b strings.Builder
	used := 0
	for _, r := range s {
		rw := RuneWidth(r)
		if used+rw > w-1 {
			break
		}
		b.WriteRune(r)
		used += rw
	}
	return b.String() + "…"
}

// Pad fills s with spaces to w columns (s no wider than w).
func Pad(s string, w int) string {
	if n := w - Width(s); n > 0 {
		return s + strings.Repeat(" ", n)
	}
	return s
}
