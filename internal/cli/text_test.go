package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/textsafe"
)

// A time budget prints with the precision the steward gave it, no more.
func TestMinutesText(t *testing.T) {
	for _, c := range []struct {
		min  float64
		want string
	}{
		{90, "1h30m"}, {0.5, "30s"}, {10, "10m"}, {60, "1h"}, {1.5, "1m30s"}, {2.25, "2m15s"},
		{0.001, "0.06s"}, {0.333, "19.98s"}, {1500, "25h"}, {0, "0s"}, {61.01, "1h1m0.6s"},
		{1e9, "1e+09 minutes"}, // longer than a duration holds
	} {
		if got := minutesText(c.min); got != c.want {
			t.Errorf("minutesText(%v) = %q, want %q", c.min, got, c.want)
		}
	}
}

func TestUSD(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{0, "$0.00"},
		{0.004, "$0.004"},
		{0.0043, "$0.0043"},
		{0.00035, "$0.00035"},
		{0.012345, "$0.012"},
		{0.02, "$0.02"},
		{0.05, "$0.05"},
		{0.055, "$0.055"},
		{0.0999, "$0.10"},
		{0.1, "$0.10"},
		{0.4, "$0.40"},
		{12.345, "$12.35"},
		{1e-12, "<$0.00000001"},
		{-0.004, "-$0.004"},
		{999999999999.99, "$999999999999.99"},
		{1e298, "$1e+298"},
		{math.Copysign(0, -1), "$0.00"},
	} {
		if got := usd(c.v); got != c.want {
			t.Errorf("usd(%v) = %q, want %q", c.v, got, c.want)
		}
	}
	// Every printer of a cost goes through it: cents, as list, status and
	// watch show them, too.
	if got := dollars(0.4); got != "$0.004" {
		t.Errorf("dollars(0.4 cents) = %q", got)
	}
}

// qwenJob is the qwen-code example of docs/presets/qwen-code.md: Logist's
// price table has no qwen3-coder-plus, and Qwen Code reports no cost.
const qwenJob = `{"task_description": "t", "status": "PENDING", "cost_threshold": 500,
 "agents": {"worker": {"provider": "command", "model": "qwen3-coder-plus",
   "command": {"preset": "qwen-code", "base_url": "https://dashscope-intl.aliyuncs.com/compatible-mode/v1"}},
  "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`

