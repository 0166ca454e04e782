package runner

import (
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
)

// answerFile is a command agent that answers in a file: argv's program
// gets {answer_file} as its last argument.
func answerFile(argv ...string) map[string]any {
	return map[string]any{"provider": "command", "command": map[string]any{"argv": append(argv, "{answer_file}"), "answer": "file"}}
}

// An agent in answer-file mode that prints its answer on stdout and exits
// 0 answered nothing (AGENT_EMPTY, as an empty file would be: not
// AGENT_EXIT, which is a non-zero exit and retried): the job waits for a
// steward at once, told that no answer file was written and that stdout
// holds what looks like the answer, with a hint whose argv names
// {answer_file}; what it printed is recorded; and logist verify replays
// the decision.
func TestAnswerFileAgentThatPrintsItsAnswerOnStdout(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ans := `{"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "done"}`
	f.WriteJob("j", job(answerFile("sh", "-c", `echo "$1"`, "agent", ans), okSupervisor()))
	f.Run("j")
	last := checkEscalated(t, f, "j", codes.AgentEmpty, 1)
	m := f.Load("j")
	for _, w := range []string{"the agent wrote no answer file", "its stdout holds what looks like a JSON answer", "{answer_file}"} {
		if !strings.Contains(m.Run.Reason, w) || !strings.Contains(last.Error, w) {
			t.Errorf("reason %q (response %q) lacks %q", m.Run.Reason, last.Error, w)
		}
	}
	if last.RawResponse != "" || !strings.Contains(last.Stdout, `"summary_for_supervisor": "done"`) {
		t.Errorf("raw %q, stdout %q: want no answer and stdout recorded", last.RawResponse, last.Stdout)
	}
	if len(f.backoffs()) != 0 {
		t.Errorf("retried after %v: a program that exited 0 is not retried", f.backoffs())
	}
	if h := steward.HintFor(m, "j"); !strings.Contains(h, `"{answer_file}"`) || !strings.Contains(h, "logist set j agents.worker.command.argv=") {
		t.Errorf("hint %q: want an argv that names {answer_file}", h)
	}
	trs := testkit.OfType(f.Records("j"), history.TypeTransition)
	if tr := trs[len(trs)-1].Transition; tr.Event != string(lifecycle.EvInvalid) {
		t.Errorf("transition %s, want %s", tr.Event, lifecycle.EvInvalid)
	}
	checkIntact(t, f, "j")
}

// An agent in answer-file mode that writes the file and prints too: the
// file is its answer, and what it printed is recorded beside it (bounded
// as stderr is), not dropped.
func TestAnswerFileAgentThatAlsoPrints(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ans := `{"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "from the file"}`
	f.WriteJob("j", job(answerFile("sh", "-c", `echo "$1" > "$2"; echo progress; head -c 9000 /dev/zero | tr '\0' x`, "agent", ans), okSupervisor()))
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("status %s (%s), want SUCCESS", m.Status, m.Run.Reason)
	}
	resp := testkit.OfType(f.Records("j"), history.TypeResponse)[0].Response
	if resp.Summary != "from the file" || !strings.HasPrefix(resp.Stdout, "progress\nxxx") || len(resp.Stdout) > 4200 {
		t.Errorf("summary %q, stdout %d bytes %.40q: want the file's answer and stdout kept, bounded", resp.Summary, len(resp.Stdout), resp.Stdout)
	}
	checkIntact(t, f, "j")
}
