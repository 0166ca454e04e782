package parliament

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/logist/logist/internal/deliberation"
)

const readme = "# Parks\n\nFund them.\n\nMore later.\n"

const goodDiff = "--- a/README.md\n+++ b/README.md\n@@ -1,3 +1,3 @@\n # Parks\n \n-Fund them.\n+Fund them by a levy.\n"

func writeWS(t *testing.T, h *harness, name, content string) {
	t.Helper()
	p := filepath.Join(h.ws, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

type toolCase struct {
	name  string
	tool  string
	args  []string
	exit  int
	wants string // in the output
}

func runCases(t *testing.T, st *state, cases []toolCase) {
	t.Helper()
	for _, c := range cases {
		o := st.exec(c.tool, c.args, nil)
		md := o.markdown()
		if o.exit != c.exit || !strings.Contains(md, c.wants) {
			t.Errorf("%s: %s %q = exit %d, want %d containing %q:\n%s", c.name, c.tool, c.args, o.exit, c.exit, c.wants, md)
		}
		if !strings.HasPrefix(md, "## Status: Success") && o.exit == exitOK || !strings.HasPrefix(md, "## Status: Error") && o.exit != exitOK {
			t.Errorf("%s: bad status line:\n%s", c.name, md)
		}
	}
}

// Each tool and each of its exit codes (seed 001), at the stage of business
// where it applies. exec is pure: the cases do not affect one another.
func TestToolsExitCodesAtOpening(t *testing.T) {
	h := newHarness(t, testConfig())
	writeWS(t, h, "README.md", readme)
	outside := t.TempDir()
	writeWS(t, &harness{ws: outside}, "secret.txt", "outside")
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(h.ws, "link.txt")); err != nil {
		t.Skip(err)
	}
	// The workspace is the agents': a named pipe is refused, not waited
	// on; a file past the limit is refused unread.
	if err := syscall.Mkfifo(filepath.Join(h.ws, "pipe.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeWS(t, h, "huge.md", strings.Repeat("x", maxFileBytes+1))
	h.step() // the House opens
	st := h.load().st
	if st.status != stOpening {
		t.Fatalf("status %s", st.status)
	}
	runCases(t, st, []toolCase{
		{"recognize no args", toolRecognize, nil, exitInvalid, "Usage"},
		{"recognize no instruction", toolRecognize, []string{"all"}, exitInvalid, "instruction is required"},
		{"recognize empty instruction", toolRecognize, []string{"all", " "}, exitInvalid, "Usage"},
		{"recognize member 0", toolRecognize, []string{"0", "x"}, exitInvalid, "Invalid member number"},
		{"recognize member 9", toolRecognize, []string{"9", "x"}, exitInvalid, "numbered 1 to 3"},
		{"recognize a name", toolRecognize, []string{"rep_1", "x"}, exitInvalid, "Invalid member number"},
		{"recognize all", toolRecognize, []string{"all", "Open"}, exitOK, "- **Requires Invocation**: true"},
		{"recognize one", toolRecognize, []string{"2", "Open"}, exitOK, "Recognizing Member 2"},
		{"table nothing", toolTable, nil, exitInvalid, "Usage"},
		{"table bad type", toolTable, []string{"law", "x"}, exitInvalid, "Invalid type"},
		{"table undrafted bill", toolTable, []string{"bill", "x"}, exitOutOfOrder, "Out of order"},
		{"table motion bad type", toolTable, []string{"motion", "dance", "x"}, exitInvalid, "Invalid motion type"},
		{"table motion no text", toolTable, []string{"motion", "call_vote"}, exitInvalid, "Usage"},
		{"table motion", toolTable, []string{"motion", "point_of_order", "Order!"}, exitOK, "Motion tabled"},
		{"table unknown amendment", toolTable, []string{"amendment", "AMDT-9"}, exitNotFound, "not found"},
		{"share no content", toolShare, []string{"a"}, exitInvalid, "name and content required"},
		{"share", toolShare, []string{"notes.txt", "hello"}, exitOK, "- **ID**: PAPER-1"},
		{"view", toolEdit, []string{"README.md", "--view"}, exitOK, "Fund them."},
		{"view missing", toolEdit, []string{"nope.md", "--view"}, exitNotFound, "not found"},
		{"view dotdot", toolEdit, []string{"../job.json", "--view"}, exitDenied, "Permission denied"},
		{"view absolute", toolEdit, []string{"/etc/passwd", "--view"}, exitDenied, "Permission denied"},
		{"view symlink out", toolEdit, []string{"link.txt", "--view"}, exitDenied, "Permission denied"},
		{"view a named pipe", toolEdit, []string{"pipe.md", "--view"}, exitNotFound, "not a regular file"},
		{"view past the limit", toolEdit, []string{"huge.md", "--view"}, exitInvalid, "larger than 1048576 bytes"},
		{"view no mode", toolEdit, []string{"README.md"}, exitInvalid, "Usage"},
		{"bad mode", toolEdit, []string{"README.md", "--frob"}, exitInvalid, "Usage"},
		{"view-amendment missing", toolEdit, []string{"--view-amendment", "AMDT-1"}, exitNotFound, "not found"},
		{"propose outside debate", toolEdit, []string{"README.md", "--propose", goodDiff}, exitOutOfOrder, "in debate"},
		{"enact missing", toolEdit, []string{"README.md", "--enact", "AMDT-1"}, exitNotFound, "not found"},
		{"create", toolEdit, []string{"docs/new.md", "--create", "hi"}, exitOK, "File docs/new.md created"},
		{"create existing", toolEdit, []string{"README.md", "--create", "x"}, exitOutOfOrder, "already exists"},
		{"create no name", toolEdit, []string{"", "--create", "x"}, exitInvalid, "file name is required"},
		{"create outside", toolEdit, []string{"../x", "--create", "x"}, exitDenied, "Permission denied"},
		{"order paper", toolOrderPaper, nil, exitOK, "- **Stage**: Opening Statements"},
		{"issue nothing", toolIssue, nil, exitInvalid, "Usage"},
		{"issue create no title", toolIssue, []string{"create"}, exitInvalid, "Usage"},
		{"issue create", toolIssue, []string{"create", "Fund parks", "Find money"}, exitOK, "Issue ISSUE-1 created"},
		{"issue close missing", toolIssue, []string{"close", "ISSUE-1"}, exitNotFound, "not found"},
		{"issue list", toolIssue, []string{"list"}, exitOK, "No open issues"},
		{"issue bad action", toolIssue, []string{"reopen", "x"}, exitInvalid, "Invalid action"},
		{"rule nothing", toolRule, nil, exitInvalid, "Usage"},
		{"rule unknown", toolRule, []string{"dance", "x"}, exitInvalid, "Invalid ruling"},
		{"rule round_start", toolRule, []string{"round_start", "x"}, exitOutOfOrder, "Clerk opens rounds"},
		{"rule call_vote at opening", toolRule, []string{"call_vote", "x"}, exitOutOfOrder, "in debate"},
		{"rule quiet at opening", toolRule, []string{"quiet", "1", "x"}, exitOutOfOrder, "debate ruling"},
		{"rule quiet bad member", toolRule, []string{"quiet", "7", "x"}, exitInvalid, "Invalid member number"},
		{"rule progress note", toolRule, []string{"progress_note", "Good."}, exitOK, "Ruling: progress_note"},
		{"unknown tool", "parliament-dance", nil, exitInvalid, "Unknown tool"},
		{"adjourn", toolAdjourn, []string{"Enough"}, exitOK, "- **Reason**: Enough"},
	})
	// A created file is written by the engine through file_write.
	o := st.exec(toolEdit, []string{"docs/new.md", "--create", "hi"}, nil)
	if str(o.write["path"]) != "docs/new.md" || str(o.write["content"]) != "hi" {
		t.Errorf("create write %v", o.write)
	}
}

// fileAmendmentAnswers: rep_1's first floor turn moves a file amendment.
func fileAmendmentAnswers(h *harness, t deliberation.Turn) (map[string]any, string) {
	if t.Kind == kFloor && t.Participant == "rep_1" && len(h.byType(tAmendment)) == 0 {
		return map[string]any{"type": "AMENDMENT", "content": map[string]any{"target_section": "file", "action": "modify",
			"description": "Say how", "rationale": "Clarity.", "proposed_text": "levy", "file": "README.md", "diff": goodDiff}}, ""
	}
	return h.defaultAnswer(t)
}

func TestToolsExitCodesInDebate(t *testing.T) {
	h := newHarness(t, testConfig())
	writeWS(t, h, "README.md", readme)
	h.answer = fileAmendmentAnswers
	h.run(func(st *state) bool { return st.amendment("AMDT-1") != nil && st.pend == nil })
	st := h.load().st
	if st.status != stDebate || st.question != nil {
		t.Fatalf("status %s question %v", st.status, st.question)
	}
	badDiff := strings.Replace(goodDiff, " # Parks", " # Gardens", 1)
	runCases(t, st, []toolCase{
		{"recognize all in debate", toolRecognize, []string{"all", "x"}, exitOutOfOrder, "one member at a time"},
		{"recognize one", toolRecognize, []string{"2", "Ask"}, exitOK, "- **Asked For**: floor"},
		{"view amendment", toolEdit, []string{"--view-amendment", "AMDT-1"}, exitOK, "+Fund them by a levy."},
		{"enact unvoted", toolEdit, []string{"README.md", "--enact", "AMDT-1"}, exitOutOfOrder, "has not passed a vote"},
		{"enact other file", toolEdit, []string{"other.md", "--enact", "AMDT-1"}, exitInvalid, "changes README.md"},
		{"propose conflicting diff", toolEdit, []string{"README.md", "--propose", badDiff}, exitInvalid, "does not apply"},
		{"propose garbage", toolEdit, []string{"README.md", "--propose", "not a diff"}, exitInvalid, "malformed diff"},
		{"propose missing file", toolEdit, []string{"nope.md", "--propose", goodDiff}, exitNotFound, "not found"},
		{"propose", toolEdit, []string{"README.md", "--propose", goodDiff}, exitOK, "Amendment AMDT-2 created"},
		{"table bill again", toolTable, []string{"bill", "x"}, exitOutOfOrder, "tabled once drafted"},
		{"table amendment", toolTable, []string{"amendment", "AMDT-1", "Vote it"}, exitOK, "Amendment AMDT-1 moved"},
		{"call vote gated", toolRule, []string{"call_vote", "Vote"}, exitOutOfOrder, "no vote while a motive scores below 3"},
		{"round end", toolRule, []string{"round_end", "Enough"}, exitOK, "Ruling: round_end"},
		{"quiet", toolRule, []string{"quiet", "2", "Order"}, exitOK, "- **Quiet Until Round**: 2"},
		{"redirect", toolRule, []string{"redirect", "2", "Answer the point"}, exitOK, "Ruling: redirect rep_2"},
		{"next speaker", toolRule, []string{"next_speaker", "3", "Rep 3 next"}, exitOK, "Ruling: next_speaker rep_3"},
		{"deadlock", toolRule, []string{"deadlock_warning", "Circles"}, exitOK, "Ruling: deadlock_warning"},
		{"issue close unknown", toolIssue, []string{"close", "ISSUE-1"}, exitNotFound, "not found"},
	})
	// The table bill target must exist (exit 4), checked at drafting.
	hd := newHarness(t, testConfig())
	hd.run(func(st *state) bool { return st.status == stDrafting && st.bill.Drafted })
	runCases(t, hd.load().st, []toolCase{
		{"table bill missing target", toolTable, []string{"bill", "nope.md", "x"}, exitNotFound, "not found"},
		{"table bill escaping target", toolTable, []string{"bill", "../x", "x"}, exitDenied, "Permission denied"},
		{"table bill", toolTable, []string{"bill", "The bill"}, exitOK, "Bill BILL-001 tabled"},
		{"recognize all to draft", toolRecognize, []string{"all", "x"}, exitOutOfOrder, "one member drafts"},
		{"recognize drafter again", toolRecognize, []string{"1", "x"}, exitOutOfOrder, "the bill is drafted"},
	})
	// With a question pending, only its addressee may speak.
	h.run(func(st *state) bool { return st.question != nil && st.pend == nil })
	st = h.load().st
	to := st.byID[st.question.To].num
	other := to%3 + 1
	runCases(t, st, []toolCase{
		{"recognize someone else", toolRecognize, []string{itoa(other), "x"}, exitOutOfOrder, "must first answer"},
		{"recognize the addressee", toolRecognize, []string{itoa(to), "x"}, exitOK, "- **Asked For**: answer"},
		{"quiet the addressee", toolRule, []string{"quiet", itoa(to), "x"}, exitOutOfOrder, "must first answer"},
		{"call vote", toolRule, []string{"call_vote", "x"}, exitOutOfOrder, "no question pending"},
		{"round end", toolRule, []string{"round_end", "x"}, exitOutOfOrder, "no question pending"},
		{"table amendment", toolTable, []string{"amendment", "AMDT-1"}, exitOutOfOrder, "no question pending"},
	})
}

func itoa(n int) string { return string(rune('0' + n)) }

// An agent Speaker drives the session through the tools only; each tool's
// output is fed back in its next prompt; the file amendment is proposed,
// voted, enacted; quiet holds until the next round; issues close once the
// bill passed.
func TestAgentSpeakerDrivesTheTools(t *testing.T) {
	cfg := testConfig()
	cfg.Speaker = "chair"
	h := newHarness(t, cfg)
	writeWS(t, h, "README.md", readme+"SECRET-FILE-MARKER\n")
	script := []struct {
		call []string
		exit int
	}{
		{[]string{toolIssue, "create", "Fund the parks", "Find money"}, 0},
		{[]string{toolIssue, "close", "ISSUE-1"}, 2},
		{[]string{toolRecognize, "all", "Open"}, 0},
		{[]string{toolRecognize, "2", "Draft"}, 2},
		{[]string{toolRecognize, "1", "Draft the bill"}, 0},
		{[]string{toolTable, "bill", "README.md", "The bill"}, 0},
		{[]string{toolEdit, "README.md", "--view"}, 0},
		{[]string{toolEdit, "README.md", "--propose", goodDiff}, 0},
		{[]string{toolRule, "quiet", "3", "Order"}, 0},
		{[]string{toolRecognize, "3", "Speak"}, 2},
		{[]string{toolRule, "redirect", "1", "REDIRECT-MARKER: address the cost"}, 0},
		{[]string{toolRecognize, "1", "Ask rep_2"}, 0},
		{[]string{toolRecognize, "1", "Again"}, 2},
		{[]string{toolRule, "call_vote", "Vote"}, 2},
		{[]string{toolRecognize, "2", "Answer"}, 0},
		{[]string{toolRule, "call_vote", "Vote"}, 2},
		{[]string{toolTable, "amendment", "AMDT-1"}, 0},
		{[]string{toolRecognize, "all", "Vote on AMDT-1"}, 0},
		{[]string{toolEdit, "README.md", "--enact", "AMDT-1"}, 0},
		{[]string{toolEdit, "README.md", "--enact", "AMDT-1"}, 2},
		{[]string{toolRule, "round_end", "End"}, 0},
		{[]string{toolRecognize, "3", "Speak"}, 0},
		{[]string{toolRecognize, "2", "Answer"}, 0},
		{[]string{toolRule, "call_vote", "Vote"}, 0},
		{[]string{toolRecognize, "all", "Vote"}, 0},
	}
	for _, s := range script {
		h.speaker = append(h.speaker, s.call)
	}
	step := h.run(nil)
	if step.Wait == "" {
		t.Fatalf("no PM wait: %+v\n%s", step, strings.Join(h.toolCalls(), "\n"))
	}
	h.speaker = append(h.speaker, []string{toolIssue, "close", "ISSUE-1"}, []string{toolAdjourn, "Done"})
	if err := h.input("approve", "ok", ""); err != nil {
		t.Fatal(err)
	}
	if step := h.run(nil); !step.Done || step.Outcome != "approved" {
		t.Fatalf("not done: %+v", step)
	}
	calls := h.byType(tTool)
	want := append(slices.Clone(script), struct {
		call []string
		exit int
	}{[]string{toolIssue, "close", "ISSUE-1"}, 0}, struct {
		call []string
		exit int
	}{[]string{toolAdjourn, "Done"}, 0})
	if len(calls) != len(want) {
		t.Fatalf("%d tool calls, want %d:\n%s", len(calls), len(want), strings.Join(h.toolCalls(), "\n"))
	}
	var speakerPrompts []string
	for _, tu := range h.turns {
		if tu.Kind == kSpeaker {
			speakerPrompts = append(speakerPrompts, tu.Prompt)
		}
	}
	for i, m := range calls {
		n, _ := intOf(m.Content["exit_code"])
		if n != want[i].exit || str(m.Content["by"]) != "agent" {
			t.Errorf("call %d %v: exit %d by %s, want %d\n%s", i, want[i].call, n, str(m.Content["by"]), want[i].exit, str(m.Content["output"]))
		}
		// The output is fed back in the Speaker's next prompt.
		if i+1 < len(speakerPrompts) && !strings.Contains(speakerPrompts[i+1], str(m.Content["output"])) {
			t.Errorf("call %d's output is not in the Speaker's next prompt", i)
		}
	}
	got, _ := os.ReadFile(filepath.Join(h.ws, "README.md"))
	if !strings.Contains(string(got), "Fund them by a levy.") {
		t.Errorf("enacted amendment not written: %s", got)
	}
	// The Speaker's tool output is private: members never see the file it
	// viewed; the Speaker does.
	for _, tu := range h.turns {
		if tu.Kind != kSpeaker && strings.Contains(tu.Prompt, "SECRET-FILE-MARKER") {
			t.Errorf("%s's prompt holds the Speaker's private tool output", tu.Participant)
		}
	}
	if !strings.Contains(speakerPrompts[7], "SECRET-FILE-MARKER") {
		t.Error("the Speaker did not get its --view output back")
	}
	// Quiet lasted until the next round only.
	for _, m := range calls {
		if strs(m.Content["args"])[0] == "3" && str(m.Content["tool"]) == toolRecognize {
			n, _ := intOf(m.Content["exit_code"])
			if m.Round == 1 && n != 2 || m.Round == 2 && n != 0 {
				t.Errorf("quiet member recognized in round %d: exit %d", m.Round, n)
			}
		}
	}
	redirected := false
	for _, tu := range h.turns {
		redirected = redirected || tu.Participant == "rep_1" && tu.Kind == kFloor && strings.Contains(tu.Prompt, "The Speaker directs you: REDIRECT-MARKER")
	}
	if !redirected {
		t.Error("the redirect did not reach the member's next prompt")
	}
	// Once adjourned, every tool but the order paper is out of order.
	runCases(t, h.load().st, []toolCase{
		{"share after adjournment", toolShare, []string{"a", "b"}, exitOutOfOrder, "adjourned"},
		{"order paper after adjournment", toolOrderPaper, nil, exitOK, "- **Stage**: Adjourned"},
	})
	files := checkFiles(t, h.load())
	if !strings.Contains(string(files["parliament/issues/ISSUE-1.md"]), "closed") {
		t.Errorf("issue file: %s", files["parliament/issues/ISSUE-1.md"])
	}
}

// A failing agent Speaker is replaced by the built-in policy after three
// failures in a row; one that never gives anyone the floor, after eight
// calls.
func TestAgentSpeakerFallback(t *testing.T) {
	cfg := testConfig()
	cfg.Speaker = "chair"
	h := newHarness(t, cfg)
	h.answer = func(h *harness, t deliberation.Turn) (map[string]any, string) {
		if t.Kind == kSpeaker {
			return nil, "the model is down"
		}
		return h.defaultAnswer(t)
	}
	h.step() // opens
	for i := 0; i < 3; i++ {
		h.step()
		if m := h.msgs[len(h.msgs)-1]; m.Type != deliberation.Skipped || str(m.Content["participant"]) != speakerID || !strings.Contains(str(m.Content["line"]), "the model is down") {
			t.Fatalf("failed Speaker turn not SKIPPED: %+v", m)
		}
	}
	h.step()
	if m := h.last(tTool); str(m.Content["by"]) != "builtin" || str(m.Content["tool"]) != toolRecognize {
		t.Fatalf("no built-in fallback: %v", m.Content)
	}
	// The members' turns reset the count: the agent Speaker is asked again.
	h.step()
	if st := h.step(); len(st.Turns) != 1 || st.Turns[0].Kind != kSpeaker {
		t.Fatalf("the agent Speaker is not asked again: %+v", st)
	}

	h2 := newHarness(t, cfg)
	for i := 0; i < 20; i++ {
		h2.speaker = append(h2.speaker, []string{toolOrderPaper})
	}
	for i := 0; i < 10; i++ {
		h2.step()
	}
	var by []string
	for _, m := range h2.byType(tTool) {
		by = append(by, str(m.Content["by"]))
	}
	if strings.Join(by, ",") != "agent,agent,agent,agent,agent,agent,agent,agent,builtin" {
		t.Errorf("streak guard: %v", by)
	}
}