func TestCostUnknownInStatusAndValidate(t *testing.T) {
	jobs := t.TempDir()
	writeJob(t, jobs, "qwen", qwenJob)
	const want = `cost unknown: the metering proxy refuses a model it cannot price, so the job stops at the first call (MODEL_UNPRICED) unless the program asks for a priced one (worker: qwen-code model "qwen3-coder-plus" has no price: set /agents/worker/command/price`
	code, out, errs := runMain(t, nil, "status", "qwen", "--jobs-dir", jobs)
	if code != 0 || !regexp.MustCompile(`\nCost warning: +`+regexp.QuoteMeta(want)).MatchString(out) {
		t.Fatalf("exit %d, stderr %s, status:\n%s", code, errs, out)
	}
	// Under the cost it qualifies.
	if i, j := strings.Index(out, "\nCost:"), strings.Index(out, "\nCost warning:"); i < 0 || j < i || strings.Contains(out[i+1:j], "\n") {
		t.Errorf("the warning is not right under the cost:\n%s", out)
	}
	code, out, _ = runMain(t, nil, "status", "qwen", "--jobs-dir", jobs, "--format", "json")
	var st struct {
		CostWarning string `json:"cost_warning"`
	}
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || !strings.HasPrefix(st.CostWarning, want) {
		t.Fatalf("exit %d, json status: %v\n%s", code, err, out)
	}
	code, out, _ = runMain(t, nil, "validate", filepath.Join(jobs, "qwen", "job.json"))
	if code != 0 || !strings.Contains(out, "ok (warning: "+want) {
		t.Fatalf("exit %d, validate:\n%s", code, out)
	}
	// With a price, nothing is said.
	priced := strings.Replace(qwenJob, `"preset": "qwen-code",`, `"preset": "qwen-code", "price": {"input_per_mtok": 0.3, "output_per_mtok": 1.5},`, 1)
	writeJob(t, jobs, "priced", priced)
	if _, out, _ = runMain(t, nil, "status", "priced", "--jobs-dir", jobs); strings.Contains(out, "Cost warning") {
		t.Errorf("a priced job warned:\n%s", out)
	}
	f := filepath.Join(t.TempDir(), "priced.json")
	if err := os.WriteFile(f, []byte(priced), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, out, _ = runMain(t, nil, "validate", f); strings.Contains(out, "cost unknown") {
		t.Errorf("a priced manifest warned of its cost:\n%s", out)
	}
}

// FuzzOneLine holds oneLine to its definition: s with every character
// textsafe.Line escapes as its visible escape (newlines, CR, tabs and
// other controls, bidi runes, invalid bytes), its first n characters and
// "…" when longer.
func FuzzOneLine(f *testing.F) {
	for _, s := range []string{"", "short", strings.Repeat("é", 30), "a\xffb" + strings.Repeat("x", 20), "line\nnext", strings.Repeat("中", 11) + "\xff",
		"Done line1\nline2\rOVERWRITE", "tab\there\a", "\u202eevil", strings.Repeat("\xff", 40), strings.Repeat("x", 10) + "\n"} {
		f.Add(s, uint8(10))
	}
	f.Fuzz(func(t *testing.T, s string, n uint8) {
		whole, got := textsafe.Line(s), oneLine(s, int(n))
		if utf8.RuneCountInString(whole) <= int(n) {
			if got != whole {
				t.Fatalf("oneLine(%q, %d) = %q, want all of it, %q", s, n, got, whole)
			}
			return
		}
		// Cut: the escaped form of a prefix of s that ends between two of
		// its characters, the longest within n, and the marker.
		cut, ok := strings.CutSuffix(got, "…")
		if !ok {
			t.Fatalf("oneLine(%q, %d) = %q: cut without the marker", s, n, got)
		}
		want := ""
		for i := 0; i < len(s); {
			_, size := utf8.DecodeRuneInString(s[i:])
			next := textsafe.Line(s[:i+size])
			if utf8.RuneCountInString(next) > int(n) {
				break
			}
			want, i = next, i+size
		}
		if cut != want {
			t.Fatalf("oneLine(%q, %d) = %q, want %q…", s, n, got, want)
		}
	})
}

// A multi-line text in a one-line cell shows every line, its newlines,
// carriage returns and tabs as visible escapes, a cut with a marker; BEL
// is \x07, as textsafe writes it everywhere.
func TestOneLineShowsEveryLine(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"Done line1\nline2\rOVERWRITE", 80, `Done line1\nline2\rOVERWRITE`},
		{"a\tb\x07", 80, `a\tb\x07`},
		{"Done line1\nline2\rOVERWRITE", 13, `Done line1\nl…`},
		{"plain", 5, "plain"},
		{"plainer", 5, "plain…"},
		// An escape is never cut: \u202e is whole or not there.
		{"abc\u202eevil", 5, "abc…"},
		{"abc\u202eevil", 9, `abc\u202e…`},
	} {
		if got := oneLine(c.s, c.n); got != c.want {
			t.Errorf("oneLine(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
	if got, want := quoted(oneLine(`say "hi"`+"\n", 80)), `"say \"hi\"\n"`; got != want {
		t.Errorf("quoted = %s, want %s", got, want)
	}
}

// FuzzNumberTexts holds the amounts and times a listing prints, formatted
// by strconv, to the fmt verbs they were printed with (%.2f, %.3f; %.3g
// for an amount beyond any bill).
func FuzzNumberTexts(f *testing.F) {
	for _, v := range []float64{0, 0.1, 1.005, 12.345, 1e21, -3, math.Inf(1), math.Inf(-1), math.NaN(), math.Copysign(0, -1)} {
		f.Add(math.Float64bits(v))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		v := math.Float64frombits(bits)
		if got, want := timeText(&manifest.Manifest{Metrics: manifest.Metrics{CumulativeTimeSeconds: v}}), fmt.Sprintf("%.3fs", v); got != want {
			t.Fatalf("timeText(%v) = %q, want %q", v, got, want)
		}
		sign, a := "", v
		if a < 0 {
			sign, a = "-", -a
		}
		if a == 0 {
			a = 0 // -0 shows as 0
		}
		switch {
		case a >= 1e15: // beyond any bill: its exponent
			if got, want := usd(v), fmt.Sprintf("%s$%.3g", sign, a); got != want {
				t.Fatalf("usd(%v) = %q, want %q", v, got, want)
			}
		case a == 0 || a >= 0.1: // usd's two-decimal case; below it, its own rules (unchanged)
			if got, want := usd(v), fmt.Sprintf("%s$%.2f", sign, a); got != want {
				t.Fatalf("usd(%v) = %q, want %q", v, got, want)
			}
		}
	})
}

// FuzzMarkdownCell holds markdown's cells (a table's and a field's value)
// to the one-line rule: one line each, whatever the text, every newline,
// carriage return, tab and control shown as oneLine shows it
// (textsafe.Line), no | that a renderer could read as a cell's end, and
// no link, image, HTML or character reference a renderer would act on
// (an agent's summary rendered as a link to javascript:, an image that
// loads from its host, a &#x202e; that overrides the text's direction).
func FuzzMarkdownCell(f *testing.F) {
	for _, s := range []string{"", "plain", "line one\nline two", "a|b", `a\|b`, `a\\|b`, "x\r\n|\t\\", "\u202e|\xff", `\`, "||",
		"[click](javascript:alert(1)) ![i](http://evil.example/t.png) <img src=x onerror=alert(1)> <http://evil.example> &#x202e;gnp.exe", `\[x](y) \\<b> \&amp;`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b bytes.Buffer
		render(&b, "markdown", &Result{Fields: []Field{{"k", "L", s}}, Columns: []string{"C", "D"}, Rows: [][]string{{s, "x"}}}, nil)
		lines := strings.Split(b.String(), "\n")
		want := []string{"## Status: Success", "", "### Data", "- **L**: ", "", "| C | D |", "| --- | --- |", "| ", ""}
		if len(lines) != len(want) {
			t.Fatalf("markdown of %q: %d lines, want %d:\n%s", s, len(lines), len(want), b.String())
		}
		field, ok := strings.CutPrefix(lines[3], want[3])
		if !ok {
			t.Fatalf("markdown of %q: field line %q", s, lines[3])
		}
		value := s
		if value == "" {
			value = "-" // a field's value of nothing
		}
		if got := mdUnescape(t, field, 1); got[0] != textsafe.Line(value) {
			t.Fatalf("field %q: %q reads as %q, want %q", s, field, got[0], textsafe.Line(value))
		}
		row, ok := strings.CutPrefix(lines[7], "| ")
		row, ok2 := strings.CutSuffix(row, " |")
		if !ok || !ok2 {
			t.Fatalf("markdown of %q: row line %q", s, lines[7])
		}
		// Cut at each pipe no backslash escapes: two cells, the first s.
		if got := mdUnescape(t, row, 2); got[0] != textsafe.Line(s) || got[1] != " x" {
			t.Fatalf("row of %q: %q reads as %q, want [%q \" x\"]", s, lines[7], got, textsafe.Line(s))
		}
	})
}

// mdUnescape reads a markdown table row's text as a renderer that counts
// the backslashes before a pipe does: cut at each pipe after an even
// number of them (a cell's end), and an escaped pipe's escape taken off
// (half its backslashes, less one); so too a [, < or &, which must be
// escaped. It wants n cells.
func mdUnescape(t *testing.T, row string, n int) []string {
	t.Helper()
	if strings.ContainsAny(row, "\n\r") {
		t.Fatalf("a raw line break in the cell %q", row)
	}
	var cells []string
	var cur strings.Builder
	run := 0
	for i := 0; i < len(row); i++ {
		c := row[i]
		switch {
		case c == '\\':
			run++
			continue
		case c == '|' && run%2 == 0:
			cur.WriteString(strings.Repeat(`\`, run))
			cells = append(cells, strings.TrimSuffix(cur.String(), " "))
			cur.Reset()
		case strings.IndexByte("[<&", c) >= 0 && run%2 == 0:
			t.Fatalf("%q: a %c that a renderer acts on", row, c)
		case c == '|' || strings.IndexByte("[<&", c) >= 0:
			cur.WriteString(strings.Repeat(`\`, (run-1)/2) + string(c))
		default:
			cur.WriteString(strings.Repeat(`\`, run))
			cur.WriteByte(c)
		}
		run = 0
	}
	cur.WriteString(strings.Repeat(`\`, run))
	cells = append(cells, cur.String())
	if len(cells) != n {
		t.Fatalf("%q holds %d cells, want %d: an unescaped |", row, len(cells), n)
	}
	return cells
}

// A cost budget past the largest Logist counts (manifest.CostUnbounded:
// the engine runs the job with no limit) shows as no limit wherever logist
// shows a budget, not as three hundred digits or an exponent; a large one
// it counts still shows in dollars.
func TestCostBudgetPastTheLargestShowsNoLimit(t *testing.T) {
	t.Parallel()
	jobs := filepath.Join(t.TempDir(), "jobs")
	writeJob(t, jobs, "huge", jobJSON("PENDING", `"cost_threshold": 1e300`))
	writeJob(t, jobs, "edge", jobJSON("PENDING", `"cost_threshold": 9e14`))
	code, out, errOut := runMain(t, nil, "status", "huge", "--jobs-dir", jobs)
	if code != 0 || !strings.Contains(out, "$0.00 (no limit: the manifest's cost_threshold is past the largest budget Logist counts, $9223372036854.78)") || strings.Contains(out, "0000000000") {
		t.Fatalf("status exit %d:\n%s%s", code, out, errOut)
	}
	if _, out, _ = runMain(t, nil, "status", "edge", "--jobs-dir", jobs); !strings.Contains(out, "$0.00 of $9000000000000.00") {
		t.Errorf("a budget Logist counts:\n%s", out)
	}
	huge := 1e300
	v := jobView{Cost: 12, Budget: &huge}
	if got := v.costText(); got != "$0.12/no limit" {
		t.Errorf("watch's cost = %q", got)
	}
	if got := progressBar(12, &huge, 10); got != "" {
		t.Errorf("watch's bar for no limit = %q, want none", got)
	}
}
