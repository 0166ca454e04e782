package runner

import (
	"fmt"
	"strings"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/snapshot"
)

// Workspace changes of a call: the workspace is scanned (lstat only, no
// file read or written: snapshot.Scan) before the agent starts and again
// when its answer is judged. What changed is recorded with the response,
// and an accepted answer that changed files it did not list as evidence is
// warned about (seed 002: evidence lists every file created or modified).

// maxNamed bounds the paths a warning names (the response's
// workspace_changes lists them all).
const maxNamed = 20

// scan is snapshot.Scan; tests count the walks.
var scan = snapshot.Scan

// scanWorkspace is the job's workspace as a call finds it, or nil when it
// cannot be scanned (past snapshot.MaxScanEntries paths, unreadable): the
// call's changes are then not compared; its recovery point still lists
// them.
func scanWorkspace(tx *jobtx.Tx) snapshot.Stats {
	s, err := scan(tx.Store().Workspace(tx.ID))
	if err != nil {
		return nil
	}
	return s
}

// A recovery point's snapshot walks the workspace, and the next call's
// scan would walk it again: at a job's start (cp-start, then the first
// intent) and at each phase boundary a plain agent call follows in the
// same transaction (chains). Nothing can change the workspace in between
// but a person's hand: every steward command that touches it takes the
// job's lock, which the transaction holds, and the transaction itself
// writes only the history, job.json and requests/ there. So the
// snapshot's own lstats (snapshot.Info.Stats) are the call's before-scan
// when the call is prepared in the transaction that took them, with no
// phase effect in between (an effect may write in the workspace).
// Anywhere else, the call scans: a steward's change between two
// transactions is never charged to the next call.

// takenScan is what the snapshot taken in transaction tx saw.
type takenScan struct {
	tx    *jobtx.Tx
	stats snapshot.Stats
}

// noteScan keeps s, the workspace as a snapshot in tx walked it.
func (e *Engine) noteScan(tx *jobtx.Tx, s snapshot.Stats) {
	e.scansMu.Lock()
	defer e.scansMu.Unlock()
	if e.scans == nil {
		e.scans = map[string]takenScan{}
	}
	e.scans[tx.ID] = takenScan{tx, s}
}

// takeScan is the workspace as a snapshot taken in tx saw it (nil if none
// was, or one was in another transaction); the next call in tx takes it
// once.
func (e *Engine) takeScan(tx *jobtx.Tx) snapshot.Stats {
	e.scansMu.Lock()
	defer e.scansMu.Unlock()
	t, ok := e.scans[tx.ID]
	delete(e.scans, tx.ID)
	if !ok || t.tx != tx {
		return nil
	}
	return t.stats
}

// forgetScan drops what a snapshot of job id saw (its run ended).
func (e *Engine) forgetScan(id string) {
	e.scansMu.Lock()
	defer e.scansMu.Unlock()
	delete(e.scans, id)
}

// callChanges is what call c changed in the workspace, ok false when it
// was not compared.
func callChanges(tx *jobtx.Tx, c *call) (ch snapshot.Changes, ok bool) {
	if c.before == nil {
		return ch, false
	}
	after := scanWorkspace(tx)
	if after == nil {
		return ch, false
	}
	return snapshot.Changed(c.before, after), true
}

// recordChanges puts ch in resp's record, if anything changed.
func recordChanges(resp *history.Response, ch snapshot.Changes) {
	if !ch.Empty() {
		resp.WorkspaceChanges = fileChanges(ch)
	}
}

// undeclared is the warning for the changes of ch an answer did not list
// in evidence ("" if it listed them all).
func undeclared(ch snapshot.Changes, evidence []string) string {
	u := ch.NotUnder(evidence)
	if u.Empty() {
		return ""
	}
	var parts []string
	named := 0
	for _, l := range []struct {
		what  string
		paths []string
	}{{"added", u.Added}, {"modified", u.Modified}, {"deleted", u.Deleted}} {
		if len(l.paths) == 0 {
			continue
		}
		n := min(len(l.paths), max(maxNamed-named, 0))
		named += n
		s := l.what + " " + strings.Join(quoted(l.paths[:n]), ", ")
		if n < len(l.paths) {
			s += fmt.Sprintf(" and %d more", len(l.paths)-n)
		}
		parts = append(parts, s)
	}
	return "the answer changed workspace files it did not list as evidence: " + strings.Join(parts, "; ")
}

func quoted(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = fmt.Sprintf("%q", p)
	}
	return out
}
