package parliament

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/internal/pathguard"
	"github.com/logist/logist/internal/regfile"
)

// The Speaker's tools (seed 001), executed against the replayed session.
// parliament-rule is an addition: seed 000's Speaker rulings need a lever
// when the Speaker is an agent that acts only through tools.
const (
	toolRecognize  = "parliament-recognize"
	toolTable      = "parliament-table"
	toolShare      = "parliament-share"
	toolEdit       = "parliament-edit"
	toolOrderPaper = "parliament-order-paper"
	toolIssue      = "parliament-issue"
	toolAdjourn    = "parliament-adjourn"
	toolRule       = "parliament-rule"
)

// Exit codes (seed 001).
const (
	exitOK         = 0
	exitInvalid    = 1
	exitOutOfOrder = 2
	exitDenied     = 3
	exitNotFound   = 4
)

var toolNames = []string{toolRecognize, toolTable, toolShare, toolEdit, toolOrderPaper, toolIssue, toolAdjourn, toolRule}

var motionTypes = []string{"call_vote", "table_discussion", "request_amendment", "point_of_order", "request_compromise"}

const maxFileBytes = 1 << 20

type derived struct {
	msg      deliberation.Message
	round    int
	hasRound bool
}

// toolOut is what a tool did: its exit code and Markdown output (fed back
// to the Speaker), the effect the replay applies, a file write for the
// engine, and the House's messages it makes (rulings, papers, ...).
type toolOut struct {
	exit    int
	message string
	data    [][2]string
	effect  map[string]any
	write   map[string]any
	derived []derived
}

func fail(code int, format string, a ...any) toolOut {
	return toolOut{exit: code, message: fmt.Sprintf(format, a...)}
}

func (o *toolOut) add(k, v string) { o.data = append(o.data, [2]string{k, v}) }

func (o toolOut) markdown() string {
	var b strings.Builder
	st := "Success"
	if o.exit != exitOK {
		st = "Error"
	}
	fmt.Fprintf(&b, "## Status: %s\n\n%s\n", st, o.message)
	data := o.data
	if o.exit != exitOK {
		data = append([][2]string{{"Exit Code", strconv.Itoa(o.exit)}}, data...)
	}
	if len(data) > 0 {
		b.WriteString("\n### Data\n")
		for _, kv := range data {
			if strings.Contains(kv[1], "\n") {
				fmt.Fprintf(&b, "- **%s**:\n\n```\n%s\n```\n", kv[0], strings.TrimSuffix(kv[1], "\n"))
			} else {
				fmt.Fprintf(&b, "- **%s**: %s\n", kv[0], kv[1])
			}
		}
	}
	return b.String()
}

func ruling(rtype, action, text, target string, extra map[string]any) deliberation.Message {
	c := map[string]any{"ruling_type": rtype, "action": action, "ruling": text}
	if target != "" {
		c["target"] = target
	}
	for k, v := range extra {
		c[k] = v
	}
	return deliberation.Message{Type: tRuling, From: speakerID, To: target, Content: c}
}

// rulingTypes maps a ruling's action to its type (seed 000).
var rulingTypes = map[string]string{
	"redirect": "order", "quiet": "order", "call_vote": "order",
	"deadlock_warning": "observation", "progress_note": "observation",
	"next_speaker": "procedure", "round_start": "procedure", "round_end": "procedure",
}

// exec runs one tool call. hint is the built-in Speaker's bookkeeping for
// a recognition (whom the member should question).
func (s *state) exec(tool string, args []string, hint map[string]any) toolOut {
	if s.status == stComplete && tool != toolOrderPaper {
		return fail(exitOutOfOrder, "Out of order: the House has adjourned.")
	}
	switch tool {
	case toolRecognize:
		return s.recognize(args, hint)
	case toolTable:
		return s.table(args)
	case toolShare:
		return s.share(args)
	case toolEdit:
		return s.edit(args)
	case toolOrderPaper:
		return s.orderPaper()
	case toolIssue:
		return s.issue(args)
	case toolAdjourn:
		return s.adjourn(args)
	case toolRule:
		return s.rule(args)
	}
	return fail(exitInvalid, "Unknown tool %q (tools: %s).", tool, strings.Join(toolNames, ", "))
}

func (s *state) memberArg(a string) (*rep, toolOut, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(a))
	r := s.repByNum(n)
	if err != nil || r == nil {
		return nil, fail(exitInvalid, "Invalid member number %q: members are numbered 1 to %d.", a, len(s.reps)), false
	}
	return r, toolOut{}, true
}

