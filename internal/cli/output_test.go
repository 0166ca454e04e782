package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/logist/logist/internal/textsafe"
)

// The JSON envelope: ok and the command's data, or ok false and the error;
// a status at the top level would be ambiguous (the command's outcome or
// the job's?), so there is none.
func TestEnvelope(t *testing.T) {
	decode := func(r *Result, err error) map[string]any {
		var b bytes.Buffer
		render(&b, "json", r, err)
		var obj map[string]any
		if e := json.Unmarshal(b.Bytes(), &obj); e != nil {
			t.Fatalf("%s: %v", b.String(), e)
		}
		return obj
	}
	fields := &Result{Message: "m", Fields: []Field{{"job_id", "Job", "j"}, {"status", "Status", "RUNNING"}}}
	obj := decode(fields, nil)
	if obj["ok"] != true || obj["job_id"] != "j" || obj["message"] != "m" {
		t.Errorf("from fields: %v", obj)
	}
	if _, ok := obj["status"]; ok {
		t.Errorf("a top-level status: %v", obj)
	}
	obj = decode(&Result{Data: map[string]any{"job": map[string]any{"status": "RUNNING"}}, Items: []int{1}}, nil)
	if obj["job"].(map[string]any)["status"] != "RUNNING" || len(obj["items"].([]any)) != 1 {
		t.Errorf("from data: %v", obj)
	}
	obj = decode(&Result{Items: []string{"x"}}, &failedWith{nil, &validationFailed{1}})
	e := obj["error"].(map[string]any)
	if obj["ok"] != false || e["code"] != "invalid" || e["exit_code"] != 1.0 || e["message"] != "1 file(s) invalid" || obj["items"] == nil {
		t.Errorf("failure with details: %v", obj)
	}
	var b bytes.Buffer
	renderError(&b, nil, "json", errors.New("boom"))
	if !strings.Contains(b.String(), `"ok": false`) || strings.Contains(b.String(), `"status"`) {
		t.Errorf("error: %s", b.String())
	}
	// Documents are printed as they are.
	b.Reset()
	render(&b, "json", &Result{Document: map[string]any{"job_id": "j"}}, nil)
	if strings.Contains(b.String(), `"ok"`) {
		t.Errorf("document wrapped: %s", b.String())
	}
}

// tabwriterTable is how tables were printed before writeTable: the layout
// writeTable must keep.
func tabwriterTable(columns []string, rows [][]string) string {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for _, row := range rows {
		cells := make([]string, len(row))
		for i, c := range row {
			cells[i] = textsafe.Line(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
	return b.String()
}

// FuzzWriteTable holds writeTable's layout to text/tabwriter's, cells with
// control characters, invalid UTF-8, wide runes and tabwriter's escape
// byte included.
func FuzzWriteTable(f *testing.F) {
	f.Add("a\x00bb\x00\x00ccc\x01é\x00\t\x00x\ny\x00\xff\x00中文\x01\x01\x00", uint8(3))
	f.Add("", uint8(1))
	f.Add("\x01\x01\x01", uint8(2))
	f.Fuzz(func(t *testing.T, cells string, ncol uint8) {
		n := int(ncol%6) + 1
		columns := []string{"JOB", "STATUS", "PHASE", "COST", "TIME", "NOTE"}[:n]
		// Cells are separated by NUL, rows by \x01; a short row falls back
		// to tabwriter, which must then be what it was.
		var rows [][]string
		for _, line := range strings.Split(cells, "\x01") {
			row := strings.Split(line, "\x00")
			if len(row) > n {
				row = row[:n]
			}
			rows = append(rows, row)
		}
		var b bytes.Buffer
		writeTable(&b, columns, rows)
		if want := tabwriterTable(columns, rows); b.String() != want {
			t.Fatalf("columns %q rows %q:\ngot\n%q\nwant\n%q", columns, rows, b.String(), want)
		}
		if ragged := slices.ContainsFunc(rows, func(r []string) bool { return len(r) != n }); ragged {
			return
		}
		// A listing's table (logist list) prints as its rows would.
		for _, format := range []string{"text", "markdown"} {
			var fromRows, fromTable bytes.Buffer
			render(&fromRows, format, &Result{Columns: columns, Rows: rows}, nil)
			render(&fromTable, format, &Result{Columns: columns, table: tableOf(columns, rows)}, nil)
			if fromRows.String() != fromTable.String() {
				t.Fatalf("%s, rows %q:\nfrom the table\n%q\nfrom the rows\n%q", format, rows, fromTable.String(), fromRows.String())
			}
		}
	})
}

// TestCellTableNeutralisesBuiltCells: a cell a listing builds in the
// table's buffer itself (appendCost, appendTime) is neutralised like a
// cell added as a string, in text and markdown.
func TestCellTableNeutralisesBuiltCells(t *testing.T) {
	columns := []string{"JOB", "COST"}
	tb := newCellTable(columns, 1)
	tb.add("a")
	tb.buf = append(tb.buf, "x\x1b[2J|\xffy"...)
	tb.end()
	var text, md bytes.Buffer
	tb.write(&text)
	if want := tabwriterTable(columns, [][]string{{"a", "x\x1b[2J|\xffy"}}); text.String() != want {
		t.Errorf("text:\n%q\nwant\n%q", text.String(), want)
	}
	tb.writeMarkdown(&md)
	if want := "| a | x\\x1b\\[2J\\|\\xffy |\n"; md.String() != want {
		t.Errorf("markdown: %q, want %q", md.String(), want)
	}
}

// TestWriteTableAsTabwriter: the rows of a listing (as many cells as
// columns) are laid out by writeTable itself, as tabwriter did.
func TestWriteTableAsTabwriter(t *testing.T) {
	columns := []string{"JOB", "STATUS", "PHASE", "COST", "TIME", "NOTE"}
	rows := [][]string{
		{"a", "SUCCESS", "-", "$0.00", "0.001s", ""},
		{"long-job-name-é中", "INVALID", "-", "-", "-", "bad\ttab \x1b[31m red"},
		{"b", "RUNNING", "work", "$1.00 of $5.00", "1.000s of 1h30m", "note"},
		{"c\xff", "", "", "", "", "x"},
	}
	var b bytes.Buffer
	writeTable(&b, columns, rows)
	if want := tabwriterTable(columns, rows); b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	if !strings.Contains(b.String(), "long-job-name-é中  INVALID") {
		t.Errorf("columns not aligned:\n%s", b.String())
	}
}
