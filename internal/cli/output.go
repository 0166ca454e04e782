package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Field is one labelled value of a command's result.
type Field struct {
	Key   string // json key
	Label string // human label
	Value any
}

// Result is what a command prints, in any format.
type Result struct {
	Message string
	Fields  []Field
	// Table, when set, is printed as a table (text, markdown) and as
	// "items" (json).
	Columns []string
	Rows    [][]string
	Items   any
	// JSON, when set, is printed as is for --format json.
	JSON any
	// Text, when set, replaces the text rendering.
	Text string
}

func render(out io.Writer, format string, r *Result) {
	// One write per buffer, not per table cell: a list of thousands of
	// jobs otherwise spends its time in write(2).
	w := bufio.NewWriterSize(out, 64<<10)
	// A failed write to stdout has no exit code of its own (seed 001).
	defer w.Flush() //nolint:errcheck // see above
	switch format {
	case "json":
		v := r.JSON
		if v == nil {
			obj := map[string]any{"status": "success"}
			if r.Message != "" {
				obj["message"] = r.Message
			}
			for _, f := range r.Fields {
				obj[f.Key] = f.Value
			}
			if r.Items != nil {
				obj["items"] = r.Items
			}
			v = obj
		}
		b, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintln(w, string(b))
	case "markdown":
		fmt.Fprintf(w, "## Status: Success\n\n")
		if r.Message != "" {
			fmt.Fprintf(w, "%s\n\n", r.Message)
		}
		if len(r.Fields) > 0 || len(r.Rows) > 0 {
			fmt.Fprintf(w, "### Data\n")
			for _, f := range r.Fields {
				fmt.Fprintf(w, "- **%s**: %s\n", f.Label, mdValue(f.Value))
			}
			if len(r.Rows) > 0 {
				if len(r.Fields) > 0 {
					fmt.Fprintln(w)
				}
				fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(r.Columns, " | "), strings.Repeat(" --- |", len(r.Columns)))
				for _, row := range r.Rows {
					esc := make([]string, len(row))
					for i, c := range row {
						esc[i] = strings.ReplaceAll(c, "|", "\\|")
					}
					fmt.Fprintf(w, "| %s |\n", strings.Join(esc, " | "))
				}
			}
		}
	default:
		if r.Text != "" {
			fmt.Fprint(w, r.Text)
			return
		}
		if r.Message != "" {
			fmt.Fprintln(w, r.Message)
		}
		if len(r.Fields) > 0 {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, f := range r.Fields {
				fmt.Fprintf(tw, "%s:\t%s\n", f.Label, textValue(f.Value))
			}
			_ = tw.Flush() // into w, whose errors stick until its Flush
		}
		if len(r.Columns) > 0 {
			if len(r.Fields) > 0 {
				fmt.Fprintln(w)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, strings.Join(r.Columns, "\t"))
			for _, row := range r.Rows {
				fmt.Fprintln(tw, strings.Join(row, "\t"))
			}
			_ = tw.Flush() // into w, whose errors stick until its Flush
		}
	}
}

func renderError(stdout, stderr io.Writer, format string, code int, err error) {
	switch format {
	case "json":
		b, _ := json.MarshalIndent(map[string]any{"status": "error", "exit_code": code, "error": err.Error()}, "", "  ")
		fmt.Fprintln(stdout, string(b))
	case "markdown":
		fmt.Fprintf(stdout, "## Status: Error\n\n%s\n\n### Data\n- **Exit Code**: %d\n", err.Error(), code)
	default:
		fmt.Fprintf(stderr, "logist: %v\n", err)
	}
}

func textValue(v any) string {
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

func mdValue(v any) string {
	s := textValue(v)
	return strings.ReplaceAll(s, "\n", " ")
}
