package cli

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/snapshot"
)

var cmdDiscarded = &command{
	name: "discarded", args: "JOB [--rollback ID] [--into DIR]",
	summary: "the work a rollback took out of the workspace that no checkpoint held: list each rollback's, or write one's files into a new folder",
	example: "  logist discarded fix-login                                 # each rollback's discarded files\n" +
		"  logist discarded fix-login --into /tmp/fix-login-work      # the last rollback's files, into a new or empty folder\n" +
		"  logist discarded fix-login --rollback 3f2a… --into ./back  # an earlier one's\n",
	flags: func(fs *pflag.FlagSet) {
		fs.String("rollback", "", "the rollback's command id (the list's COMMAND, or its snapshot's name rollback-ID); default the last one")
		fs.String("into", "", "write the rollback's discarded files into DIR, a new or empty folder (never the job's workspace: copy what you want back yourself)")
	},
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		into, err := pathFlag(e.fs, "into", "DIR to write the files into")
		if err != nil {
			return nil, err
		}
		if _, err := e.store.Load(id); err != nil {
			return nil, err
		}
		recs, err := history.ReadAll(e.store.JobDir(id))
		if err != nil {
			return nil, err
		}
		ds := jobview.Discards(recs)
		name, _ := e.fs.GetString("rollback")
		if into == "" && name == "" {
			return discardList(id, ds), nil
		}
		d, err := jobview.DiscardNamed(id, ds, name)
		if err != nil {
			return nil, err
		}
		if into == "" {
			return discardShown(id, d), nil
		}
		return discardWritten(e, id, d, into)
	},
}

// discardList lists job id's rollbacks that discarded work.
func discardList(id string, ds []jobview.Discard) *Result {
	r := &Result{Message: fmt.Sprintf("Job %s: %d rollbacks discarded changes that no checkpoint held", id, len(ds)),
		Columns: []string{"COMMAND", "TIME", "TO", "FILES", "KEPT"}, Items: ds}
	if len(ds) == 0 {
		r.Message = fmt.Sprintf("Job %s: no rollback discarded changes that no checkpoint held", id)
		r.Items = []jobview.Discard{}
	}
	for _, d := range ds {
		r.Rows = append(r.Rows, []string{d.CommandID, d.Time, d.To, strconv.Itoa(len(d.Files)), keptIn(d)})
	}
	return r
}

// discardShown is one rollback's discarded files.
func discardShown(id string, d *jobview.Discard) *Result {
	r := &Result{Message: fmt.Sprintf("Job %s: rollback %s to %s discarded %d changed files; %s", id, d.CommandID, d.To, len(d.Files), keptIn(*d)),
		Columns: []string{"PATH"}, Items: d}
	for _, f := range d.Files {
		r.Rows = append(r.Rows, []string{f})
	}
	return r
}

// keptIn says where a rollback's discarded files are kept.
func keptIn(d jobview.Discard) string {
	switch {
	case d.NotKept != "":
		return "not kept: " + d.NotKept
	case d.Snapshot == "":
		return "nothing to keep: every change was a deletion"
	}
	return filepath.Join(snapshot.Dir, d.Snapshot+".json")
}

// pathFlag is the value of the path flag name (what names it in a
// message: the FILE to write…), "" when it was not given. One given as
// an empty string is a usage error (fs.Changed tells it from absent):
// taken as absent, result --patch and discarded --into given an empty
// path quietly did their other thing (no patch written, the list shown).
func pathFlag(fs *pflag.FlagSet, name, what string) (string, error) {
	v, err := fs.GetString(name)
	if err != nil {
		return "", err
	}
	if v == "" && fs.Changed(name) {
		return "", usagef("--%s: empty path; name the %s", name, what)
	}
	return v, nil
}

// outsideJobs is path (given as flag's value) made absolute, or a usage
// error when it is the jobs folder or inside it: logistd takes a folder
// there for a job, and job id's workspace is its own (what is written
// into it would go into the job's next recovery point). The one rule of
// where a command writes a file the steward asked for (discarded --into,
// result --patch).
func outsideJobs(e *env, flag, path, id string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", usagef("%s %s: %v", flag, path, err)
	}
	jobs, err := filepath.Abs(e.store.Dir)
	if err != nil {
		return "", err
	}
	abs, jobs = resolved(abs), resolved(jobs)
	if abs == jobs || strings.HasPrefix(abs, jobs+string(filepath.Separator)) {
		return "", usagef("%s %s is inside the jobs folder %s; name a path outside it (logistd takes a folder there for a job, and job %s's workspace is its own: copy what you want back once it is not running)", flag, path, jobs, id)
	}
	return abs, nil
}

// discardWritten writes rollback d's discarded files into the folder into.
func discardWritten(e *env, id string, d *jobview.Discard, into string) (*Result, error) {
	if d.NotKept != "" {
		return nil, fmt.Errorf("rollback %s of job %s kept none of the %d files it discarded: %s", d.CommandID, id, len(d.Files), d.NotKept)
	}
	abs, err := outsideJobs(e, "--into", into, id)
	if err != nil {
		return nil, err
	}
	x := &snapshot.Extracted{Written: []string{}, Absent: slices.Clone(d.Files)}
	if d.Snapshot != "" {
		if x, err = snapshot.Extract(e.store.JobDir(id), d.Snapshot, d.Files, abs); err != nil {
			return nil, fmt.Errorf("--into %s: %w", into, err)
		}
	}
	r := &Result{Message: fmt.Sprintf("Job %s: wrote %d of the %d files rollback %s discarded into %s", id, len(x.Written), len(d.Files), d.CommandID, abs),
		Columns: []string{"PATH", "WHAT"}}
	items := []map[string]string{}
	for _, l := range []struct {
		what  string
		paths []string
	}{{"written", x.Written}, {"deleted before the rollback: nothing to write", x.Absent}} {
		for _, p := range l.paths {
			r.Rows = append(r.Rows, []string{p, l.what})
			items = append(items, map[string]string{"path": p, "what": strings.Fields(l.what)[0]})
		}
	}
	r.Items = items
	return r, nil
}

// resolved is the absolute path p with the links of its longest existing
// ancestor resolved: where a folder not made yet would be.
func resolved(p string) string {
	rest := ""
	for d := p; ; d = filepath.Dir(d) {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(r, rest)
		}
		if d == filepath.Dir(d) {
			return p
		}
		rest = filepath.Join(filepath.Base(d), rest)
	}
}
