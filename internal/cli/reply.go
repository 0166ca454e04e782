package cli

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/regfile"
)

// logist reply: the answer of a role the steward plays (provider "human").
var cmdReply = &command{
	name: "reply", args: "JOB --as ROLE (--file F | --answer JSON)",
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
			b, err = regfile.ReadFile(file) // never blocks on a FIFO, nor reads a device without end
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
