package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/steward"
)

var cmdResume = &command{
	name: "resume", args: "JOB [--guidance TEXT] [--cost-threshold CENTS] [--time-threshold-minutes M] [--max-agent-calls N]",
	summary: "continue a job in INTERVENTION_REQUIRED, HALTED_COST or HALTED_TIME at the phase where it stopped",
	example: "  logist resume fix-login --guidance 'use the staging database'\n  logist resume big-refactor --cost-threshold 5000\n",
	flags: func(fs *pflag.FlagSet) {
		fs.String("guidance", "", "guidance for the next agent (part of its prompt, recorded in history)")
		fs.Float64("cost-threshold", 0, "new cost budget in cents")
		fs.Float64("time-threshold-minutes", 0, "new time budget in minutes")
		fs.Int("max-agent-calls", 0, "new calls budget: agent calls the job may have made in all (limits.max_agent_calls)")
	},
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		var o steward.ResumeOptions
		o.Guidance, _ = e.fs.GetString("guidance")
		if e.fs.Changed("cost-threshold") {
			v, _ := e.fs.GetFloat64("cost-threshold")
			o.CostThreshold = &v
		}
		if e.fs.Changed("time-threshold-minutes") {
			v, _ := e.fs.GetFloat64("time-threshold-minutes")
			o.TimeThresholdMinutes = &v
		}
		if e.fs.Changed("max-agent-calls") {
			n, _ := e.fs.GetInt("max-agent-calls")
			o.MaxAgentCalls = &n
		}
		if err := o.Check(); err != nil {
			return nil, flagError(err)
		}
		st, err := e.steward()
		if err != nil {
			return nil, err
		}
		m, err := st.Resume(id, o)
		if err != nil {
			return nil, err
		}
		return changed(e, m, fmt.Sprintf("Job %s resumed at phase %s", id, orDash(m.Phase()))), nil
	},
}

// flagError names a steward's refused option (steward.OptionError) by its
// flag, --cost-threshold for cost_threshold: a usage error (exit 1).
// Any other error is returned as it is.
func flagError(err error) error {
	var bad *steward.OptionError
	if errors.As(err, &bad) {
		return usagef("--%s %s", strings.ReplaceAll(bad.Field, "_", "-"), bad.Reason)
	}
	return err
}