// recognize grants the floor: the only way members are invoked. What the
// member is asked for follows from the stage of business.
func (s *state) recognize(args []string, hint map[string]any) toolOut {
	if len(args) != 2 || strings.TrimSpace(args[1]) == "" {
		return fail(exitInvalid, `Usage: parliament-recognize all|MEMBER "instruction" (the instruction is required).`)
	}
	if s.pend != nil {
		return fail(exitOutOfOrder, "Out of order: %s still hold the floor.", strings.Join(s.pend.Targets, ", "))
	}
	all := args[0] == "all"
	var target *rep
	if !all {
		r, o, ok := s.memberArg(args[0])
		if !ok {
			return o
		}
		target = r
	}
	var kind string
	var targets []string
	switch s.status {
	case stOpening:
		kind = kOpening
		for _, r := range s.reps {
			if !r.opened && (all || r == target) {
				targets = append(targets, r.ID)
			}
		}
		if len(targets) == 0 {
			return fail(exitOutOfOrder, "Out of order: %s already given an opening statement.", map[bool]string{true: "every member has", false: target.ID + " has"}[all])
		}
	case stEvaluating, stDrafting:
		kind = kDraft
		if all {
			return fail(exitOutOfOrder, "Out of order: one member drafts the bill; recognize the drafter.")
		}
		if s.status == stDrafting && s.bill.Drafted {
			return fail(exitOutOfOrder, "Out of order: the bill is drafted; table it (parliament-table bill ...).")
		}
		want := s.drafter
		if want != "" && target.ID != want {
			return fail(exitOutOfOrder, "Out of order: the drafter is %s (Member %d).", want, s.byID[want].num)
		}
		targets = []string{target.ID}
	case stDebate:
		if all {
			return fail(exitOutOfOrder, "Out of order: in debate the Speaker recognizes one member at a time.")
		}
		if q := s.question; q != nil {
			if target.ID != q.To {
				return fail(exitOutOfOrder, "Out of order: %s must first answer %s's question (%s).", q.To, q.From, q.MsgID)
			}
			kind = kAnswer
		} else {
			if target.quiet(s.round) {
				return fail(exitOutOfOrder, "Out of order: %s is quiet until round %d.", target.ID, target.quietUntil)
			}
			if s.capReached() {
				return fail(exitOutOfOrder, "Out of order: the debate clock is spent (%d of %d exchanges this round): call the vote or end the round.", s.exchanges, maxExchanges(s.round, s.seats()))
			}
			kind = kFloor
		}
		targets = []string{target.ID}
	case stVoting:
		kind = kVote
		for _, r := range s.reps {
			if !s.vote.Done[r.ID] && (all || r == target) {
				targets = append(targets, r.ID)
			}
		}
		if len(targets) == 0 {
			return fail(exitOutOfOrder, "Out of order: %s already voted.", map[bool]string{true: "every member has", false: args[0] + " has"}[all])
		}
	case stSynthesis:
		if all || target.ID != s.bill.Drafter || s.pmDecision != "amend_and_approve" || s.finalDrafted || s.finalSkipped {
			return fail(exitOutOfOrder, "Out of order: in synthesis only the drafter is recognized, once, to write in the Prime Minister's amendments; otherwise adjourn.")
		}
		kind = kDraft
		targets = []string{target.ID}
	default:
		return fail(exitOutOfOrder, "Out of order: no member may be recognized while the session is %s.", s.status)
	}
	data := map[string]any{}
	for k, v := range hint {
		data[k] = v
	}
	if kind == kAnswer {
		data["question_id"], data["to"] = s.question.MsgID, s.question.From
	}
	o := toolOut{exit: exitOK, effect: map[string]any{"kind": kind, "targets": targets, "instruction": oneLine(args[1]), "data": data}}
	if all {
		o.message = "Recognizing all members"
	} else {
		o.message = fmt.Sprintf("Recognizing Member %d (%s, %s)", target.num, target.Name, target.ID)
	}
	o.add("Target", args[0])
	o.add("Instruction", oneLine(args[1]))
	o.add("Members", strings.Join(targets, ", "))
	o.add("Asked For", kind)
	o.add("Requires Invocation", "true")
	return o
}

func (s *state) billID() string { return "BILL-001" }

