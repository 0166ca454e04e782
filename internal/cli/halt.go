package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/schedule"
	"github.com/logist/logist/internal/steward"
)

var cmdHalt = &command{
	name: "halt", args: "JOB [--reason TEXT]", summary: "cancel a job (CANCELED); an agent call in flight is killed. A schedule halted is stopped for good",
	example: "  logist halt fix-login --reason 'wrong approach'\n  logist halt nightly          # a schedule: it never fires again\n",
	flags:   func(fs *pflag.FlagSet) { fs.String("reason", "", "why, recorded in history") },
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		reason, _ := e.fs.GetString("reason")
		if err := steward.CheckText("reason", reason); err != nil {
			return nil, flagError(err)
		}
		st, err := e.steward()
		if err != nil {
			return nil, err
		}
		m, err := st.Halt(id, reason)
		if err != nil {
			return nil, err
		}
		res := changed(e, m, fmt.Sprintf("Job %s halted", id))
		if m.Schedule != nil {
			// A template: what stops is the schedule. Its runs are jobs of
			// their own, left as they are.
			runs, err := schedule.Runs(e.store, id)
			if err != nil {
				return nil, err
			}
			unfinished := []string{}
			for _, r := range runs {
				if !r.Manifest.Status.Terminal() {
					unfinished = append(unfinished, r.ID)
				}
			}
			haltedSchedule(res, id, unfinished)
		}
		return res, nil
	},
}

// haltedSchedule says in res that schedule id stopped, leaving its
// unfinished runs (by id) as they are.
func haltedSchedule(res *Result, id string, unfinished []string) {
	msg := fmt.Sprintf("Schedule %s stopped: it will not fire again (CANCELED is final; logist schedules pause pauses a schedule instead)", id)
	switch n := len(unfinished); n {
	case 0:
		msg += "; it has no unfinished runs"
	default:
		msg += fmt.Sprintf("; %d unfinished run(s) were left as they are: %s (halt each with logist halt RUN)", n, strings.Join(unfinished, ", "))
	}
	res.Message = msg
	res.Fields = slices.DeleteFunc(res.Fields, func(f Field) bool { return f.Key == "unfinished_runs" })
	res.Fields = append(res.Fields, Field{"unfinished_runs", "Unfinished runs", unfinished})
	res.Data["unfinished_runs"] = unfinished
}
