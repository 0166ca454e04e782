package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// census counts, under strace, the file-system calls logistd makes for
// one two-call job (command worker and supervisor, each answering at
// once) in the job's folder (and the jobs folder's fsyncs for it): fsyncs, new inodes, renames, unlinks of a
// file that is not there, bytes written. Counts, not times: they do not
// depend on the machine's load. Issue 21's goal 2 asks for at most 4
// fsyncs per two-call job.
type census struct {
	fsyncs, inodes, renames, missingUnlinks, written int
}

var (
	straceCall = regexp.MustCompile(`^\d+\s+(\w+)\((.*)\)\s+= (-?\d+)`)
	// A call another thread's interrupted: "PID name(args <unfinished
	// ...>", then "PID <... name resumed>rest) = ret".
	straceCut    = regexp.MustCompile(`^(\d+)\s+(\w+\(.*) <unfinished \.\.\.>$`)
	straceResume = regexp.MustCompile(`^(\d+)\s+<\.\.\. \w+ resumed>(.*)$`)
	stracePath   = regexp.MustCompile(`"([^"]*)"|<([^>]*)>`)
)

// takeCensus runs logistd --once over a folder holding the one job under
// strace -f -y and counts what touched the job's folder.
func (h *harness) takeCensus() (*census, error) {
	if _, err := exec.LookPath("strace"); err != nil {
		return nil, fmt.Errorf("strace not found: %w", err)
	}
	root, err := h.dir("census")
	if err != nil {
		return nil, err
	}
	jobs := filepath.Join(root, "jobs")
	if err := writeJob(jobs, "j", h.cmdManifest("j", "-")); err != nil {
		return nil, err
	}
	trace := filepath.Join(root, "trace")
	if out, err := run(root, "strace", "-f", "-y", "-qq", "-o", trace,
		"-e", "trace=fsync,fdatasync,openat,mkdirat,mkdir,rename,renameat,renameat2,unlink,unlinkat,write,pwrite64",
		h.logistd, "--once", "--jobs-dir", jobs, "--log-level", "error"); err != nil {
		return nil, fmt.Errorf("strace logistd --once: %v\n%s", err, out)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		return nil, err
	}
	return countCensus(string(b), filepath.Join(jobs, "j")), nil
}

// countCensus counts the calls of an strace -f -y log that name a path in
// dir (the job's folder), and the fsyncs of its parent (the jobs folder)
// from the first of them on: the job's placement there is made durable
// for it.
func countCensus(log, dir string) *census {
	c := &census{}
	created := map[string]bool{}
	parent, started := filepath.Dir(dir), false
	cut := map[string]string{} // pid -> the start of its interrupted call
	for _, l := range strings.Split(log, "\n") {
		if m := straceCut.FindStringSubmatch(l); m != nil {
			cut[m[1]] = m[2]
			continue
		}
		if m := straceResume.FindStringSubmatch(l); m != nil {
			l = m[1] + " " + cut[m[1]] + m[2]
			delete(cut, m[1])
		}
		m := straceCall.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		name, args := m[1], m[2]
		ret, _ := strconv.Atoi(m[3])
		inDir := false
		var path string
		for _, p := range stracePath.FindAllStringSubmatch(args, -1) {
			q := p[1] + p[2]
			if q == dir || strings.HasPrefix(q, dir+"/") {
				inDir, path = true, q
				break
			}
		}
		if !inDir {
			if started && (name == "fsync" || name == "fdatasync") && ret == 0 && strings.Contains(args, "<"+parent+">") {
				c.fsyncs++
			}
			continue
		}
		started = true
		switch name {
		case "fsync", "fdatasync":
			if ret == 0 {
				c.fsyncs++
			}
		case "openat":
			if strings.Contains(args, "O_CREAT") && ret >= 0 && !created[path] {
				// O_CREAT on a path not seen before: a new inode (an
				// O_CREAT open of a file already there is not counted).
				created[path] = true
				c.inodes++
			}
		case "mkdir", "mkdirat":
			if ret == 0 {
				c.inodes++
			}
		case "rename", "renameat", "renameat2":
			if ret == 0 {
				c.renames++
			}
		case "unlink", "unlinkat":
			if ret < 0 && strings.Contains(l, "ENOENT") {
				c.missingUnlinks++
			}
		case "write", "pwrite64":
			if ret > 0 {
				c.written += ret
			}
		}
	}
	return c
}

// syscallCensus adds scenario 2's census rows.
func (h *harness) syscallCensus() {
	c, err := h.takeCensus()
	if err != nil {
		h.note("2 census: not taken: %v", err)
		return
	}
	one := func(v int) Summary { return Summarize([]float64{float64(v)}) }
	h.raw("2.census.fsyncs", float64(c.fsyncs))
	h.raw("2.census.inodes", float64(c.inodes))
	h.add(Row{Scenario: "2", Name: "fsyncs for a two-call job (its folder and the jobs folder; strace of logistd --once)", Unit: "fsyncs", Stat: "median",
		Value: one(c.fsyncs), Goal: Goal{"value<=", 4},
		Note: fmt.Sprintf("same job: %d new inodes, %d renames, %d unlinks of a file that is not there, %d bytes written (counts, independent of the machine's load)",
			c.inodes, c.renames, c.missingUnlinks, c.written)})
}