// newRound closes the current debate round if it is still open (a veto
// sends the bill back mid-round) and opens the next.
func (s *state) newRound(endText string) []derived {
	var out []derived
	if s.round >= 1 && !s.ended[s.round] {
		if endText == "" {
			endText = s.line("round_end", s.round, map[string]string{"round": strconv.Itoa(s.round)})
		}
		out = append(out, derived{msg: ruling("procedure", "round_end", endText, "", nil)})
	}
	next := s.round + 1
	return append(out, derived{msg: ruling("procedure", "round_start", s.line("round_start", next, map[string]string{"round": strconv.Itoa(next), "bill": s.bill.Title}), "", map[string]any{"bill_version": s.bill.Version}), round: next, hasRound: true})
}

func (s *state) table(args []string) toolOut {
	if len(args) == 0 {
		return fail(exitInvalid, `Usage: parliament-table bill [FILE] "description" | motion TYPE "description" | amendment ID ["description"].`)
	}
	switch args[0] {
	case "bill":
		if len(args) < 2 || len(args) > 3 || strings.TrimSpace(args[len(args)-1]) == "" {
			return fail(exitInvalid, `Usage: parliament-table bill [FILE] "description".`)
		}
		if s.status != stDrafting || !s.bill.Drafted || s.bill.Tabled {
			return fail(exitOutOfOrder, "Out of order: a bill is tabled once drafted (session %s, drafted %v, tabled %v).", s.status, s.bill.Drafted, s.bill.Tabled)
		}
		target := ""
		if len(args) == 3 {
			target = cleanPath(args[1])
			if _, code, msg := s.readFile(args[1]); code != exitOK {
				return fail(code, "%s", msg)
			}
		}
		o := toolOut{message: fmt.Sprintf("Bill %s tabled", s.billID()), effect: map[string]any{"type": "bill", "bill_id": s.billID(), "version": s.bill.Version, "target": target, "description": oneLine(args[len(args)-1])}}
		o.add("ID", s.billID())
		o.add("Type", "bill")
		o.add("Version", strconv.Itoa(s.bill.Version))
		o.add("Target", target)
		o.add("Description", oneLine(args[len(args)-1]))
		o.derived = append(o.derived, s.newRound("")...)
		return o
	case "motion":
		if len(args) != 3 || strings.TrimSpace(args[2]) == "" {
			return fail(exitInvalid, `Usage: parliament-table motion TYPE "description" (TYPE: %s).`, strings.Join(motionTypes, ", "))
		}
		ok := false
		for _, t := range motionTypes {
			ok = ok || t == args[1]
		}
		if !ok {
			return fail(exitInvalid, "Invalid motion type %q (types: %s).", args[1], strings.Join(motionTypes, ", "))
		}
		o := toolOut{message: fmt.Sprintf("Motion tabled: %s", args[1]), effect: map[string]any{"type": "motion", "motion_type": args[1]}}
		o.add("Type", "motion")
		o.add("Motion", args[1])
		o.add("Description", oneLine(args[2]))
		o.derived = append(o.derived, derived{msg: deliberation.Message{Type: tMotion, From: speakerID, Content: map[string]any{"motion_type": args[1], "reason": oneLine(args[2])}}})
		return o
	case "amendment":
		if len(args) < 2 || len(args) > 3 {
			return fail(exitInvalid, `Usage: parliament-table amendment ID ["description"].`)
		}
		a := s.amendment(args[1])
		if a == nil {
			return fail(exitNotFound, "Amendment %s not found.", args[1])
		}
		if s.status != stDebate || s.question != nil {
			return fail(exitOutOfOrder, "Out of order: an amendment is put to the vote in debate, with no question pending (session %s).", s.status)
		}
		if a.Voted || !(a.open() || (a.Status == amIncorporated && a.Diff != "")) {
			return fail(exitOutOfOrder, "Out of order: amendment %s is %s%s.", a.ID, a.Status, map[bool]string{true: " and was voted on", false: ""}[a.Voted])
		}
		o := toolOut{message: fmt.Sprintf("Amendment %s moved: the question is that it be made", a.ID), effect: map[string]any{"type": "amendment", "amendment_id": a.ID}}
		o.add("ID", a.ID)
		o.add("Type", "amendment")
		o.add("Target", s.billID())
		if len(args) == 3 {
			o.add("Description", oneLine(args[2]))
		}
		o.derived = append(o.derived, derived{msg: ruling("order", "call_vote", s.line("amendment_vote", s.round, map[string]string{"id": a.ID}), "", map[string]any{"subject": a.ID})})
		return o
	}
	return fail(exitInvalid, "Invalid type %q: bill, motion or amendment.", args[0])
}

