package cli

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/logist/logist/internal/textsafe"
)

// The terminal view of logist watch fits the screen: no line wraps (cells
// are cut with "…", by display width), and the rows that do not fit below
// the header are left out and counted, so the header never scrolls away.

// watchScreen is the view for a terminal of width columns and height rows:
// the head lines, a blank line, the table, and a last line saying how many
// jobs did not fit. It leaves the terminal's last row empty (the cursor
// stays there; writing on it would scroll the screen).
func watchScreen(head []string, views map[string]jobView, now time.Time, width, height int) string {
	width = max(width-1, 20) // the last column: some terminals wrap on it
	height = max(height, len(head)+4)
	var b strings.Builder
	for _, h := range head {
		b.WriteString(textsafe.Fit(textsafe.Line(h), width) + "\n")
	}
	b.WriteString("\n")
	if len(views) == 0 {
		b.WriteString(textsafe.Fit("(no jobs yet; logist submit FILE adds one)", width) + "\n")
		return b.String()
	}
	// Rows: when not all fit, the finished ones (SUCCESS, CANCELED) give
	// way first.
	ids := sortedIDs(views)
	room := height - len(head) - 3 // blank line, column header, last row
	more := 0
	if len(ids) > room {
		room-- // the line that counts the others
		sort.SliceStable(ids, func(i, j int) bool { return !views[ids[i]].final && views[ids[j]].final })
		more = len(ids) - room
		ids = ids[:room]
		sort.Strings(ids)
	}
	table := func(bar bool) [][]string {
		rows := [][]string{watchColumns}
		for _, id := range ids {
			row := views[id].row(now, bar)
			for i := range row {
				row[i] = textsafe.Line(row[i])
			}
			rows = append(rows, row)
		}
		return rows
	}
	rows := table(true)
	widths := columnWidths(rows)
	const gap = 2
	avail := width - gap*(len(widths)-1)
	total := func() int {
		n := 0
		for _, w := range widths {
			n += w
		}
		return n
	}
	// What gives way first: the summary, then the budget bar, then the
	// job id, the phase, the summary again, and only then the elapsed
	// time, the cost and the status.
	shrink := func(col, least int) {
		if over := total() - avail; over > 0 && widths[col] > least {
			widths[col] = max(least, widths[col]-over)
		}
	}
	const (
		colJob = iota
		colStatus
		colPhase
		colElapsed
		colCost
		colSummary
	)
	shrink(colSummary, 12)
	if total() > avail {
		rows = table(false)
		natural := columnWidths(rows)
		widths[colCost] = natural[colCost]
	}
	for _, s := range [][2]int{{colJob, 12}, {colPhase, 6}, {colSummary, 6}, {colElapsed, 5}, {colCost, 8}, {colStatus, 8}, {colSummary, 1}, {colJob, 1}} {
		shrink(s[0], s[1])
	}
	for _, row := range rows {
		var line strings.Builder
		for i, cell := range row {
			cell = textsafe.Fit(cell, widths[i])
			if i < len(row)-1 {
				cell = textsafe.Pad(cell, widths[i]+gap)
			}
			line.WriteString(cell)
		}
		b.WriteString(textsafe.Fit(strings.TrimRight(line.String(), " "), width) + "\n")
	}
	if more > 0 {
		b.WriteString(textsafe.Fit(fmt.Sprintf("… and %d more jobs (logist watch JOB shows one; logist list shows all)", more), width) + "\n")
	}
	return b.String()
}

// columnWidths is the display width of each column's widest cell.
func columnWidths(rows [][]string) []int {
	w := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			w[i] = max(w[i], textsafe.Width(c))
		}
	}
	return w
}
