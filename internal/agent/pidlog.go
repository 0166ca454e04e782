package agent

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/logist/logist/internal/regfile"
)

// PidLog is the file in a job's requests/ folder that records, one line
// "INTERACTION PGID START" per agent started, the process group of each
// call and its start time (to tell it from a later process that reuses the
// pid). It is appended to, not a file per call: a file created and removed
// per call would cost two directory changes per call, and on ext4 without
// a journal every removed inode makes the next creations in its group scan
// past it for five minutes. A run keeps it bounded (PidFile): once it
// reaches PidLogMax bytes, it is rewritten with only the lines that may
// still name a running agent.
const PidLog = "agent-pids"

// PidLogMax is the size at which a run compacts its job's pid log (some
// forty to sixty lines): the log never holds more than this and a line,
// plus the lines of agents still running. A long chain of calls (a RETRY
// loop up to the job's calls budget) grew it by a line per call for ever.
const PidLogMax = 1 << 10

// PidFile is a job's pid log held open for one run of the job: the run's
// first uncontained call opens it, the next ones append to the same
// descriptor, and the run's end closes it (an open, its checks and a
// close per call were about a third of the log's system calls). A person
// may remove the log while its job runs (the job's requests/ folder
// removed by hand, and made again by the next call's request): each line
// first checks, with one fstat, that the descriptor's file still has a
// name, and opens the log again if not, so that no call's process group
// is written to a file a restarted daemon cannot read.
//
// The same fstat gives the file's size, which keeps the log bounded: at
// PidLogMax bytes, the line's call first compacts it (compact) and the run
// appends to the compacted file from then on. The log is there to find,
// after a crash, an agent that outlived its daemon; the line of a call
// whose agent the run has reaped (recordPid's done) names a process group
// that is gone, which every reader skips (its pid no longer runs with its
// start time), and the compaction drops it. Per call, that costs a map
// entry; the compaction itself, some nine system calls, comes every forty
// calls or so, after the call's agent has started.
type PidFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
	// mine are the lines (trimmed) this run added since the log's last
	// compaction, and those still running from before: true while the
	// call's agent runs, false once the call has reaped it.
	mine map[string]bool
}

// NewPidFile is the pid log of the job in jobDir, not opened yet.
func NewPidFile(jobDir string) *PidFile {
	return &PidFile{path: filepath.Join(jobDir, "requests", PidLog)}
}

// Close closes the file if a call opened it.
func (p *PidFile) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f == nil {
		return nil
	}
	err := p.f.Close()
	p.f = nil
	return err
}

// add appends line, opening the file at the first line and compacting it
// first if it has reached PidLogMax bytes. done says the line's call has
// reaped its agent.
func (p *PidFile) add(line string) (done func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f == nil {
		f, err := openPidLog(p.path)
		if err != nil {
			return func() {}
		}
		p.f = f
	}
	// At a run's first line too: a log the runs before left large (one
	// written before logs were compacted) is compacted at once.
	switch size, gone := fileState(p.f); {
	case gone:
		_ = p.f.Close()
		p.f = nil
		f, err := openPidLog(p.path)
		if err != nil {
			return func() {}
		}
		p.f = f
	case size >= PidLogMax:
		p.compact()
	}
	if _, err := p.f.WriteString(line); err != nil {
		_ = p.f.Close() // the next line opens it again
		p.f = nil
		return func() {}
	}
	key := strings.TrimSpace(line)
	if p.mine == nil {
		p.mine = map[string]bool{}
	}
	p.mine[key] = true
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if _, ok := p.mine[key]; ok {
			p.mine[key] = false
		}
	}
}

