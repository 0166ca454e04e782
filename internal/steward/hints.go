package steward

import (
	"regexp"
	"strings"
	"sync"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// What a steward does next with a job is decided here, once: logist
// status's Next line, the console's, and the hint of every command that
// refuses a job in the wrong state (resume, rollback, activate, set, reply,
// pm) all come from HintFor. A hint names a command that works on the job
// as it is: never one that would be refused (a resume under a budget still
// spent), nor one that makes the job final when the steward wants it back
// (a halt of a running job that is to be rolled back or resumed).

// HintFor says what a steward can do next with job m (id): a schedule's
// state, else what its error code asks for (nextByCode), else what its
// status allows (byStatus).
func HintFor(m *manifest.Manifest, id string) string {
	switch m.ScheduleState() {
	case manifest.ScheduleActive:
		return "a schedule: logist schedules pause " + id + " pauses it; logist halt " + id + " stops it for good"
	case manifest.SchedulePaused:
		return "a paused schedule: logist schedules resume " + id + " resumes it at its next tick; logist halt " + id + " stops it for good"
	case manifest.ScheduleStopped:
		return "a stopped schedule: it never fires again"
	}
	if m.Status.Waiting() {
		if f := nextByCode[m.Run.ErrorCode]; f != nil {
			if h := f(m, id); h != "" {
				return h
			}
		}
	}
	if f := byStatus[m.Status]; f != nil {
		return f(m, id)
	}
	return ""
}

// byStatus is what a steward can do with a job in each status, whatever
// stopped it.
var byStatus = map[lifecycle.Status]func(m *manifest.Manifest, id string) string{
	lifecycle.Draft: func(_ *manifest.Manifest, id string) string { return "activate it first: logist activate " + id },
	// Not "halt it": a halt cancels the job, which is final (it can then
	// be neither resumed nor rolled back).
	lifecycle.Pending:   waitHint,
	lifecycle.Running:   waitHint,
	lifecycle.Reviewing: waitHint,
	lifecycle.Success: func(_ *manifest.Manifest, id string) string {
		return "it has finished (logist rollback " + id + " --to CHECKPOINT takes it back to one of its recovery points)"
	},
	lifecycle.Canceled: func(*manifest.Manifest, string) string {
		return "it was canceled, which is final: submit its manifest again as a new job"
	},
	lifecycle.InterventionRequired: guidanceHint,
	lifecycle.HaltedCost:           budgetHint,
	lifecycle.HaltedTime:           budgetHint,
}

// nextByCode is what a steward does about a job stopped with an error
// code that guidance alone does not mend (an empty hint: the status's).
var nextByCode = map[string]func(m *manifest.Manifest, id string) string{
	codes.AwaitingReply: func(m *manifest.Manifest, id string) string {
		if role := waitingRole(m); role != "" {
			return "answer as " + role + ": logist reply " + id + " --as " + role + " --file ANSWER.json"
		}
		return "answer for the waiting role: logist reply " + id + " --as ROLE --file ANSWER.json (the reason names the role)"
	},
	codes.AwaitingSteward: func(_ *manifest.Manifest, id string) string {
		return "decide as the reason says (e.g. logist pm " + id + " approve|veto|amend_and_approve)"
	},
	codes.AgentConfig:  configHint,
	codes.AgentStart:   configHint,
	codes.NotInstalled: configHint,
	codes.AgentExit:    exitHint,
	codes.AgentEmpty:   emptyHint,
	codes.CostBudget:   budgetHint,
	codes.TimeBudget:   budgetHint,
	codes.CallBudget:   budgetHint,
	codes.WorkspaceSource: func(_ *manifest.Manifest, id string) string {
		// logist set refuses workspace (it is what the job started
		// from), and a resume makes the same source again.
		return "its workspace source cannot be used and cannot be changed on this job: halt it (logist halt " + id +
			") and submit a new job whose workspace names a repository and a ref it has (or a folder) that can be read"
	},
}

// waitHint is for a job that is queued or running.
func waitHint(_ *manifest.Manifest, id string) string {
	return "it is queued or running: wait until it stops (it stops by itself when it needs a steward, reaches a budget or finishes; logist watch " +
		id + " follows it)"
}

// guidanceHint continues a job with guidance.
func guidanceHint(m *manifest.Manifest, id string) string {
	return "continue it: " + resumeCmd(m, id) + " --guidance TEXT"
}

// budgetHint raises every budget the job has used up ("" when none is).
func budgetHint(m *manifest.Manifest, id string) string {
	if len(m.Spent(m.Run.DefaultBudgets)) == 0 {
		return ""
	}
	return "raise the budget to continue: " + resumeCmd(m, id)
}

// resumeCmd is the logist resume that continues job m: with a flag
// raising each budget it has used up (manifest.Budget.Raised: above what
// was used), which a resume without them is refused for.
func resumeCmd(m *manifest.Manifest, id string) string {
	cmd := "logist resume " + id
	for _, b := range m.Spent(m.Run.DefaultBudgets) {
		cmd += " " + b.Flag() + " " + b.Raised()
	}
	return cmd
}

// exitHint is for an agent program that exited with an error: the reason
// (its stderr) says whether the program could not run as configured
// (logist set mends that) or failed at the task (guidance may).
func exitHint(m *manifest.Manifest, id string) string {
	role := agentRole(m)
	return "if the agent's program could not run as configured (the reason says why it exited), fix it: logist set " + id + " agents." +
		role + ".command.argv=" + argvExample(m, role) + ", then " + resumeCmd(m, id) + "; else " + guidanceHint(m, id)
}

// emptyHint is for an agent that answered nothing: one that answers in a
// file and wrote none is mended by logist set (its program must write
// the file argv names), else guidance may help.
func emptyHint(m *manifest.Manifest, id string) string {
	role := agentRole(m)
	if a := m.Agents[role]; a.Command == nil || a.Command.Answer != "file" {
		return ""
	}
	return "if the agent's program does not write its answer to {answer_file} (the reason says what it did), fix it: logist set " + id + " agents." +
		role + ".command.argv=" + argvExample(m, role) + ", then " + resumeCmd(m, id) + "; else " + guidanceHint(m, id)
}

// argvExample is a command argv for role's agent in a hint, quoted for
// the shell: with {answer_file} when the agent answers in a file, which
// argv must then name (the manifest's check).
func argvExample(m *manifest.Manifest, role string) string {
	if a := m.Agents[role]; a.Command != nil && a.Command.Answer == "file" {
		return `'["PROGRAM","{request_file}","{answer_file}"]'`
	}
	return `'["PROGRAM","{request_file}"]'`
}

// roleInReason finds the role a reason names by its field
// (/agents/ROLE/...), as the intake check writes it.
var roleInReason = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`/agents/([^/\s:;]+)/`) })

