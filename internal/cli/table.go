package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/logist/logist/internal/textsafe"
)

// cellTable is a text table held as its cells, each neutralised
// (textsafe.Line) once, one after another in one buffer, with each
// column's widest cell noted as it is added. A listing of 50,000 jobs
// builds its rows straight into it (no string per cell, no slice per row)
// and prints it in one pass: the widths are known when the last row is in.
type cellTable struct {
	ncol int
	buf  []byte   // the cells' bytes
	ends []uint32 // where each cell ends in buf; row r's cells are ends[r*ncol:(r+1)*ncol]
	// width is each cell's width in runes, and widths each column's widest
	// (but the last column's, which is not padded).
	width  []uint32
	widths []int
}

// newCellTable is a table with columns as its first row (the header).
func newCellTable(columns []string, rows int) *cellTable {
	t := &cellTable{ncol: len(columns), widths: make([]int, max(len(columns)-1, 0))}
	// Room for cells of about 20 bytes: capacity not written to costs
	// no page (a buffer doubled from small was a third of the listing's
	// page faults, and its copies a fifth of its CPU).
	t.buf = make([]byte, 0, (rows+1)*len(columns)*20)
	t.ends = make([]uint32, 0, (rows+1)*len(columns))
	t.width = make([]uint32, 0, (rows+1)*len(columns))
	for _, c := range columns {
		t.add(c)
	}
	return t
}

// add adds cell s.
func (t *cellTable) add(s string) {
	t.buf = append(t.buf, s...)
	t.end()
}

// end ends the cell whose bytes were appended to t.buf since the last,
// neutralising it (textsafe.Line) if it needs to be.
func (t *cellTable) end() {
	start := 0
	if n := len(t.ends); n > 0 {
		start = int(t.ends[n-1])
	}
	w, safe := textsafe.LineRunes(t.buf[start:])
	if !safe {
		line := textsafe.Line(string(t.buf[start:]))
		t.buf = append(t.buf[:start], line...)
		w = utf8.RuneCountInString(line)
	}
	if col := len(t.ends) % t.ncol; col < len(t.widths) {
		t.widths[col] = max(t.widths[col], w)
	}
	t.ends = append(t.ends, uint32(len(t.buf)))
	t.width = append(t.width, uint32(w))
}

// rows is the number of rows, the header's included.
func (t *cellTable) rows() int { return len(t.ends) / max(t.ncol, 1) }

// cell is cell i (row-major) and its width.
func (t *cellTable) cell(i int) ([]byte, int) {
	start := 0
	if i > 0 {
		start = int(t.ends[i-1])
	}
	return t.buf[start:t.ends[i]], int(t.width[i])
}

// write prints the table as text/tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
// lays it out: every column but the last padded to its widest cell plus
// two spaces. Neutralised text has no tab, newline, form feed or byte
// 0xff: nothing tabwriter would treat as more than a rune.
func (t *cellTable) write(w io.Writer) {
	line := make([]byte, 0, 64<<10)
	last := t.ncol - 1
	for i := range t.ends {
		c, cw := t.cell(i)
		line = append(line, c...)
		if col := i % t.ncol; col < last {
			line = append(line, pad(t.widths[col]+2-cw)...)
		} else {
			line = append(line, '\n')
			if len(line) >= 60<<10 {
				_, _ = w.Write(line)
				line = line[:0]
			}
		}
	}
	_, _ = w.Write(line)
}

// writeMarkdown prints the table's rows but the header as markdown table
// rows, a cell's | escaped.
func (t *cellTable) writeMarkdown(w io.Writer) {
	line := make([]byte, 0, 64<<10)
	for i := t.ncol; i < len(t.ends); i++ {
		c, _ := t.cell(i)
		col := i % t.ncol
		if col == 0 {
			line = append(line, "| "...)
		} else {
			line = append(line, " | "...)
		}
		line = appendMarkdownCell(line, c)
		if col == t.ncol-1 {
			line = append(line, " |\n"...)
			if len(line) >= 60<<10 {
				_, _ = w.Write(line)
				line = line[:0]
			}
		}
	}
	_, _ = w.Write(line)
}

// appendMarkdownCell appends a neutralised cell (textsafe.Line: no
// newline, carriage return or tab, each shown as its escape) with each
// character that markdown would act on escaped: the backslashes right
// before it doubled and one more added, so that no renderer reads a | as
// the cell's end, whether it counts the backslashes before a pipe
// (markdown-it) or not (GitHub's), and agent text renders as the text it
// is, not as a link or an image ([), raw HTML or an autolink (<), or a
// character reference (&, which would spell back the controls and bidi
// overrides textsafe shows as escapes).
func appendMarkdownCell(dst, c []byte) []byte {
	run := 0 // backslashes just appended
	for _, b := range c {
		switch b {
		case '|', '[', '<', '&':
			for range run + 1 {
				dst = append(dst, '\\')
			}
			run = 0
		case '\\':
			run++
		default:
			run = 0
		}
		dst = append(dst, b)
	}
	return dst
}

// mdCell is s as one markdown cell or one line's value: escaped as a
// one-line cell is (textsafe.Line, oneLine's rule without a cut) and as
// markdown needs (appendMarkdownCell).
func mdCell(s string) string {
	return string(appendMarkdownCell(nil, []byte(textsafe.Line(s))))
}

// writeTable prints a text table of rows: each cell neutralised
// (textsafe.Line), laid out as cellTable.write. Rows of as many cells as
// columns go through a cellTable; any other table goes through
// text/tabwriter itself.
func writeTable(w io.Writer, columns []string, rows [][]string) {
	for i := -1; i < len(rows); i++ {
		if len(columns) == 0 || i >= 0 && len(rows[i]) != len(columns) {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, strings.Join(columns, "\t"))
			for _, row := range rows {
				cells := make([]string, len(row))
				for i, c := range row {
					cells[i] = textsafe.Line(c)
				}
				fmt.Fprintln(tw, strings.Join(cells, "\t"))
			}
			_ = tw.Flush() // into w, whose errors stick until its Flush
			return
		}
	}
	tableOf(columns, rows).write(w)
}

// tableOf is rows (as many cells as columns each) as a cellTable.
func tableOf(columns []string, rows [][]string) *cellTable {
	t := newCellTable(columns, len(rows))
	for _, row := range rows {
		for _, c := range row {
			t.add(c)
		}
	}
	return t
}

// spaces pads a table's cells (pad).
const spaces = "                                                                "

// pad is n spaces.
func pad(n int) string {
	if n <= len(spaces) {
		return spaces[:n]
	}
	return strings.Repeat(" ", n)
}