func (s *state) share(args []string) toolOut {
	if len(args) != 2 || strings.TrimSpace(args[0]) == "" || args[1] == "" {
		return fail(exitInvalid, `Usage: parliament-share NAME "content" (name and content required).`)
	}
	id := fmt.Sprintf("PAPER-%d", len(s.papers)+1)
	o := toolOut{message: "Shared: " + args[0], effect: map[string]any{"paper_id": id}}
	o.add("ID", id)
	o.add("Filename", args[0])
	o.add("Description", "Shared document: "+args[0])
	o.add("Content", args[1])
	o.derived = append(o.derived, derived{msg: deliberation.Message{Type: tPaper, From: speakerID, Content: map[string]any{
		"paper_id": id, "name": args[0], "content": args[1], "description": "Shared document: " + args[0]}}})
	return o
}

// readFile reads a workspace file as the session knows it: what a message
// wrote, else the workspace through pathguard.
func (s *state) readFile(p string) (string, int, string) {
	if strings.TrimSpace(p) == "" {
		return "", exitInvalid, "A file name is required."
	}
	clean := cleanPath(p)
	if filepath.IsAbs(p) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", exitDenied, fmt.Sprintf("Permission denied: %s is outside the workspace.", p)
	}
	if c, ok := s.files[clean]; ok {
		return c, exitOK, ""
	}
	if c, ok := s.shared[clean]; ok && s.isGoverned(clean) {
		// The text the House was shown is the official one: what the
		// workspace holds beside it is not (governed.go).
		return c, exitOK, ""
	}
	return s.readDisk(p, clean)
}

// readDisk reads a workspace file from the disk, through pathguard.
func (s *state) readDisk(p, clean string) (string, int, string) {
	if s.ws == "" {
		return "", exitNotFound, fmt.Sprintf("File %s not found (the job has no workspace).", p)
	}
	abs, exists, err := pathguard.Resolve(s.ws, clean)
	var esc *pathguard.EscapeError
	switch {
	case errors.As(err, &esc):
		return "", exitDenied, "Permission denied: " + esc.Error()
	case err != nil || !exists:
		return "", exitNotFound, fmt.Sprintf("File %s not found.", p)
	}
	// The workspace is the agents': a named pipe there is refused, not
	// waited on, and no more than the limit is read (regfile).
	b, err := regfile.ReadLimited(abs, maxFileBytes)
	switch {
	case errors.Is(err, regfile.ErrNotRegular) || errors.Is(err, syscall.EISDIR):
		return "", exitNotFound, fmt.Sprintf("File %s not found (not a regular file).", p)
	case err != nil:
		return "", exitNotFound, fmt.Sprintf("File %s cannot be read.", p)
	case len(b) > maxFileBytes:
		return "", exitInvalid, fmt.Sprintf("File %s is larger than %d bytes.", p, maxFileBytes)
	}
	return string(b), exitOK, ""
}

