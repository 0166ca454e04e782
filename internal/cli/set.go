package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/steward"
)

var cmdSet = &command{
	name: "set", args: "JOB FIELD=VALUE... [--reason TEXT]",
	summary: "change a stopped job's (or a paused schedule's) configuration: agents, prompts, limits, secret_env; values are JSON; validated, recorded",
	example: `  logist set fix-login agents.worker.command.argv='["python3","worker.py","{request_file}"]'
  logist set fix-login /agents/worker/command/argv/0='"/usr/local/bin/my-agent"' --reason 'installed under /usr/local'
  logist set fix-login limits.max_retries=5 agents.supervisor.timeout_seconds=900
  logist set fix-login limits.call_timeout_seconds=null     # null removes a field
`,
	flags: func(fs *pflag.FlagSet) { fs.String("reason", "", "why, recorded in history") },
	run: func(e *env, args []string) (*Result, error) {
		if len(args) < 2 {
			return nil, usagef("expected JOB and at least one FIELD=VALUE, got %d argument(s)", len(args))
		}
		id, err := oneJob(args[:1])
		if err != nil {
			return nil, err
		}
		var as []steward.Assignment
		for _, a := range args[1:] {
			path, value, ok := strings.Cut(a, "=")
			if !ok || path == "" {
				return nil, usagef("%q is not FIELD=VALUE (e.g. agents.worker.command.argv='[\"python3\",\"w.py\"]')", a)
			}
			as = append(as, steward.Assignment{Path: path, Value: json.RawMessage(value)})
		}
		reason, _ := e.fs.GetString("reason")
		if err := steward.CheckText("reason", reason); err != nil {
			return nil, flagError(err)
		}
		st, err := e.steward()
		if err != nil {
			return nil, err
		}
		m, changes, err := st.Set(id, as, reason)
		if err != nil {
			return nil, err
		}
		next := "logist resume " + id
		if m.Status == lifecycle.Draft {
			next = "logist activate " + id
		}
		lines := []string{}
		for _, f := range slices.Sorted(maps.Keys(changes)) {
			c := changes[f]
			lines = append(lines, fmt.Sprintf("%s: %s → %s", f, jsonText(c.Old), jsonText(c.New)))
		}
		r := &Result{Message: fmt.Sprintf("Job %s reconfigured (recorded in its history); it stays %s", id, m.Status), Fields: []Field{
			{"job_id", "Job", id}, {"status", "Status", string(m.Status)}, {"changes", "Changes", lines}, {"next", "Next", next},
		}, Data: map[string]any{"job": m, "changes": changes, "next": next}}
		switch e.format {
		case "text":
			r.Text = r.Message + "\n"
			for _, l := range lines {
				r.Text += "  " + l + "\n"
			}
			r.Text += "Next: " + next + "\n"
		}
		return r, nil
	},
}

// jsonText is v as compact JSON; absent for nil.
func jsonText(v any) string {
	if v == nil {
		return "(absent)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
