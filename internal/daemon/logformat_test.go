package daemon

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// hostileText is agent text as it reaches a log line: a reason holding
// terminal escapes, a carriage return, a C1 CSI, DEL and bidi overrides.
const hostileText = "worker answered STUCK: \x1b[2J\x1b[H wiped \r\u009b31m red \x7f \u202eevil\u2066x\u2069 \u200f"

// rawUnsafe reports a rune that must not reach a terminal raw in a log
// line (the newline that ends each line aside).
func rawUnsafe(s string) (rune, bool) {
	for _, r := range strings.TrimSuffix(s, "\n") {
		switch {
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c, r == 0x2028, r == 0x2029:
			return r, true
		}
	}
	return 0, false
}

// Both log formats keep agent text from acting on a terminal; the JSON
// log keeps it exact.
func TestLogsNeutraliseAgentText(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		logger, err := newLogger(&buf, format, "info")
		if err != nil {
			t.Fatal(err)
		}
		logger.Info(hostileText, "type", "transition", "reason", hostileText)
		logger.Error("agent failed", "type", "error", "error_code", "AGENT_EXIT", "stderr", hostileText)
		for _, line := range strings.SplitAfter(buf.String(), "\n") {
			if line == "" {
				continue
			}
			if r, bad := rawUnsafe(line); bad || !utf8.ValidString(line) {
				t.Errorf("%s log line carries %U raw: %q", format, r, line)
			}
			if format != "json" {
				continue
			}
			var obj map[string]any
			if err := json.Unmarshal([]byte(line), &obj); err != nil {
				t.Fatalf("json log line %q: %v", line, err)
			}
			for _, k := range []string{"msg", "reason", "stderr"} {
				if v, ok := obj[k]; ok && k != "msg" && v != hostileText {
					t.Errorf("json %s = %q, want the exact text %q", k, v, hostileText)
				}
			}
		}
		if format == "text" && !strings.Contains(buf.String(), `\x1b[2J`) {
			t.Errorf("text log does not show the escape visibly:\n%s", buf.String())
		}
	}
}