func (s *state) edit(args []string) toolOut {
	usage := `Usage: parliament-edit FILE --view | --view-amendment ID | FILE --propose "diff" | FILE --enact ID | FILE --create "content".`
	if len(args) == 2 && args[0] == "--view-amendment" {
		a := s.amendment(args[1])
		if a == nil {
			return fail(exitNotFound, "Amendment %s not found.", args[1])
		}
		o := toolOut{message: "Amendment " + a.ID}
		o.add("ID", a.ID)
		o.add("Status", a.Status)
		o.add("Proposed By", a.From)
		if a.Diff != "" {
			o.add("File", a.File)
			o.add("Diff", a.Diff)
		} else {
			o.add("Section", a.Target)
			o.add("Action", a.Action)
			o.add("Text", a.Text)
		}
		return o
	}
	if len(args) < 2 {
		return fail(exitInvalid, "%s", usage)
	}
	file, mode := args[0], args[1]
	switch mode {
	case "--view":
		if len(args) != 2 {
			return fail(exitInvalid, "%s", usage)
		}
		c, code, msg := s.readFile(file)
		if code != exitOK {
			return fail(code, "%s", msg)
		}
		o := toolOut{message: "Viewing " + cleanPath(file)}
		o.add("File", cleanPath(file))
		o.add("Content", c)
		return o
	case "--propose":
		if len(args) != 3 || strings.TrimSpace(args[2]) == "" {
			return fail(exitInvalid, `Usage: parliament-edit FILE --propose "unified diff".`)
		}
		if s.status != stDebate {
			return fail(exitOutOfOrder, "Out of order: amendments are proposed in debate (session %s).", s.status)
		}
		c, code, msg := s.readFile(file)
		if code != exitOK {
			return fail(code, "%s", msg)
		}
		if _, err := applyDiff(c, args[2]); err != nil {
			return fail(exitInvalid, "The diff does not apply to %s: %v.", cleanPath(file), err)
		}
		id := s.nextAmendmentID(0)
		o := toolOut{message: fmt.Sprintf("Amendment %s created", id), effect: map[string]any{"mode": "propose", "amendment_id": id}}
		o.add("ID", id)
		o.add("File", cleanPath(file))
		o.add("Diff", args[2])
		o.derived = append(o.derived, derived{msg: deliberation.Message{Type: tAmendment, From: speakerID, Content: map[string]any{
			"amendment_id": id, "target_section": "file", "action": "modify", "description": "Change " + cleanPath(file),
			"rationale": "Moved from the Chair.", "proposed_text": args[2], "file": cleanPath(file), "diff": args[2]}}})
		return o
	case "--enact":
		if len(args) != 3 {
			return fail(exitInvalid, `Usage: parliament-edit FILE --enact AMENDMENT_ID.`)
		}
		a := s.amendment(args[2])
		if a == nil {
			return fail(exitNotFound, "Amendment %s not found.", args[2])
		}
		if a.Diff == "" {
			return fail(exitInvalid, "Amendment %s changes the bill's %s section, not a file.", a.ID, a.Target)
		}
		if cleanPath(file) != a.File {
			return fail(exitInvalid, "Amendment %s changes %s, not %s.", a.ID, a.File, cleanPath(file))
		}
		if !a.Passed {
			return fail(exitOutOfOrder, "Out of order: amendment %s has not passed a vote.", a.ID)
		}
		if a.Enacted {
			return fail(exitOutOfOrder, "Out of order: amendment %s is already enacted.", a.ID)
		}
		c, code, msg := s.readFile(file)
		if code != exitOK {
			return fail(code, "%s", msg)
		}
		out, err := applyDiff(c, a.Diff)
		if err != nil {
			return fail(exitOutOfOrder, "Out of order: amendment %s no longer applies to %s: %v.", a.ID, a.File, err)
		}
		o := toolOut{message: fmt.Sprintf("Amendment %s enacted into %s", a.ID, a.File),
			effect: map[string]any{"mode": "enact", "amendment_id": a.ID, "file": a.File},
			write:  map[string]any{"path": a.File, "content": out}}
		o.add("ID", a.ID)
		o.add("File", a.File)
		o.add("Diff", a.Diff)
		return o
	case "--create":
		if len(args) != 3 {
			return fail(exitInvalid, `Usage: parliament-edit FILE --create "content".`)
		}
		if strings.TrimSpace(file) == "" {
			return fail(exitInvalid, "A file name is required.")
		}
		_, code, msg := s.readFile(file)
		switch code {
		case exitOK:
			return fail(exitOutOfOrder, "Out of order: %s already exists.", cleanPath(file))
		case exitNotFound:
		default:
			return fail(code, "%s", msg)
		}
		o := toolOut{message: fmt.Sprintf("File %s created", cleanPath(file)), effect: map[string]any{"mode": "create", "file": cleanPath(file)},
			write: map[string]any{"path": cleanPath(file), "content": args[2]}}
		o.add("Filename", cleanPath(file))
		o.add("Content", args[2])
		return o
	}
	return fail(exitInvalid, "%s", usage)
}

func (s *state) nextAmendmentID(extra int) string {
	return fmt.Sprintf("AMDT-%d", len(s.amendments)+1+extra)
}

var stageNames = map[string]string{
	stSetup: "Setup", stOpening: "Opening Statements", stEvaluating: "Evaluating Statements", stDrafting: "Drafting",
	stDebate: "Committee Stage (debate)", stVoting: "Division (voting)", stPMReview: "Prime Minister's Review",
	stSynthesis: "Synthesis", stComplete: "Adjourned",
}

