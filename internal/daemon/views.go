package daemon

import (
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
)

// jobHistory.json is a view of history.jsonl written without an fsync
// (history.WriteJobHistory): a crash can leave a job that stopped just
// before it with the previous view, none, or a torn one, and a job that
// is not running is never written again by itself. So once the first scan
// ends (firstScan, after ready) the daemon checks the view of every job
// it found not running (history.JobHistoryCurrent: a few hundred bytes of the view and
// the history's head), and rebuilds those that are missing, torn or
// stale, under the job's lock. Running jobs rewrite theirs when they stop.

// refreshView rebuilds job id's view if it is not current.
func (d *Daemon) refreshView(id string) {
	dir := d.store.JobDir(id)
	if ok, err := history.JobHistoryCurrent(dir); ok || err != nil {
		return // current, or unreadable: the job's own errors say why
	}
	l, err := d.store.LockJob(id)
	if err != nil {
		return // gone since the scan
	}
	defer func() { _ = l.Unlock() }() // released at once; nothing to undo
	data, err := d.store.ReadManifest(id)
	if err != nil {
		return
	}
	m, err := manifest.DecodeTrusted(dir, data)
	if err != nil || m.Status.Active() {
		return // invalid (reported by the scan), or running again
	}
	if _, err := history.EnsureJobHistory(dir, id, m.CreatedAt, d.store.Workspace(id)); err != nil {
		d.logErr(id, codes.JobHistoryWrite, err)
	}
}
