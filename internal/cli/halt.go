package cli

import (
	"fmt"

	"github.com/spf13/pflag"
)

var cmdHalt = &command{
	name: "halt", args: "JOB [--reason TEXT]", summary: "cancel a job (CANCELED); an agent call in flight is killed",
	example: "  logist halt fix-login --reason 'wrong approach'\n",
	flags:   func(fs *pflag.FlagSet) { fs.String("reason", "", "why, recorded in history") },
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		reason, _ := e.fs.GetString("reason")
		st, err := e.steward()
		if err != nil {
			return nil, err
		}
		m, err := st.Halt(id, reason)
		if err != nil {
			return nil, err
		}
		return changed(e, m, fmt.Sprintf("Job %s halted", id)), nil
	},
}
