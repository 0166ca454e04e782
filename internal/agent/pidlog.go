package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/logist/logist/internal/regfile"
)

// PidLog is the file in a job's requests/ folder that records, one line
// "INTERACTION PGID START" per agent started, the process group of each
// call and its start time (to tell it from a later process that reuses the
// pid). It is appended to and never rewritten: a file created and removed
// per call would cost two directory changes per call, and on ext4 without
// a journal every removed inode makes the next creations in its group scan
// past it for five minutes.
const PidLog = "agent-pids"

// PidFile is a job's pid log held open for one run of the job: the run's
// first uncontained call opens it, the next ones append to the same
// descriptor, and the run's end closes it (an open, its checks and a
// close per call were about a third of the log's system calls). Nothing
// in Logist removes or replaces the pid log while its job runs; a run that
// ends closes the file, and the next opens it again. A person may (the
// job's requests/ folder removed by hand, and made again by the next
// call's request): each line first checks, with one fstat, that the
// descriptor's file still has a name, and opens the log again if not, so
// that no call's process group is written to a file a restarted daemon
// cannot read.
type PidFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
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

// add appends line, opening the file at the first line.
func (p *PidFile) add(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f != nil && unlinked(p.f) {
		_ = p.f.Close()
		p.f = nil
	}
	if p.f == nil {
		f, err := openPidLog(p.path)
		if err != nil {
			return
		}
		p.f = f
	}
	if _, err := p.f.WriteString(line); err != nil {
		_ = p.f.Close() // the next line opens it again
		p.f = nil
	}
}

// unlinked reports whether f's file has no name left in any folder (its
// link count is 0). A file whose state cannot be read is kept.
func unlinked(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
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
// PidFile ctx carries if it is p's, else opened and closed here.
func recordPid(ctx context.Context, p string, interaction, pid int) {
	// An agent that has already exited (a zombie until the call reaps it)
	// is recorded too: the log names every call's process group, however
	// fast its leader was (a loaded machine may run it to its end before
	// this line).
	st, ok := startOf(pid, true)
	if !ok {
		return
	}
	// The leading newline ends a line a power cut may have left unended,
	// so that it cannot swallow this one. Best effort, like the rest of
	// the function: the log serves a daemon restarted after a crash (the
	// page cache outlives the process; a power cut leaves no orphans), and
	// a call is not refused for a line it could not add.
	line := fmt.Sprintf("\n%d %d %s\n", interaction, pid, st)
	if kept, ok := ctx.Value(pidFileKey{}).(*PidFile); ok && kept != nil && kept.path == p {
		kept.add(line)
		return
	}
	f, err := openPidLog(p)
	if err != nil {
		return
	}
	_, _ = f.WriteString(line)
	_ = f.Close()
}
