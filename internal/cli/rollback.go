package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/steward"
)

var cmdRollback = &command{
	name: "rollback", args: "JOB --to CHECKPOINT [--guidance TEXT] [--reason TEXT]",
	summary: "restore the workspace of a checkpoint and resume the job at that checkpoint's phase (history keeps everything)",
	example: "  logist history fix-login            # lists the checkpoints\n  logist rollback fix-login --to cp-0002-work --guidance 'keep the old API'\n",
	flags: func(fs *pflag.FlagSet) {
		fs.String("to", "", "checkpoint id (see logist history JOB)")
		fs.String("guidance", "", "guidance for the next agent")
		fs.String("reason", "", "why, recorded in history")
	},
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		to, _ := e.fs.GetString("to")
		if to == "" {
			return nil, usagef("--to CHECKPOINT is required; logist history %s lists them", id)
		}
		var o steward.RollbackOptions
		o.Guidance, _ = e.fs.GetString("guidance")
		o.Reason, _ = e.fs.GetString("reason")
		if err := o.Check(); err != nil {
			return nil, flagError(err)
		}
		st, err := e.steward()
		if err != nil {
			return nil, err
		}
		m, cp, err := st.Rollback(id, to, o)
		if err != nil {
			return nil, err
		}
		r := changed(e, m, fmt.Sprintf("Job %s rolled back to %s; it resumes at phase %s", id, to, cp.ResumePhase))
		r.Fields = append(r.Fields, Field{"restored_files", "Restored files", cp.Snapshot.Files})
		r.Data["restored_files"], r.Data["checkpoint_id"] = cp.Snapshot.Files, to
		if cp.Git != nil {
			r.Fields = append(r.Fields, Field{"git_commit", "Branch " + cp.Git.Branch + " at", cp.Git.Commit})
			r.Data["git_commit"] = cp.Git.Commit
		}
		discarded(e, id, r)
		return r, nil
	},
}

// discarded adds to r what the rollback of job id just recorded it kept
// of the work it discarded (steward.keepDiscarded): the files changed
// since the job's checkpoint and the snapshot that holds them, which
// logist discarded writes out.
func discarded(e *env, id string, r *Result) {
	recs, err := history.ReadAll(e.store.JobDir(id))
	if err != nil {
		return
	}
	last := ""
	for i := len(recs) - 1; i >= 0 && last == ""; i-- {
		if st := recs[i].Steward; st != nil && st.Command == history.CommandRollback {
			last = st.CommandID
		}
	}
	ds := jobview.Discards(recs)
	if len(ds) == 0 || ds[len(ds)-1].CommandID != last {
		return
	}
	d := ds[len(ds)-1]
	if len(d.Files) > 0 {
		what := fmt.Sprintf("%d, not in any recovery point", len(d.Files))
		if d.Snapshot != "" {
			what += "; kept in " + keptIn(d) + " (logist discarded " + id + " --into DIR writes them out)"
		}
		r.Fields = append(r.Fields, Field{"discarded_files", "Discarded changes", what})
		var snap any // null when nothing was kept: every change a deletion
		if d.Snapshot != "" {
			snap = d.Snapshot
		}
		r.Data["discarded_files"], r.Data["discarded_snapshot"] = d.Files, snap
	}
	if d.NotKept != "" {
		r.Fields = append(r.Fields, Field{"discarded_not_kept", "Discarded changes not kept", d.NotKept})
		r.Data["discarded_not_kept"] = d.NotKept
	}
}
