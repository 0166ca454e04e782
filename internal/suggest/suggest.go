// Package suggest says "did you mean": a mistyped command word or flag
// names the nearest one. Both programs use it (logist's commands and
// flags, logistd's flags), so a typo reads the same in either.
package suggest

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// FlagError is pflag's parse error, with the nearest flag of fs when the
// error is about an unknown one.
func FlagError(fs *pflag.FlagSet, err error) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return msg
	}
	if i := strings.IndexByte(name, '='); i >= 0 {
		name = name[:i]
	}
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" {
			names = append(names, f.Name)
		}
	})
	if s := Nearest(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean --%s?", s)
	}
	return msg
}

// Nearest is the candidate closest to word: one it starts, or one at most
// two edits away (one for short words); "" when none is close.
func Nearest(word string, candidates []string) string {
	best, bestD := "", -1
	limit := 2
	if len(word) <= 3 {
		limit = 1
	}
	for _, c := range candidates {
		d := editDistance(strings.ToLower(word), c)
		if len(word) >= 3 && strings.HasPrefix(c, strings.ToLower(word)) {
			d = 0
		}
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (with adjacent
// swaps counting as one edit), in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
