package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/textsafe"
)

// Field is one labelled value of a command's result.
type Field struct {
	Key   string // json key
	Label string // human label
	Value any
}

// Result is what a command prints, in any format.
//
// JSON output is one envelope for every command (README, "JSON output"):
// {"ok": true, "message": ..., DATA} on success, and {"ok": false,
// "error": {"code", "exit_code", "message"}, DATA} on failure. DATA is
// Data when set, else the Fields by key, plus "items" for a table. A
// command about one job puts it under "job", whose "status" is the job's
// status: nothing at the top level is called status.
type Result struct {
	Message string
	Fields  []Field
	// Table, when set, is printed as a table (text, markdown) and as
	// "items" (json).
	Columns []string
	Rows    [][]string
	Items   any
	// encoded, when set, is the JSON document (the envelope, escaped as
	// writeJSON does, and its newline) of a command that encoded its
	// items itself: printed as is unless the command failed.
	encoded []byte
	// table, when set, holds the rows in place of Rows (text and
	// markdown): a listing's rows built straight into one buffer.
	table *cellTable
	// Data, when set, is the JSON data in place of the Fields.
	Data map[string]any
	// Document, when set, is printed as is for --format json, without the
	// envelope: a file format of its own (jobHistory.json).
	Document any
	// Text, when set, replaces the text rendering.
	Text string
}

// render prints r in format; err, when not nil, is the command's failure
// whose details r holds (a validate or verify that found problems).
//
// Text and markdown go through textsafe: agent text in a message, a field
// or a cell reaches the terminal neutralised. JSON stays exact (the
// runes a terminal would act on are \u-escaped, the values unchanged).
func render(out io.Writer, format string, r *Result, err error) {
	// One write per buffer, not per table cell: a list of thousands of
	// jobs otherwise spends its time in write(2).
	w := bufio.NewWriterSize(out, 64<<10)
	// A failed write to stdout has no exit code of its own (seed 001).
	defer w.Flush() //nolint:errcheck // see above
	switch format {
	case "json":
		if r.encoded != nil && err == nil {
			_, _ = w.Write(r.encoded) // see the Flush above
			return
		}
		v := r.Document
		if v == nil || err != nil {
			v = envelope(r, err)
		}
		writeJSON(w, v)
	case "markdown":
		status := "Success"
		if err != nil {
			status = "Error"
		}
		fmt.Fprintf(w, "## Status: %s\n\n", status)
		msg := r.Message
		if err != nil {
			msg = strings.TrimSpace(err.Error() + "\n\n" + msg)
		}
		if msg != "" {
			fmt.Fprintf(w, "%s\n\n", textsafe.Block(msg))
		}
		fields := r.Fields
		if err != nil {
			fields = append([]Field{{"exit_code", "Exit Code", ExitCode(err)}}, fields...)
		}
		nrows := len(r.Rows)
		if r.table != nil {
			nrows = r.table.rows() - 1 // its header
		}
		if len(fields) > 0 || nrows > 0 {
			fmt.Fprintf(w, "### Data\n")
			for _, f := range fields {
				fmt.Fprintf(w, "- **%s**: %s\n", f.Label, mdValue(f.Value))
			}
			if nrows > 0 {
				if len(fields) > 0 {
					fmt.Fprintln(w)
				}
				fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(r.Columns, " | "), strings.Repeat(" --- |", len(r.Columns)))
				if r.table != nil {
					r.table.writeMarkdown(w)
				}
				for _, row := range r.Rows {
					esc := make([]string, len(row))
					for i, c := range row {
						esc[i] = mdCell(c)
					}
					fmt.Fprintf(w, "| %s |\n", strings.Join(esc, " | "))
				}
			}
		}
	default:
		if r.Text != "" {
			fmt.Fprint(w, textsafe.Block(r.Text))
			return
		}
		if r.Message != "" {
			fmt.Fprintln(w, textsafe.Block(r.Message))
		}
		if len(r.Fields) > 0 {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, f := range r.Fields {
				// A value of several lines goes on under itself.
				lines := strings.Split(textValue(f.Value), "\n")
				fmt.Fprintf(tw, "%s:\t%s\n", f.Label, lines[0])
				for _, l := range lines[1:] {
					fmt.Fprintf(tw, "\t%s\n", l)
				}
			}
			_ = tw.Flush() // into w, whose errors stick until its Flush
		}
		if len(r.Columns) > 0 {
			if len(r.Fields) > 0 {
				fmt.Fprintln(w)
			}
			if r.table != nil {
				r.table.write(w)
			} else {
				writeTable(w, r.Columns, r.Rows)
			}
		}
	}
}

// envelope is the JSON form of a result (nil: none) and its failure (nil:
// none).
func envelope(r *Result, err error) map[string]any {
	obj := map[string]any{"ok": err == nil}
	if err != nil {
		obj["error"] = jobview.ErrorBody(err)
	}
	if r == nil {
		return obj
	}
	if r.Message != "" {
		obj["message"] = r.Message
	}
	if r.Data != nil {
		for k, v := range r.Data {
			obj[k] = v
		}
	} else {
		for _, f := range r.Fields {
			// "status" is a job's, under "job": never the envelope's.
			if f.Key != "status" {
				obj[f.Key] = f.Value
			}
		}
	}
	if r.Items != nil {
		obj["items"] = r.Items
	}
	return obj
}

// writeJSON prints v indented, with the runes a terminal acts on escaped.
func writeJSON(w io.Writer, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		b, _ = json.MarshalIndent(map[string]any{"ok": false, "error": map[string]any{
			"code": outcomeName(ExitUsage), "exit_code": ExitUsage, "message": "encode output: " + err.Error()}}, "", "  ")
	}
	// Output: a failed write has no exit code of its own (seed 001).
	_, _ = w.Write(textsafe.EscapeJSON(b))
	_, _ = io.WriteString(w, "\n")
}

// failedWith is a failure whose details are a result (a validate or
// verify that found problems): Main prints the result with the error.
type failedWith struct {
	res *Result
	err error
}

func (f *failedWith) Error() string { return f.err.Error() }
func (f *failedWith) Unwrap() error { return f.err }

// printed is a failure the command has printed already, with its details
// (verify --all, whose output is a stream): Main only exits with err's
// code.
type printed struct{ err error }

func (p *printed) Error() string { return p.err.Error() }
func (p *printed) Unwrap() error { return p.err }

// renderError prints a failed command's error: on stderr for text, as the
// result on stdout for json and markdown (seed 001).
func renderError(stdout, stderr io.Writer, format string, err error) {
	switch format {
	case "json", "markdown":
		render(stdout, format, &Result{}, err)
	default:
		fmt.Fprintf(stderr, "logist: %s\n", textsafe.Block(err.Error()))
	}
}

// plainValue is a field's value as text ("-" for none), as it is.
func plainValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		if x == "" {
			return "-"
		}
		return x
	case []string:
		if len(x) == 0 {
			return "-"
		}
		return strings.Join(x, ", ")
	}
	return fmt.Sprint(v)
}

// textValue is a field's value for a text listing, neutralised; it keeps
// its lines, and its tabs (column separators there) become spaces.
func textValue(v any) string {
	return strings.ReplaceAll(textsafe.Block(plainValue(v)), "\t", "    ")
}

// mdValue is a field's value on one markdown line: its newlines, tabs
// and controls shown as escapes and its | escaped, as a table cell's
// (mdCell), so that a text of several lines reads as it is.
func mdValue(v any) string { return mdCell(plainValue(v)) }
