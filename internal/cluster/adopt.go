package cluster

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
)

// Calls that outlive their node. A contained call runs under a launcher
// that outlives the node's process by design (internal/sandbox): a node
// that dies mid-call (SIGKILL, a crash) leaves the call running, its
// result kept in the job's folder (requests/NNNNNN.call). Two rules make
// that call answered once, as file mode's restart does:
//
//   - Adoption: a node that claims a job whose folder in its working
//     folder is as it left it — the folder's history is the store's,
//     record for record, so no other node and no steward appended since
//     (a node that resumes a job records the interrupted call first) —
//     keeps that folder (keptFolder): the workspace as the agent left it
//     and the kept call, which the engine adopts (a finished call's
//     answer is taken, a running one waited for), not asked again.
//   - Orphans: a kept call that is not adopted is killed and forgotten:
//     at a claim whose folder is rewritten from the store (stopCalls),
//     and by the node's sweep (sweepCalls, at its start and every lease)
//     for a job this node no longer holds — another node claimed it, a
//     steward changed it, it ended — so it stops within a lease of the
//     node learning it lost the job, not at the call's own timeout.
//
// A node stopped by SIGTERM lets its calls answer for its grace (Node.
// Grace), then kills those still running (the run is interrupted) and
// releases its leases: nothing is left to adopt, and such a call is asked
// again by the job's next node. A node started again after its process
// died takes its leases back at once (Node.Start, takeBack), so it claims
// its jobs first and adopts their kept calls.

// keptFolder reports whether job j's folder under jobsDir keeps a
// contained call and holds the history the store holds (the same number
// of records, the same last hash). If so, it writes the store's manifest
// into it (the folder's may lag its last unit: the store commits first)
// and leaves the rest alone. A folder without a call to adopt is written
// from the store as before (its workspace from the last recovery point).
func keptFolder(jobsDir string, j *clusterstore.Job) (bool, error) {
	dir := filepath.Join(jobsDir, j.ID)
	if len(keptCalls(dir)) == 0 {
		return false, nil
	}
	b, err := os.ReadFile(history.Path(dir))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var n int64
	var last string
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		e, err := history.ParseLine(line)
		if err != nil {
			return false, nil // a torn tail: not the store's
		}
		n, last = n+1, e.Hash
	}
	if n == 0 || n != j.NextSeq || last != j.LastHash {
		return false, nil
	}
	err = atomicfile.WriteFile(filepath.Join(dir, jobstore.ManifestFile), j.Manifest, 0o600)
	jobstore.New(jobsDir).NoteChanged(j.ID) // for listings of the folder
	return true, err
}

// callNumbers are the interactions whose calls job folder dir keeps:
// contained ones (requests/NNNNNN.call) and uncontained ones whose
// process group the pid log names and still runs.
func callNumbers(dir string) []int {
	reqs := filepath.Join(dir, "requests")
	out := keptCalls(dir)
	add := func(n int) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if b, err := os.ReadFile(filepath.Join(reqs, agent.PidLog)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if n, pid, start, ok := agent.ParsePidLine(line); ok && agent.Alive(pid, start) {
				add(n)
			}
		}
	}
	return out
}

// keptCalls are the interactions whose contained calls job folder dir
// keeps (requests/NNNNNN.call): the calls a run of the job adopts.
func keptCalls(dir string) []int {
	var out []int
	ents, _ := os.ReadDir(filepath.Join(dir, "requests"))
	for _, e := range ents {
		if s, ok := strings.CutSuffix(e.Name(), ".call"); ok && e.IsDir() {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// stopCalls kills and forgets what is left of the calls job folder dir
// keeps (their launchers and sandboxes, uncontained process groups).
func stopCalls(dir string) error {
	var errs []error
	for _, n := range callNumbers(dir) {
		agent.KillOrphan(dir, n)
		errs = append(errs, agent.StopCall(agent.CallDir(dir, n), "", n))
	}
	return errors.Join(errs...)
}

// sweepCalls stops the calls kept in the folders of jobs this node does
// not run and no longer holds: the job is gone or finished, or its lease
// is another node's or nobody's (a job whose expired lease is still this
// node's may be claimed by it again and its call adopted).
func (n *Node) sweepCalls(ctx context.Context) {
	ents, err := os.ReadDir(n.Dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		id := e.Name()
		if !e.IsDir() || strings.HasPrefix(id, ".") {
			continue
		}
		dir := filepath.Join(n.Dir, id)
		if len(callNumbers(dir)) == 0 {
			continue
		}
		n.folders.Lock()
		n.mu.Lock()
		running := n.runs[id] != nil
		n.mu.Unlock()
		if !running {
			c, cancel := context.WithTimeout(ctx, n.TTL)
			j, err := n.Store.Job(c, id)
			cancel()
			switch {
			case err != nil && !errors.Is(err, clusterstore.ErrNotFound):
			case err == nil && j.Owner == n.ID && !j.Status.Terminal():
			default:
				if err := stopCalls(dir); err != nil {
					joblog.Log(n.Logger, "orphaned call not stopped: "+err.Error(), joblog.Problem{Job: id, Code: codes.ClusterRun}, "node", n.ID)
				} else {
					n.Logger.Info("orphaned call stopped: the job is no longer this node's", "job_id", id, "node", n.ID)
				}
			}
		}
		n.folders.Unlock()
	}
}
