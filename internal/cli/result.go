package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/regfile"
)

var cmdResult = &command{
	name: "result", args: "JOB [--patch FILE] [--push NAME]",
	summary: "a git workspace's result: the job branch, the base commit and a diff stat; write the change as a patch, or push the branch into the source repository",
	example: "  logist result fix-login\n" +
		"  logist result fix-login --patch fix-login.patch     # git apply fix-login.patch on the base\n" +
		"  logist result fix-login --push review/fix-login     # never the source's current branch\n",
	flags: func(fs *pflag.FlagSet) {
		fs.String("patch", "", "write the change from the base commit to the branch into FILE (binary files and renames included; git apply takes it)")
		fs.String("push", "", "push the job branch into the source repository as branch NAME (refused for the branch the source has checked out)")
	},
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		file, err := pathFlag(e.fs, "patch", "FILE to write the patch into")
		if err != nil {
			return nil, err
		}
		m, err := e.store.Load(id)
		if err != nil {
			return nil, err
		}
		if !m.IsGit() {
			// Not a mistake of the command line: the job is not of the
			// kind result reads (out of order, as a schedule command on
			// a job that is no schedule).
			return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status,
				Want: "it works in a plain folder, not a git workspace (its manifest names no workspace.git): it has no branch nor base commit to show",
				Hint: fmt.Sprintf("logist diff %s shows its changes between checkpoints", id)}
		}
		ps, err := e.jobPoints(id)
		if err != nil {
			return nil, err
		}
		if len(ps) == 0 || ps[0].Git == nil {
			return nil, &jobtx.OutOfOrderError{ID: id, Status: m.Status, Want: "the job has not started: its workspace and base commit are made before the first phase"}
		}
		start := ps[0].Git
		ws := e.store.Workspace(id)
		tip, err := gitws.Tip(e.ctx, ws, start.Branch)
		if err != nil {
			return nil, err
		}
		stat, err := gitws.DiffStat(e.ctx, ws, start.Commit, tip)
		if err != nil {
			return nil, err
		}
		msg := fmt.Sprintf("Job %s: branch %s, %s", id, start.Branch, strings.TrimSpace(lastLine(stat)))
		if stat == "" {
			msg = fmt.Sprintf("Job %s: branch %s, no change from the base", id, start.Branch)
		}
		if m.Status != lifecycle.Success {
			msg += fmt.Sprintf(" (the job is %s: the branch holds its last recovery point so far)", m.Status)
		}
		r := &Result{Message: msg, Fields: []Field{
			{"job_id", "Job", id}, {"status", "Status", string(m.Status)},
			{"branch", "Branch", start.Branch}, {"head_commit", "Head", tip},
			{"base_commit", "Base", start.Commit}, {"source", "Source", start.Repo + " " + orDash(start.Ref)},
			{"workspace", "Workspace", ws}, {"diffstat", "Diff stat", strings.TrimRight(stat, "\n")},
		}}
		r.Data = map[string]any{"job_id": id, "job_status": string(m.Status), "branch": start.Branch, "head_commit": tip, "base_commit": start.Commit,
			"repo": start.Repo, "ref": start.Ref, "workspace": ws, "diffstat": stat}
		if file != "" {
			if _, err := outsideJobs(e, "--patch", file, id); err != nil {
				return nil, err
			}
			patch, err := gitws.Patch(e.ctx, ws, start.Commit, tip)
			if err != nil {
				return nil, err
			}
			if err := writeSynced(file, patch); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil, usagef("--patch %s: its folder does not exist: %v", file, err)
				}
				return nil, fmt.Errorf("--patch %s: %w", file, err)
			}
			r.Fields = append(r.Fields, Field{"patch", "Patch", fmt.Sprintf("%s (%d bytes; git apply it on %s)", file, len(patch), start.Commit)})
			r.Data["patch"] = file
		}
		if name, _ := e.fs.GetString("push"); e.fs.Changed("push") {
			if err := gitws.Push(e.ctx, ws, start.Repo, start.Branch, name); err != nil {
				var refused *gitws.RefusedPushError
				if errors.As(err, &refused) {
					return nil, usagef("--push %s: %v", name, refused)
				}
				return nil, err
			}
			r.Fields = append(r.Fields, Field{"pushed", "Pushed", fmt.Sprintf("%s as branch %s of %s", start.Branch, name, start.Repo)})
			r.Data["pushed"] = name
		}
		return r, nil
	},
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// writeSynced writes b to file and fsyncs it before saying it is done.
// A file already there must be a regular file: opening a named pipe to
// write waits for a reader for ever.
func writeSynced(file string, b []byte) error {
	if fi, err := os.Stat(file); err == nil && !fi.Mode().IsRegular() {
		f, err := regfile.OpenRegular(file) // the error names what it is
		if err == nil {
			_ = f.Close() // it turned regular in between: read only, nothing to lose
			return fmt.Errorf("%s changed while it was checked; try again", file)
		}
		return err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
