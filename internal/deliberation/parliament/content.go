package parliament

import (
	"encoding/json"
	"math"
	"strings"
)

// Message contents: what the parliament reads from them and how it shapes
// what it puts in them. Contents travel through JSON (the engine commits
// them to the history and replays them), so every reader here accepts what
// encoding/json produces, with or without UseNumber; text put in a
// message is one line, clipped where a limit applies.

func str(v any) string {
	s, _ := v.(string)
	return s
}

func intOf(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1e9 {
			return 0, false
		}
		return int(n), true
	case json.Number:
		i, err := n.Int64()
		if err != nil || i > 1e9 || i < -1e9 {
			return 0, false
		}
		return int(i), true
	}
	return 0, false
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func strs(v any) []string {
	switch l := v.(type) {
	case []string:
		return append([]string(nil), l...)
	case []any:
		out := make([]string, 0, len(l))
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// normalize gives v the shape a JSON round trip gives it, so a message
// built here reads the same as one replayed from the history.
func normalize[T any](v T) T {
	b, err := json.Marshal(v)
	if err != nil {
		panic("parliament: unencodable value: " + err.Error())
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic("parliament: " + err.Error())
	}
	return out
}

// oneLine is s with its runs of white space (new lines too) as one space.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// clip is s cut to n characters, marked with an ellipsis when cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
