package cli

import (
	"fmt"

	"github.com/spf13/pflag"

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
		return r, nil
	},
}
