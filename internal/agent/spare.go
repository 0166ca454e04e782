package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/logist/logist/internal/sandbox"
)

// A job's next call under bwrap need not wait for its sandbox's start
// (namespaces, about 40 mounts, the in-sandbox helper and its Landlock
// ruleset): once a run has started, the run of the call the engine
// expects next (Request.Next: its agent, phase and role; none after a
// job's last call) is predicted (ProcSpec.Next: that agent's run, the
// next interaction's request file and answer folder) and its sandbox
// started by the executor (sandbox.Local.Spare), to be used only by a run
// whose plan makes that very sandbox. The prediction binds paths of a call not made
// yet, so it makes them (an empty request file, an empty answer folder);
// they are the ones that call writes or uses anyway. When the job's run
// ends (Containment.EndJob) its spare is killed and what was made for a
// call that never started is removed.

// Sparer is an executor that can start a run's sandbox ahead of it
// (*sandbox.Local).
type Sparer interface {
	Spare(spec sandbox.Spec) error
	DropSpare(owner string)
}

// spareHeadStart is how long the program of a job run's first call (its
// pickup: goal 1 times how soon that program gets going) runs before the
// next call's spare is started, unless it ends sooner. Started at once, a
// spare's bwrap and helper took the CPU the program was starting on: in
// make bench's scenario 1 the contained pickup's p25-p75 went from
// 17-21 ms to 27-33 ms. A later call's spare starts at once: there the
// spare's start overlapping the call is what shortens the next call.
const spareHeadStart = 20 * time.Millisecond

// started says whether the job's run has had a spare predicted already
// (a call of it has started before).
func (n *nextFiles) started(job string) bool {
	if n == nil {
		return true // no spares: nothing to wait for
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.jobs[job]
	return ok
}

// spareNext starts the sandbox of the job's predicted next run, once run
// s has started. Nothing depends on it: without a spare the next run
// starts its own sandbox, as any does.
func (c *Contained) spareNext(s ProcSpec) {
	sp, ok := c.Exec.(Sparer)
	if !ok || s.Next == nil || c.nexts == nil || c.Job == "" || c.Mode != sandbox.LayerBwrap {
		return
	}
	next, undo, ok := s.Next()
	if !ok {
		return
	}
	c.nexts.add(c.Job, next.CallDir, undo)
	_ = sp.Spare(c.spec(next, next.CallDir)) // none: the next run starts its own sandbox
}

// EndJob kills the job's spare sandbox, if it has one, and removes what
// was made for predicted runs that never started: the job's run has
// ended (finished, halted, waiting for a steward, or the daemon stops).
func (c *Containment) EndJob(job string) {
	if sp, ok := c.Exec.(Sparer); ok {
		sp.DropSpare(job)
	}
	c.nexts.end(job)
}

// nextFiles are, per job, the undos of the predictions made for it.
type nextFiles struct {
	mu   sync.Mutex
	jobs map[string][]predicted
}

type predicted struct {
	callDir string
	undo    func()
}

// add records a prediction, and forgets those whose run has started
// (what was made for them is theirs).
func (n *nextFiles) add(job, callDir string, undo func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.jobs == nil {
		n.jobs = map[string][]predicted{}
	}
	kept := n.jobs[job][:0]
	for _, p := range n.jobs[job] {
		if p.callDir != callDir && !sandbox.Holds(p.callDir) {
			kept = append(kept, p)
		}
	}
	n.jobs[job] = append(kept, predicted{callDir, undo})
}

// end undoes the job's predictions whose run never started.
func (n *nextFiles) end(job string) {
	n.mu.Lock()
	ps := n.jobs[job]
	delete(n.jobs, job)
	n.mu.Unlock()
	for _, p := range ps {
		if !sandbox.Holds(p.callDir) {
			p.undo()
		}
	}
}

// removeIfEmpty removes a file or folder made for a predicted call if it
// is still empty (a request file written, an answer left, are a call's),
// and reports whether it did.
func removeIfEmpty(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || !(fi.IsDir() || fi.Mode().IsRegular() && fi.Size() == 0) {
		return false
	}
	return os.Remove(path) == nil // a folder that is not empty stays
}

// nextCommandRun is the run of the call the engine expects after req
// (req.Next), if a command agent plays it: its run as that call will make
// it (Command.run, with the next interaction's files), and what that
// run's sandbox binds and does not exist yet made: its answer folder and
// an empty request file, which the runner writes in place
// (regfile.WriteFile: the same file, so a sandbox that binds it sees what
// is written). No prediction for a preset (its scratch folder is made
// anew per call), a human, a script or an HTTP agent: they have no
// sandbox to start ahead.
func nextCommandRun(req *Request) (ProcSpec, func(), bool) {
	cmd, ok := req.Next.Provider.(*Command)
	if !ok {
		return ProcSpec{}, nil, false
	}
	next := &Request{JobID: req.JobID, Phase: req.Next.Phase, Role: req.Next.Role, Workspace: req.Workspace,
		JobDir: req.JobDir, Interaction: req.Interaction + 1}
	f := filesOf(next, true)
	var made []string
	if os.Mkdir(f.ansDir, 0o700) == nil {
		made = append(made, f.ansDir)
	}
	if takeFree(req.JobDir, next.Interaction, f.req) { // an emptied one (reqpool.go)
		made = append(made, f.req)
	} else if fd, err := os.OpenFile(f.req, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600); err == nil {
		_ = fd.Close() // empty: the runner writes it
		made = append(made, f.req)
	}
	undo := func() {
		for _, p := range slices.Backward(made) {
			removeIfEmpty(p)
		}
	}
	if fi, err := os.Lstat(f.req); err != nil || !fi.Mode().IsRegular() {
		undo()
		return ProcSpec{}, nil, false
	}
	r := cmd.run(next, f)
	return ProcSpec{Argv: r.Argv, Dir: r.Dir, Limit: r.Limit, Home: r.Home, ReadOnly: r.ReadOnly, ReadWrite: r.ReadWrite,
		CallDir: r.CallDir, Interaction: r.Interaction}, undo, true
}

// ClearPredicted removes what a daemon that died made for predicted calls
// that never started (its spare sandboxes died with it): in jobDir's
// requests/ folder, each empty request file and empty answer folder whose
// call folder holds no call. A call that runs on from that daemon, or ran,
// holds its call folder, and a real request is never empty. The runner
// calls it when a job's run starts, before any call of it.
func ClearPredicted(jobDir string) error {
	ents, err := readDir(filepath.Join(jobDir, "requests"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	clearPredicted(jobDir, ents)
	return nil
}

// clearPredicted is ClearPredicted of the requests/ folder's entries
// ents; it returns those it left.
func clearPredicted(jobDir string, ents []os.DirEntry) []os.DirEntry {
	dir := filepath.Join(jobDir, "requests")
	left := ents[:0:0]
	for _, e := range ents {
		if m := predictedName().FindStringSubmatch(e.Name()); m != nil {
			n, _ := strconv.Atoi(m[1])
			if !sandbox.Holds(CallDir(jobDir, n)) && removeIfEmpty(filepath.Join(dir, e.Name())) {
				continue
			}
		}
		left = append(left, e)
	}
	return left
}

// predictedName matches what a prediction makes: NNNNNN.json and
// NNNNNN.answer (a folder).
var predictedName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\d{6,})(?:\.json|\.answer)$`) })
