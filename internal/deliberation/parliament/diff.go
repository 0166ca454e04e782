package parliament

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The standard library has no patch applier, so this is a small one for
// unified diffs: hunks of context (' '), removed ('-') and added ('+')
// lines. A hunk applies at its stated line or, like patch, at the nearest
// place after the previous hunk where its old lines match exactly; there
// is no fuzz: context must match.

// errMalformed is a diff that cannot be read; errConflict one that does
// not apply to the file as it is.
var (
	errMalformed = errors.New("malformed diff")
	errConflict  = errors.New("diff does not apply")
)

type diffLine struct {
	op    byte // ' ', '-', '+'
	text  string
	noEOL bool // followed by "\ No newline at end of file"
}

type hunk struct {
	oldStart, oldLen, newStart, newLen int
	lines                              []diffLine
}

func parseHunkHeader(s string) (h hunk, err error) {
	// @@ -a[,b] +c[,d] @@ optional section
	rest, ok := strings.CutPrefix(s, "@@ -")
	if !ok {
		return h, fmt.Errorf("%w: bad hunk header %q", errMalformed, s)
	}
	end := strings.Index(rest, " @@")
	if end < 0 {
		return h, fmt.Errorf("%w: bad hunk header %q", errMalformed, s)
	}
	parts := strings.Fields(rest[:end])
	if len(parts) != 2 || !strings.HasPrefix(parts[1], "+") {
		return h, fmt.Errorf("%w: bad hunk header %q", errMalformed, s)
	}
	rng := func(r string) (int, int, error) {
		a, b, has := strings.Cut(r, ",")
		start, err := strconv.Atoi(a)
		if err != nil || start < 0 {
			return 0, 0, fmt.Errorf("%w: bad range %q", errMalformed, r)
		}
		n := 1
		if has {
			if n, err = strconv.Atoi(b); err != nil || n < 0 {
				return 0, 0, fmt.Errorf("%w: bad range %q", errMalformed, r)
			}
		}
		return start, n, nil
	}
	if h.oldStart, h.oldLen, err = rng(parts[0]); err != nil {
		return h, err
	}
	h.newStart, h.newLen, err = rng(parts[1][1:])
	return h, err
}

func parseDiff(diff string) ([]hunk, error) {
	var hunks []hunk
	lines := strings.Split(strings.ReplaceAll(diff, "\r\n", "\n"), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	var cur *hunk
	oldSeen, newSeen := 0, 0
	closeHunk := func() error {
		if cur == nil {
			return nil
		}
		if oldSeen != cur.oldLen || newSeen != cur.newLen {
			return fmt.Errorf("%w: hunk %d has %d old and %d new lines, its header says %d and %d",
				errMalformed, len(hunks)+1, oldSeen, newSeen, cur.oldLen, cur.newLen)
		}
		hunks = append(hunks, *cur)
		cur = nil
		return nil
	}
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "@@"):
			if err := closeHunk(); err != nil {
				return nil, err
			}
			h, err := parseHunkHeader(l)
			if err != nil {
				return nil, err
			}
			cur, oldSeen, newSeen = &h, 0, 0
		case cur == nil:
			// Headers before the first hunk (diff, index, ---, +++) are
			// informational: the tool's FILE argument names the file.
			continue
		case strings.HasPrefix(l, `\`):
			if len(cur.lines) == 0 {
				return nil, fmt.Errorf("%w: %q before any line", errMalformed, l)
			}
			cur.lines[len(cur.lines)-1].noEOL = true
		case oldSeen == cur.oldLen && newSeen == cur.newLen && (strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "+++ ") || strings.HasPrefix(l, "diff ")):
			// The next file's headers; this applier changes one file.
			if err := closeHunk(); err != nil {
				return nil, err
			}
		default:
			op := byte(' ')
			text := l
			if l != "" {
				op, text = l[0], l[1:]
			}
			switch op {
			case ' ':
				oldSeen++
				newSeen++
			case '-':
				oldSeen++
			case '+':
				newSeen++
			default:
				return nil, fmt.Errorf("%w: line %q is not context, removal or addition", errMalformed, l)
			}
			cur.lines = append(cur.lines, diffLine{op: op, text: text})
		}
	}
	if err := closeHunk(); err != nil {
		return nil, err
	}
	if len(hunks) == 0 {
		return nil, fmt.Errorf("%w: no hunk (a unified diff has @@ -a,b +c,d @@ headers)", errMalformed)
	}
	return hunks, nil
}

func splitLines(s string) (lines []string, finalNL bool) {
	if s == "" {
		return nil, false
	}
	finalNL = strings.HasSuffix(s, "\n")
	lines = strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines, finalNL
}

func matchAt(old []string, at int, want []string) bool {
	if at < 0 || at+len(want) > len(old) {
		return false
	}
	for i, w := range want {
		if old[at+i] != w {
			return false
		}
	}
	return true
}

// applyDiff applies a unified diff to content.
func applyDiff(content, diff string) (string, error) {
	hunks, err := parseDiff(diff)
	if err != nil {
		return "", err
	}
	old, finalNL := splitLines(content)
	var out []string
	pos := 0
	touchedEnd := false
	lastNewNoEOL := false
	for i, h := range hunks {
		var oldBlock, newBlock []string
		newNoEOL := false
		for _, l := range h.lines {
			if l.op != '+' {
				oldBlock = append(oldBlock, l.text)
			}
			if l.op != '-' {
				newBlock = append(newBlock, l.text)
				newNoEOL = l.noEOL
			}
		}
		want := h.oldStart - 1
		if h.oldLen == 0 {
			want = h.oldStart // "-a,0" inserts after line a
		}
		at := -1
		// The stated place first, then the nearest match either side,
		// never before the previous hunk's end.
		for d := 0; d <= len(old); d++ {
			if c := want + d; c >= pos && matchAt(old, c, oldBlock) {
				at = c
				break
			}
			if c := want - d; d > 0 && c >= pos && matchAt(old, c, oldBlock) {
				at = c
				break
			}
		}
		if at < 0 {
			return "", fmt.Errorf("%w: hunk %d (@@ -%d,%d) does not match the file's lines", errConflict, i+1, h.oldStart, h.oldLen)
		}
		out = append(out, old[pos:at]...)
		out = append(out, newBlock...)
		pos = at + len(oldBlock)
		if pos == len(old) {
			touchedEnd, lastNewNoEOL = true, newNoEOL
			if len(newBlock) == 0 {
				// The new last line was an inner line: it had its newline.
				lastNewNoEOL = false
			}
		}
	}
	out = append(out, old[pos:]...)
	if len(out) == 0 {
		return "", nil
	}
	nl := finalNL
	if touchedEnd {
		nl = !lastNewNoEOL
	}
	if len(old) == 0 {
		nl = !lastNewNoEOL
	}
	s := strings.Join(out, "\n")
	if nl {
		s += "\n"
	}
	return s, nil
}
