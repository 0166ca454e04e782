package cli

import (
	"encoding/json"
	"fmt"
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

// logist history shows error records (a call cut by a stop, the egress
// its agent was refused) as rows where they were recorded, their message
// escaped as all agent text is (a hostname is the agent's), in text,
// markdown and json; and each on the page of the interaction it was
// recorded with: a page (--last N) that shows an interaction shows its
// errors once, one that does not shows none of them.
func TestHistoryShowsErrorRecords(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	writeJob(t, jobs, "errs", jobJSON("RUNNING", `"current_phase": "work"`))
	l, _, err := history.OpenWith(jobstore.New(jobs).JobDir("errs"), history.Options{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	intent := func(n, attempt int) *history.Record {
		return &history.Record{Type: history.TypeIntent, Role: "worker", Phase: "work", Interaction: &n, Attempt: attempt}
	}
	answer := func(n int) *history.Record {
		return &history.Record{Type: history.TypeResponse, Role: "worker", Phase: "work", Interaction: &n,
			Response: &history.Response{Status: history.StatusSuccess, Action: "COMPLETED", Summary: fmt.Sprintf("answer %d", n)}}
	}
	failure := func(code, msg string) *history.Record {
		return &history.Record{Type: history.TypeError, Role: "worker", Phase: "work", Error: &history.ErrorInfo{Code: code, Message: msg}}
	}
	hostile := "call 000002: the network allowlist refused 1 connection to evil.example\x1b[31m:443 ×1\nerr 9 FAKE\r\x1b[2J"
	units := [][]*history.Record{
		{intent(0, 1)}, {answer(0)},
		// Interaction 1 cut by a daemon stop, then asked again.
		{intent(1, 1)}, {failure("AGENT_INTERRUPTED", "agent call interrupted by shutdown; it will be re-attempted with the same request")},
		{intent(1, 2)}, {answer(1)},
		// Interaction 2's refusals, in the unit of its answer.
		{intent(2, 1)}, {answer(2), failure("EGRESS_REFUSED", hostile)},
		{intent(3, 1)}, {answer(3)},
	}
	for _, u := range units {
		if err := l.AppendBatch(u); err != nil {
			t.Fatal(err)
		}
	}
	// Each row's first cell, role, phase, status and action, in order.
	rows := func(out string) []string {
		var got []string
		_, table, _ := strings.Cut(out, "SUMMARY / ERROR\n")
		for _, line := range strings.Split(table, "\n") {
			if f := strings.Fields(line); len(f) >= 7 {
				got = append(got, f[0]+" "+strings.Join(f[3:7], " "))
			}
		}
		return got
	}
	want := []string{
		"0 worker work SUCCESS COMPLETED",
		"err worker work ERROR AGENT_INTERRUPTED",
		"1 worker work SUCCESS COMPLETED",
		"2 worker work SUCCESS COMPLETED",
		"err worker work ERROR EGRESS_REFUSED",
		"3 worker work SUCCESS COMPLETED",
	}
	code, out, errOut := runMain(t, nil, "history", "errs", "--jobs-dir", jobs)
	if got := rows(out); code != 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history exit %d, rows\n%s\nwant\n%s\n%s%s", code, strings.Join(got, "\n"), strings.Join(want, "\n"), out, errOut)
	}
	if !strings.Contains(out, "4 interactions, 0 recovery points, 2 errors") {
		t.Errorf("history does not count the errors:\n%s", out)
	}
	if !strings.Contains(out, `EGRESS_REFUSED                     call 000002: the network allowlist refused 1 connection to evil.example\x1b[31m:443 ×1\nerr 9 FAKE\r\x1b[2J`+"\n") {
		t.Errorf("history does not show the refusal escaped:\n%s", out)
	}
	if strings.ContainsAny(out, "\x1b\r") {
		t.Errorf("an escape reached the terminal:\n%q", out)
	}

	_, out, _ = runMain(t, nil, "history", "errs", "--jobs-dir", jobs, "--format", "markdown")
	var md []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| err |") {
			md = append(md, line)
		}
	}
	if len(md) != 2 || !strings.Contains(md[0], "| ERROR | AGENT_INTERRUPTED |") || !strings.Contains(md[1], "| ERROR | EGRESS_REFUSED |") ||
		!strings.Contains(md[1], "err 9 FAKE") || strings.ContainsAny(out, "\x1b\r") {
		t.Errorf("markdown: error rows %q in\n%q", md, out)
	}

	// --format json: jobHistory.json's events, the message as recorded.
	_, out, _ = runMain(t, nil, "history", "errs", "--jobs-dir", jobs, "--format", "json")
	var doc struct {
		Events []struct {
			Type  string             `json:"type"`
			Error *history.ErrorInfo `json:"error"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("--format json: %v\n%s", err, out)
	}
	var codes []string
	for _, ev := range doc.Events {
		if ev.Type == history.TypeError && ev.Error != nil {
			codes = append(codes, ev.Error.Code)
			if ev.Error.Code == "EGRESS_REFUSED" && ev.Error.Message != hostile {
				t.Errorf("--format json: message %q, want %q", ev.Error.Message, hostile)
			}
		}
	}
	if strings.Join(codes, " ") != "AGENT_INTERRUPTED EGRESS_REFUSED" {
		t.Errorf("--format json: error events %v\n%s", codes, out)
	}

	// Every page (--last N) is the end of the same rows, from the row of
	// its oldest interaction's first attempt: each error with the row of
	// its interaction, once, or neither.
	// Its summary counts each kind in the singular or the plural, and
	// says it is a page only when older records exist: --last 4 starts at
	// the history's first record (before, "--last 0 shows all" was offered
	// for it too, and one error was "1 errors").
	from := map[int]int{1: 5, 2: 3, 3: 1, 4: 0, 5: 0} // --last N: want[from[N]:]
	summary := map[int]string{
		1: "1 interaction, 0 recovery points (the last 1 interaction and what followed: --last 0 shows all)\n",
		2: "2 interactions, 0 recovery points (the last 2 interactions and what followed: --last 0 shows all), 1 error\n",
		3: "3 interactions, 0 recovery points (the last 3 interactions and what followed: --last 0 shows all), 2 errors\n",
		4: "4 interactions, 0 recovery points, 2 errors\n",
		5: "4 interactions, 0 recovery points, 2 errors\n",
	}
	for last := 1; last <= 5; last++ {
		_, out, _ := runMain(t, nil, "history", "errs", "--jobs-dir", jobs, "--last", fmt.Sprint(last))
		if got := rows(out); strings.Join(got, "\n") != strings.Join(want[from[last]:], "\n") {
			t.Errorf("--last %d: rows\n%s\nwant\n%s\n%s", last, strings.Join(got, "\n"), strings.Join(want[from[last]:], "\n"), out)
		}
		if !strings.HasPrefix(out, summary[last]) {
			t.Errorf("--last %d: summary, want %q:\n%s", last, summary[last], out)
		}
	}
}
