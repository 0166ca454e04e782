package cli

import (
	"fmt"
	"strings"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/textsafe"
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
		}, Data: map[string]any{"job": m, "path": e.store.JobDir(id)}}
		if warnings := manifestWarnings(args[0], m); len(warnings) > 0 {
			warning := strings.Join(warnings, "; ")
			r.Fields = append(r.Fields, Field{"warning", "Warning", warning})
			r.Data["warning"] = warning
			if e.format == "text" {
				for _, w := range warnings {
					fmt.Fprintf(e.stderr, "logist: warning: %s\n", textsafe.Block(w))
				}
			}
		}
		// Files the agents name that did not come with the manifest: a
		// warning on stderr in every format (the job is placed all the
		// same), and under "warnings" in JSON.
		var files []string
		for _, w := range agent.UncopiedFiles(args[0], m, e.store.Workspace(id)) {
			files = append(files, w.Error())
			fmt.Fprintf(e.stderr, "logist: warning: %s\n", textsafe.Block(w.Error()))
		}
		if len(files) > 0 {
			r.Data["warnings"] = files
		}
		note := waitsForDaemon(e, m)
		if note != "" {
			r.Fields = append(r.Fields, Field{"note", "Note", note})
			r.Data["note"] = note
		}
		if e.format == "text" {
			// Only the id on stdout, for scripts; the note for the person.
			r.Text = id + "\n"
			if note != "" {
				fmt.Fprintf(e.stderr, "logist: %s\n", note)
			}
		}
		return r, nil
	},
}
