package cli

import (
	"fmt"
)

var cmdSubmit = &command{
	name: "submit", args: "FILE", summary: "validate a manifest and place it in the jobs folder as a new job; prints the job id",
	example: "  logist submit my-job.json\n  logist submit --jobs-dir /srv/jobs job.json --format json\n",
	run: func(e *env, args []string) (*Result, error) {
		if len(args) != 1 {
			return nil, usagef("expected one FILE argument")
		}
		st, err := e.steward()
		if err != nil {
			return nil, err
		}
		id, m, err := st.Submit(args[0])
		if err != nil {
			return nil, err
		}
		r := &Result{Message: fmt.Sprintf("Job %s submitted", id), Fields: []Field{
			{"job_id", "Job", id}, {"status", "Status", string(m.Status)}, {"path", "Folder", e.store.JobDir(id)},
		}}
		if e.format == "text" {
			r.Text = id + "\n"
		}
		return r, nil
	},
}
