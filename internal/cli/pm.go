package cli

import (
	"fmt"

	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/steward"
	"github.com/spf13/pflag"
)

// logist pm: the Prime Minister's decision on a parliament's bill.
var cmdPM = &command{
	name: "pm", args: "JOB approve|veto|amend_and_approve|opening_guidance [--reason TEXT] [--guidance TEXT]",
	summary: "the Prime Minister's (steward's) decision on a parliament's bill; a veto sends it back with the guidance",
	example: "  logist pm parl-7 approve --reason 'meets the brief'\n  logist pm parl-7 veto --reason 'no migration plan' --guidance 'add how existing users move over'\n",
	flags: func(fs *pflag.FlagSet) {
		fs.String("reason", "", "why")
		fs.String("guidance", "", "guidance for the representatives (a veto sends the bill back with it)")
	},
	run: func(e *env, args []string) (*Result, error) {
		if len(args) != 2 {
			return nil, usagef("usage: logist pm JOB approve|veto|amend_and_approve|opening_guidance")
		}
		id, decision := args[0], args[1]
		reason, _ := e.fs.GetString("reason")
		guidance, _ := e.fs.GetString("guidance")
		if err := steward.CheckTexts(reason, guidance); err != nil {
			return nil, flagError(err)
		}
		in, err := jobview.PMDecision(decision, reason, guidance)
		if err != nil {
			return nil, usagef("%v", err)
		}
		st, err := e.steward()
		if err != nil {
			return nil, err
		}
		m, err := st.Decide(id, in)
		if err != nil {
			return nil, err
		}
		return changed(e, m, fmt.Sprintf("Prime Minister's %s recorded; job %s goes on", decision, id)), nil
	},
}
