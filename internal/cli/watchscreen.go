package cli

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/logist/logist/internal/textsafe"
)

// The terminal view of logist watch fits the screen, however small: no
// line wraps (cells and lines are cut with "…", by display width: agent
// text may hold wide characters), and the rows that do not fit below the
// header are left out and counted, so the header never scrolls away.

// watchScreen is the view for a terminal of width columns and height rows:
// the head lines, a blank line, the table, and a last line saying how many
// jobs did not fit. It leaves the terminal's last row empty (the cursor
// stays there; writing on it would scroll the screen). On a terminal too
// short for the table, the head lines that fit and a line counting the
// jobs; too short for those, the lines that fit and one counting the rest.
func watchScreen(head []string, views map[string]jobView, now time.Time, width, height int) string {
	width = max(width-1, 1)   // the last column: some terminals wrap on it
	lines := max(height-1, 1) // the last row stays empty
	var b strings.Builder
	for _, h := range head {
		b.WriteString(textsafe.Fit(textsafe.Line(h), width) + "\n")
	}
	if len(views) == 0 {
		b.WriteString("\n" + textsafe.Fit("(no jobs yet; logist submit FILE adds one)", width) + "\n")
		return keepRows(b.String(), lines, width)
	}
	// Rows: when not all fit, the finished ones (SUCCESS, CANCELED) give
	// way first.
	ids := sortedIDs(views)
	room := lines - len(head) - 2 // blank line, column header
	more := 0
	if room < 2 && len(ids) > room {
		// Not one row and the line that counts the others: no table.
		b.WriteString(textsafe.Fit(fmt.Sprintf("… %d jobs: the terminal is too small to list them (logist list shows all)", len(ids)), width) + "\n")
		return keepRows(b.String(), lines, width)
	}
	b.WriteString("\n")
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
	return keepRows(b.String(), lines, width)
}

// keepRows is screen (whole lines, each no wider than width) in at most
// n lines: when it has more, the first n-1 and a line saying how many
// were left out (head lines on a terminal shorter than they are).
func keepRows(screen string, n, width int) string {
	all := strings.SplitAfter(screen, "\n")
	if all[len(all)-1] == "" {
		all = all[:len(all)-1]
	}
	if len(all) <= n {
		return screen
	}
	kept := all[:n-1]
	return strings.Join(kept, "") + textsafe.Fit(fmt.Sprintf("… %d more lines (a taller terminal shows them)", len(all)-len(kept)), width) + "\n"
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
