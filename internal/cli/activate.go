package cli

import (
	"fmt"
)

var cmdActivate = &command{
	name: "activate", args: "JOB", summary: "move a DRAFT job to PENDING so logistd runs it",
	example: "  logist submit draft.json   # a manifest with \"status\": \"DRAFT\"\n  logist activate draft\n",
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		st, err := e.steward()
		if err != nil {
			return nil, err
		}
		m, err := st.Activate(id)
		if err != nil {
			return nil, err
		}
		return changed(e, m, fmt.Sprintf("Job %s activated", id)), nil
	},
}
