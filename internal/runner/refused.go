package runner

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
)

// refusedLogs are what the egress proxy refused call n's runs (log: the
// call's agent.EgressLog, nil for a call without an allowlist): one error
// record EGRESS_REFUSED naming each destination kept with its count and
// first reason, and how many attempts went to others, appended with the
// call's outcome (the unit of its response), so that a steward auditing
// the job finds what its agent tried to reach in the tamper-evident
// history. Nothing when nothing was refused.
func refusedLogs(log *agent.EgressLog, actor string, attempt, n int) []logEntry {
	if log == nil {
		return nil
	}
	r := log.Refused()
	if r.Total == 0 {
		return nil
	}
	// Destinations first, reasons after: logist history shows a record's
	// first line cut at 160 characters.
	var b strings.Builder
	fmt.Fprintf(&b, "call %06d: the network allowlist refused %d connection", n, r.Total)
	if r.Total != 1 {
		b.WriteString("s")
	}
	to := make([]string, 0, len(r.Kept))
	why := make([]string, 0, len(r.Kept))
	for _, f := range r.Kept {
		hp := net.JoinHostPort(f.Host, strconv.Itoa(f.Port))
		to = append(to, fmt.Sprintf("%s ×%d", hp, f.Count))
		why = append(why, hp+": "+f.Reason)
	}
	b.WriteString(" to " + strings.Join(to, ", "))
	if d := r.Dropped(); d > 0 {
		fmt.Fprintf(&b, ", and %d to destinations past the first %d", d, len(r.Kept))
	}
	b.WriteString(" (" + strings.Join(why, "; ") + ")")
	return []logEntry{{code: codes.EgressRefused, actor: actor, attempt: attempt, record: true, msg: b.String()}}
}