// compact replaces the log by a file holding only the lines that may
// still name a running agent: those of this run's calls in flight, and
// any other line (a crashed daemon's, or one not added through p) whose
// process group leader still exists with its start time (liveLine). The
// new file is written beside the log and renamed over it, so that a
// crash at any moment leaves one whole log or the other; the run goes on
// appending to the new file's descriptor. It is not fsync'd: the log
// serves a daemon restarted after a crash of this one, which the page
// cache outlives, and a power cut leaves no agent running to find. A
// compaction that fails leaves the log as it was, to be tried again at
// the next line.
func (p *PidFile) compact() {
	// Ended calls' lines are told from others only once: a compaction
	// that fails leaves them to the next, which checks them as it checks
	// other lines.
	defer maps.DeleteFunc(p.mine, func(_ string, running bool) bool { return !running })
	b, err := regfile.ReadFile(p.path)
	if err != nil {
		return
	}
	var keep strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if running, ok := p.mine[line]; ok && !running {
			continue // its call reaped its agent
		} else if !ok && !liveLine(line) {
			continue
		}
		keep.WriteString(line)
		keep.WriteByte('\n')
	}
	tmp := p.path + ".new" // one a compaction a crash cut short left is truncated
	f, err := regfile.OpenFile(tmp, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		if keep.Len() > 0 {
			_, err = f.WriteString(keep.String())
		}
		if err == nil {
			err = regfile.Rename(tmp, p.path)
		}
		if err != nil {
			_ = f.Close() // nothing of it is needed
		}
	}
	if err != nil {
		_ = os.Remove(tmp)
		return
	}
	_ = p.f.Close() // the old log, now without a name
	p.f = f
}

// liveLine reports whether pid log line "INTERACTION PGID START" names a
// process that exists with that start time: running, or exited and not
// yet reaped (a call reaps its agent only after killing its group). A
// line a crash cut short, or one naming a pid now someone else's, is not.
func liveLine(line string) bool {
	_, pid, start, ok := ParsePidLine(line)
	if !ok {
		return false
	}
	cur, ok := startOf(pid, true)
	return ok && cur == start
}

// ParsePidLine parses a pid log line "INTERACTION PGID START"; false for
// one that is not whole (a crash cut it short) or names no process group.
func ParsePidLine(line string) (n, pid int, start string, ok bool) {
	_, err := fmt.Sscanf(line, "%d %d %s", &n, &pid, &start)
	return n, pid, start, err == nil && pid > 1
}

// fileState is f's size, and whether its file has no name left in any
// folder (its link count is 0): one fstat. A file whose state cannot be
// read is kept, and not compacted.
func fileState(f *os.File) (size int64, unlinked bool) {
	fi, err := f.Stat()
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return fi.Size(), ok && st.Nlink == 0
}

type pidFileKey struct{}

// WithPidFile returns ctx carrying p: the uncontained runs made with it
// whose pid log is p's append their lines to p's descriptor.
func WithPidFile(ctx context.Context, p *PidFile) context.Context {
	return context.WithValue(ctx, pidFileKey{}, p)
}

// openPidLog opens a pid log for appending; tests count its calls.
var openPidLog = func(p string) (*os.File, error) {
	return regfile.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
}

// recordPid appends the call's line to the pid log p: through the
// PidFile ctx carries if it is p's, else opened and closed here. The
// caller calls done once it has reaped the agent: the PidFile's next
// compaction drops the line.
func recordPid(ctx context.Context, p string, interaction, pid int) (done func()) {
	// An agent that has already exited (a zombie until the call reaps it)
	// is recorded too: the log names every call's process group, however
	// fast its leader was (a loaded machine may run it to its end before
	// this line).
	st, ok := startOf(pid, true)
	if !ok {
		return func() {}
	}
	// The leading newline ends a line a power cut may have left unended,
	// so that it cannot swallow this one. Best effort, like the rest of
	// the function: the log serves a daemon restarted after a crash (the
	// page cache outlives the process; a power cut leaves no orphans), and
	// a call is not refused for a line it could not add.
	line := fmt.Sprintf("\n%d %d %s\n", interaction, pid, st)
	if kept, ok := ctx.Value(pidFileKey{}).(*PidFile); ok && kept != nil && kept.path == p {
		return kept.add(line)
	}
	f, err := openPidLog(p)
	if err != nil {
		return func() {}
	}
	_, _ = f.WriteString(line)
	_ = f.Close()
	return func() {}
}