func (s *state) orderPaper() toolOut {
	o := toolOut{message: "### Current Business"}
	o.add("Stage", stageNames[s.status])
	if s.bill.Version > 0 {
		o.add("Current Bill", fmt.Sprintf("%s v%d: %s (tabled: %v)", s.billID(), s.bill.Version, s.bill.Title, s.bill.Tabled))
	} else {
		o.add("Current Bill", "none")
	}
	motion := s.activeMotion
	if s.vote != nil {
		if s.vote.Subject == subjectBill {
			motion = "That the bill be passed"
		} else {
			motion = "That Amendment " + s.vote.Subject + " be made"
		}
	}
	if motion == "" {
		motion = "none"
	}
	o.add("Active Motion", motion)
	pending := 0
	if s.vote != nil {
		pending = len(s.reps) - len(s.vote.Done)
	}
	o.add("Pending Votes", strconv.Itoa(pending))
	var present []string
	for _, r := range s.reps {
		p := fmt.Sprintf("%d. %s (%s)", r.num, r.Name, r.ID)
		if r.quiet(s.round) {
			p += " [quiet]"
		}
		present = append(present, p)
	}
	o.add("Members Present", strings.Join(present, ", "))
	o.add("Round", fmt.Sprintf("%d of %d", s.round, s.cfg.MaxRounds))
	o.add("Debate Clock", fmt.Sprintf("%d of %d exchanges this round; response budget %d sentences", s.exchanges, maxExchanges(s.round, s.seats()), responseBudget(s.round)))
	if q := s.question; q != nil {
		o.add("Question Pending", fmt.Sprintf("%s asked %s (%s): %s", q.From, q.To, q.MsgID, q.Topic))
	}
	low := s.lowScores()
	if len(low) == 0 {
		o.add("Vote Gate", "open: every motive scores 3 or more")
	} else {
		o.add("Vote Gate", "closed: "+strings.Join(low, ", "))
	}
	var ams []string
	for _, a := range s.amendments {
		d := fmt.Sprintf("%s (%s)", a.ID, a.Status)
		if a.Passed {
			d += " passed"
		}
		if a.Enacted {
			d += " enacted"
		}
		ams = append(ams, d)
	}
	if len(ams) > 0 {
		o.add("Amendments", strings.Join(ams, ", "))
	}
	open := 0
	for _, is := range s.issues {
		if is.Status == "open" {
			open++
		}
	}
	o.add("Open Issues", strconv.Itoa(open))
	return o
}

func (s *state) issue(args []string) toolOut {
	if len(args) == 0 {
		return fail(exitInvalid, `Usage: parliament-issue create "title" ["description"] | close ID | list.`)
	}
	switch args[0] {
	case "create":
		if len(args) < 2 || len(args) > 3 || strings.TrimSpace(args[1]) == "" {
			return fail(exitInvalid, `Usage: parliament-issue create "title" ["description"].`)
		}
		desc := ""
		if len(args) == 3 {
			desc = args[2]
		}
		id := fmt.Sprintf("ISSUE-%d", len(s.issues)+1)
		o := toolOut{message: fmt.Sprintf("Issue %s created", id), effect: map[string]any{"action": "create", "id": id, "title": oneLine(args[1]), "description": desc}}
		o.add("ID", id)
		o.add("Title", oneLine(args[1]))
		o.add("Status", "open")
		return o
	case "close":
		if len(args) != 2 {
			return fail(exitInvalid, "Usage: parliament-issue close ID.")
		}
		var is *issue
		for _, x := range s.issues {
			if strings.EqualFold(x.ID, args[1]) {
				is = x
			}
		}
		if is == nil {
			return fail(exitNotFound, "Issue %s not found.", args[1])
		}
		if is.Status == "closed" {
			return fail(exitOutOfOrder, "Out of order: issue %s is already closed.", is.ID)
		}
		if !s.billPassed {
			return fail(exitOutOfOrder, "Out of order: issue %s closes once the bill has passed the House.", is.ID)
		}
		o := toolOut{message: fmt.Sprintf("Issue %s closed", is.ID), effect: map[string]any{"action": "close", "id": is.ID}}
		o.add("ID", is.ID)
		o.add("Title", is.Title)
		o.add("Status", "closed")
		return o
	case "list":
		o := toolOut{message: "Open issues"}
		for _, is := range s.issues {
			if is.Status == "open" {
				o.add(is.ID, is.Title)
			}
		}
		if len(o.data) == 0 {
			o.message = "No open issues"
		}
		return o
	}
	return fail(exitInvalid, "Invalid action %q: create, close or list.", args[0])
}