// agentRole is the role whose agent stopped m: the one its reason names,
// else the one its phase plays ("ROLE" when neither is known).
func agentRole(m *manifest.Manifest) string {
	if r := roleInReason().FindStringSubmatch(m.Run.Reason); r != nil {
		return r[1]
	}
	if wf, err := m.ResolveWorkflow(); err == nil {
		if ph, ok := wf.Phases[m.Phase()]; ok && ph.Role != "" {
			return ph.Role
		}
	}
	return "ROLE"
}

// configHint is what a steward does about an agent that cannot start or
// is misconfigured: guidance cannot fix a configuration, logist set can.
func configHint(m *manifest.Manifest, id string) string {
	then := ", then " + resumeCmd(m, id)
	role := agentRole(m)
	a := m.Agents[role]
	switch {
	case m.Run.ErrorCode == codes.AgentConfig && !strings.Contains(m.Run.Reason, "/command/argv"):
		return "fix the configuration the reason names: logist set " + id + " FIELD=JSON (agents, prompts, limits; e.g. prompts." + role + `='"reviewer.md"')` + then
	case a.Command != nil && a.Command.Preset != "":
		return "install the program, or name it: logist set " + id + " agents." + role + `.command.program='"/path/to/program"'` + then
	}
	return "fix the agent's program (the reason says why it cannot start): logist set " + id + " agents." + role + ".command.argv=" + argvExample(m, role) + then
}

// waitingRole is the role a job waiting for a reply waits for when one
// role can be: its phase's, played by a human. "" when it cannot be told
// from the manifest (a game's turns, where several parties may wait: the
// reason names them).
func waitingRole(m *manifest.Manifest) string {
	wf, err := m.ResolveWorkflow()
	if err != nil {
		return ""
	}
	ph, ok := wf.Phases[m.Phase()]
	if !ok || ph.Role == "" {
		return ""
	}
	if a, ok := m.Agents[ph.Role]; !ok || a.Provider != "human" {
		return ""
	}
	return ph.Role
}
