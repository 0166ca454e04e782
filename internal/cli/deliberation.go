package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/deliberation"
)

// logist reply: the answer of a role the steward plays (provider "human").
var cmdReply = &command{
	name: "reply", args: "JOB --as ROLE (--file ANSWER.json | --answer JSON | -)",
	summary: "answer for a role played by a human (provider human); validated like an agent's answer, then the job goes on",
	example: "  logist reply parl-7 --as rep_2 --file answer.json\n  logist reply talks --as usa --answer '{\"speech\": \"We can accept option B.\"}'\n",
	flags: func(fs *pflag.FlagSet) {
		fs.String("as", "", "the role the reply is for (required)")
		fs.String("file", "", "file holding the answer (- for stdin)")
		fs.String("answer", "", "the answer JSON itself")
	},
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		role, _ := e.fs.GetString("as")
		if role == "" {
			return nil, usagef("--as ROLE is required")
		}
		file, _ := e.fs.GetString("file")
		text, _ := e.fs.GetString("answer")
		var b []byte
		switch {
		case file != "" && text != "":
			return nil, usagef("give --file or --answer, not both")
		case file == "-":
			b, err = io.ReadAll(io.LimitReader(e.stdin, 4<<20))
		case file != "":
			b, err = os.ReadFile(file)
		case text != "":
			b = []byte(text)
		default:
			return nil, usagef("the answer is missing: --file ANSWER.json or --answer JSON")
		}
		if err != nil {
			return nil, err
		}
		st, err := e.steward()
		if err != nil {
			return nil, err
		}
		m, err := st.Reply(id, role, b)
		if err != nil {
			return nil, err
		}
		return changed(e, m, fmt.Sprintf("Reply as %s filed; job %s goes on", role, id)), nil
	},
}

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
		switch decision {
		case "approve", "veto", "amend_and_approve", "opening_guidance":
		default:
			return nil, usagef("decision %q: use approve, veto, amend_and_approve or opening_guidance", decision)
		}
		reason, _ := e.fs.GetString("reason")
		guidance, _ := e.fs.GetString("guidance")
		st, err := e.steward()
		if err != nil {
			return nil, err
		}
		m, err := st.Decide(id, deliberation.Input{Kind: "pm_decision", From: "prime_minister",
			Content: map[string]any{"decision": decision, "reason": reason, "guidance": guidance}})
		if err != nil {
			return nil, err
		}
		return changed(e, m, fmt.Sprintf("Prime Minister's %s recorded; job %s goes on", decision, id)), nil
	},
}