func (s *state) adjourn(args []string) toolOut {
	reason := strings.TrimSpace(strings.Join(args, " "))
	if reason == "" {
		reason = "Business concluded"
	}
	o := toolOut{message: "House adjourned", effect: map[string]any{"reason": reason}}
	o.add("Reason", reason)
	o.add("Timestamp", s.clock())
	return o
}

// rule issues one of seed 000's Speaker rulings.
func (s *state) rule(args []string) toolOut {
	usage := `Usage: parliament-rule redirect|quiet|next_speaker MEMBER "text" | call_vote|deadlock_warning|progress_note|round_end "text".`
	if len(args) == 0 {
		return fail(exitInvalid, "%s", usage)
	}
	action := args[0]
	switch action {
	case "redirect", "quiet", "next_speaker":
		if len(args) != 3 || strings.TrimSpace(args[2]) == "" {
			return fail(exitInvalid, "%s", usage)
		}
		r, o, ok := s.memberArg(args[1])
		if !ok {
			return o
		}
		if s.status != stDebate && s.status != stVoting {
			return fail(exitOutOfOrder, "Out of order: %s is a debate ruling (session %s).", action, s.status)
		}
		if action == "quiet" {
			if s.status != stDebate {
				return fail(exitOutOfOrder, "Out of order: members are quieted in debate.")
			}
			if q := s.question; q != nil && q.To == r.ID {
				return fail(exitOutOfOrder, "Out of order: %s must first answer %s.", r.ID, q.MsgID)
			}
		}
		out := toolOut{message: fmt.Sprintf("Ruling: %s %s", action, r.ID), effect: map[string]any{"action": action, "target": r.ID}}
		out.add("Action", action)
		out.add("Target", r.ID)
		out.add("Ruling", oneLine(args[2]))
		if action == "quiet" {
			out.add("Quiet Until Round", strconv.Itoa(s.round+1))
		}
		out.derived = append(out.derived, derived{msg: ruling(rulingTypes[action], action, oneLine(args[2]), r.ID, nil)})
		return out
	case "call_vote", "deadlock_warning", "progress_note", "round_end":
		if len(args) != 2 || strings.TrimSpace(args[1]) == "" {
			return fail(exitInvalid, "%s", usage)
		}
	case "round_start":
		return fail(exitOutOfOrder, "Out of order: the Clerk opens rounds (tabling the bill, ending a round).")
	default:
		return fail(exitInvalid, "Invalid ruling %q. %s", action, usage)
	}
	text := oneLine(args[1])
	out := toolOut{message: "Ruling: " + action, effect: map[string]any{"action": action}}
	out.add("Action", action)
	out.add("Ruling", text)
	switch action {
	case "call_vote":
		if s.status != stDebate || s.question != nil {
			return fail(exitOutOfOrder, "Out of order: the vote is called in debate with no question pending (session %s).", s.status)
		}
		forced := ""
		if low := s.lowScores(); len(low) > 0 {
			forced = s.forcedBy()
			if forced == "" {
				return fail(exitOutOfOrder, "Out of order: no vote while a motive scores below 3 (%s); the clock forces a vote once %d exchanges are spent this round, the round limit in round %d.",
					strings.Join(low, ", "), maxExchanges(s.round, s.seats()), s.cfg.MaxRounds)
			}
			out.add("Forced By", forced)
		}
		out.derived = append(out.derived, derived{msg: ruling("order", "call_vote", text, "", map[string]any{"subject": subjectBill, "forced": forced})})
	case "round_end":
		if s.status != stDebate || s.question != nil {
			return fail(exitOutOfOrder, "Out of order: a round ends in debate with no question pending (session %s).", s.status)
		}
		if s.round >= s.cfg.MaxRounds {
			return fail(exitOutOfOrder, "Out of order: round %d is the last (round limit): call the vote.", s.round)
		}
		out.derived = append(out.derived, s.newRound(text)...)
	default:
		if s.status == stSetup {
			return fail(exitOutOfOrder, "Out of order: the House is not yet in session.")
		}
		out.derived = append(out.derived, derived{msg: ruling("observation", action, text, "", nil)})
	}
	return out
}
