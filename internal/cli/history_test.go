package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
)

// logist history shows its first page (the last historyPage interactions,
// read from the end of the history) in text output unless told --last;
// --last 0 and --format json give every interaction (issue 21's goal 4).
func TestHistoryFirstPageByDefault(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	writeJob(t, jobs, "long", jobJSON("RUNNING", `"current_phase": "work"`))
	l, _, err := history.OpenWith(jobstore.New(jobs).JobDir("long"), history.Options{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const calls = historyPage + 10
	for i := range calls {
		in := i
		if err := l.AppendBatch([]*history.Record{
			{Type: history.TypeIntent, Role: "worker", Phase: "work", Interaction: &in, Attempt: 1},
			{Type: history.TypeResponse, Role: "worker", Phase: "work", Interaction: &in,
				Response: &history.Response{Status: history.StatusSuccess, Action: "RETRY", Summary: "again"}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	rows := func(out string) int { return strings.Count(out, " RETRY ") }
	code, out, errOut := runMain(t, nil, "history", "long", "--jobs-dir", jobs)
	if code != 0 || rows(out) != historyPage || !strings.Contains(out, "--last 0 shows all") {
		t.Fatalf("history exit %d, %d rows, want the last %d and a word on --last 0:\n%s%s", code, rows(out), historyPage, out, errOut)
	}
	if _, out, _ = runMain(t, nil, "history", "long", "--jobs-dir", jobs, "--last", "0"); rows(out) != calls {
		t.Errorf("--last 0: %d rows, want %d:\n%s", rows(out), calls, out)
	}
	if _, out, _ = runMain(t, nil, "history", "long", "--jobs-dir", jobs, "--last", "5"); rows(out) != 5 {
		t.Errorf("--last 5: %d rows, want 5:\n%s", rows(out), out)
	}
	_, out, _ = runMain(t, nil, "history", "long", "--jobs-dir", jobs, "--format", "json")
	var doc struct {
		Interactions []json.RawMessage `json:"interactions"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Interactions) != calls {
		t.Errorf("--format json: %d interactions (%v), want %d:\n%.500s", len(doc.Interactions), err, calls, out)
	}
}

// logist history reads in the history's order: each recovery point,
// steward command and answer where it happened (not grouped by kind), a
// rollback naming the checkpoint it returned to, a recovery point in the
// phase it was made in with the phase it resumes at in its note; a page
// (--last N) is the end of that same order.
func TestHistoryInTimeOrder(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	writeJob(t, jobs, "ordered", jobJSON("RUNNING", `"current_phase": "review"`))
	l, _, err := history.OpenWith(jobstore.New(jobs).JobDir("ordered"), history.Options{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	call := func(n int, role, phase, summary string) []*history.Record {
		in := n
		return []*history.Record{
			{Type: history.TypeIntent, Role: role, Phase: phase, Interaction: &in, Attempt: 1},
			{Type: history.TypeResponse, Role: role, Phase: phase, Interaction: &in,
				Response: &history.Response{Status: history.StatusSuccess, Action: "COMPLETED", Summary: summary}},
		}
	}
	point := func(id, phase, resume string) *history.Record {
		return &history.Record{Type: history.TypeRecoveryPoint, Role: "worker", Phase: phase,
			RecoveryPoint: &history.RecoveryPoint{CheckpointID: id, ResumePhase: resume, CanResumeFrom: true, Description: "made in " + phase}}
	}
	units := [][]*history.Record{
		append(call(0, "worker", "work", "first"), point("cp-0000-work", "work", "review")),
		call(1, "supervisor", "review", "second"),
		{{Type: history.TypeSteward, Role: "STEWARD", Phase: "work", Steward: &history.Steward{Command: history.CommandRollback,
			CommandID: "c1", Reason: "again", Changes: map[string]any{"checkpoint_id": "cp-0000-work", "resume_phase": "review"}}}},
		append(call(2, "supervisor", "review", "third"), point("cp-0002-review", "review", "")),
	}
	for _, u := range units {
		if err := l.AppendBatch(u); err != nil {
			t.Fatal(err)
		}
	}
	// Each row's first cells and its note's start, in the order printed.
	rows := func(out string) []string {
		var got []string
		_, table, _ := strings.Cut(out, "SUMMARY / ERROR\n")
		for _, line := range strings.Split(table, "\n") {
			f := strings.Fields(line)
			if len(f) < 7 {
				continue
			}
			// f[1], f[2]: the time's date and clock.
			got = append(got, strings.Join(f[3:7], " "))
		}
		return got
	}
	want := []string{
		"worker work SUCCESS COMPLETED",
		"work CHECKPOINT cp-0000-work resumes",
		"supervisor review SUCCESS COMPLETED",
		"Steward work STEWARD rollback",
		"supervisor review SUCCESS COMPLETED",
		"review CHECKPOINT cp-0002-review the",
	}
	code, out, errOut := runMain(t, nil, "history", "ordered", "--jobs-dir", jobs)
	if got := rows(out); code != 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history exit %d, rows\n%s\nwant\n%s\n%s%s", code, strings.Join(got, "\n"), strings.Join(want, "\n"), out, errOut)
	}
	for _, s := range []string{"rollback → cp-0000-work", "resumes at review; made in work", "the job ended here; made in review"} {
		if !strings.Contains(out, s) {
			t.Errorf("history does not say %q:\n%s", s, out)
		}
	}
	if !strings.Contains(out, "PHASE") || strings.Contains(out, "RESUMES") {
		t.Errorf("history's columns:\n%s", out)
	}
	// The last two interactions: the rollback between them is shown where
	// it happened, and nothing before the older one.
	_, out, _ = runMain(t, nil, "history", "ordered", "--jobs-dir", jobs, "--last", "2")
	if got := rows(out); strings.Join(got, "\n") != strings.Join(want[2:], "\n") {
		t.Errorf("--last 2: rows\n%s\nwant\n%s\n%s", strings.Join(got, "\n"), strings.Join(want[2:], "\n"), out)
	}
}

// An answer a phase's effect sent back (a guard refused it) shows in
// logist history and logist logs with its outcome and why: the reason of
// the transition that sent it back, escaped as all agent text is.
func TestHistoryAndLogsSayWhyAnAnswerWasSentBack(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	writeJob(t, jobs, "g", jobJSON("REVIEWING", `"current_phase": "review"`))
	l, _, err := history.OpenWith(jobstore.New(jobs).JobDir("g"), history.Options{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	in := 1
	why := "VIOLATION: ordering guard: critic reviews unknown proposal \"p9\x1b[2J\""
	if err := l.AppendBatch([]*history.Record{
		{Type: history.TypeIntent, Role: "supervisor", Phase: "review", Interaction: &in, Attempt: 1},
		{Type: history.TypeResponse, Role: "supervisor", Phase: "review", Interaction: &in,
			Response: &history.Response{Status: history.StatusSuccess, Action: "COMPLETED", Summary: "p1 is low risk",
				Outcome: "VIOLATION", SentBack: true, NewStatus: "REVIEWING"}},
		{Type: history.TypeTransition, Phase: "review", Transition: &history.Transition{From: "REVIEWING", To: "REVIEWING",
			FromPhase: "review", ToPhase: "review", Event: "phase_retry", Actor: "supervisor", Reason: why}},
	}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain(t, nil, "history", "g", "--jobs-dir", jobs)
	if code != 0 || !strings.Contains(out, "COMPLETED→VIOLATION") || !strings.Contains(out, `unknown proposal "p9\x1b[2J"`) {
		t.Errorf("history exit %d, want the outcome and the guard's message:\n%s%s", code, out, errOut)
	}
	code, out, errOut = runMain(t, nil, "logs", "g", "--jobs-dir", jobs)
	if code != 0 || !strings.Contains(out, "outcome VIOLATION (sent back)") || !strings.Contains(out, `phase_retry by supervisor: VIOLATION: ordering guard`) {
		t.Errorf("logs exit %d, want the outcome and the guard's message:\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("an escape reached the terminal:\n%q", out)
	}
}
