package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/snapshot"
)

var cmdDiff = &command{
	name: "diff", args: "JOB [--from CHECKPOINT] [--to CHECKPOINT]",
	summary: "what changed in a job's workspace between two checkpoints: the commits' diff in a git workspace, else the files the snapshots differ in",
	example: "  logist diff fix-login                                  # from cp-start to the last checkpoint\n" +
		"  logist diff fix-login --from cp-0001-work --to cp-0002-review\n",
	flags: func(fs *pflag.FlagSet) {
		fs.String("from", "cp-start", "checkpoint to compare from (logist history JOB lists them)")
		fs.String("to", "", "checkpoint to compare to (default: the last one)")
	},
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		ps, err := e.jobPoints(id)
		if err != nil {
			return nil, err
		}
		if len(ps) == 0 {
			return nil, usagef("job %s has no checkpoints yet: it has not started", id)
		}
		fromID, _ := e.fs.GetString("from")
		toID, _ := e.fs.GetString("to")
		if toID == "" {
			toID = ps[len(ps)-1].CheckpointID
		}
		from, err := pointNamed(id, ps, fromID)
		if err != nil {
			return nil, err
		}
		to, err := pointNamed(id, ps, toID)
		if err != nil {
			return nil, err
		}
		if from.Git != nil && to.Git != nil {
			text, err := gitws.Diff(e.ctx, e.store.Workspace(id), from.Git.Commit, to.Git.Commit)
			if err != nil {
				return nil, err
			}
			head := fmt.Sprintf("%s (%s) → %s (%s)\n", fromID, from.Git.Commit, toID, to.Git.Commit)
			if text == "" {
				text = "no change\n"
			}
			return &Result{Text: head + text, Message: fmt.Sprintf("Job %s: %s → %s", id, fromID, toID),
				Data: map[string]any{"job_id": id, "from": fromID, "to": toID, "from_commit": from.Git.Commit, "to_commit": to.Git.Commit, "diff": text}}, nil
		}
		ch, err := snapshotChanges(e.store.JobDir(id), from, to)
		if err != nil {
			return nil, err
		}
		r := &Result{Message: fmt.Sprintf("Job %s: %s → %s, %d added, %d modified, %d deleted (from the workspace snapshots: files, not lines)", id, fromID, toID, len(ch.Added), len(ch.Modified), len(ch.Deleted)),
			Columns: []string{"CHANGE", "PATH"}}
		items := []map[string]string{}
		for _, l := range []struct {
			what  string
			paths []string
		}{{"added", ch.Added}, {"modified", ch.Modified}, {"deleted", ch.Deleted}} {
			for _, p := range l.paths {
				r.Rows = append(r.Rows, []string{l.what, p})
				items = append(items, map[string]string{"change": l.what, "path": p})
			}
		}
		r.Items = items
		return r, nil
	},
}

// snapshotChanges are the files two checkpoints' snapshots differ in
// (jobview.SnapshotChanges, which the console's diff uses too).
func snapshotChanges(jobDir string, from, to *history.RecoveryPoint) (snapshot.Changes, error) {
	return jobview.SnapshotChanges(jobDir, from, to)
}
