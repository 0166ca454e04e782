package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
)

// Two numberings, one name each: an interaction is one request to an agent
// and its answer (the INTERACTION column, jobHistory.json's sequence); a
// record is one line of the history (history.jsonl's seq, the #N of logist
// logs), which --record shows whole.
var cmdHistory = &command{
	name: "history", args: "JOB [--record N] [--last N]",
	summary: "show a job's interactions, steward actions, recovery points and errors; --record N: history record N whole (--format json: jobHistory.json)",
	example: "  logist history fix-login\n" +
		"  logist history fix-login --record 12      # record #12, as logist logs numbers them\n" +
		"  logist history fix-login --last 20        # the last 20 interactions and what came after them\n" +
		"  logist history fix-login --last 0         # every interaction (text output shows the last 50 unless told)\n" +
		"  logist history fix-login --format json > jobHistory.json\n",
	flags: func(fs *pflag.FlagSet) {
		fs.Int64("record", 0, "show only history record N (the #N of logist logs; found through the archive index, decompressing at most one archive)")
		fs.Int("last", 0, fmt.Sprintf("show only the last N interactions and the records after them (reads the end of the history only; 0: all; default: the last %d in text output, all with --format json)", historyPage))
		fs.Int64("seq", 0, "old name of --record")
		_ = fs.MarkDeprecated("seq", "use --record") // fails only for a flag not defined; it is, above
	},
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		for _, f := range []string{"record", "seq"} {
			if n, _ := e.fs.GetInt64(f); n < 0 {
				// Not a record that is missing: no record has such a number.
				return nil, usagef("--%s %d: a record number is 0 or more (the #N of logist logs)", f, n)
			}
		}
		dir, err := e.jobDir(id)
		if err != nil {
			return nil, err
		}
		if e.fs.Changed("record") || e.fs.Changed("seq") {
			seq, _ := e.fs.GetInt64("record")
			if e.fs.Changed("seq") {
				if e.fs.Changed("record") {
					return nil, usagef("--seq is the old name of --record: give one")
				}
				seq, _ = e.fs.GetInt64("seq")
				fmt.Fprintln(e.stderr, "logist: --seq is deprecated; use --record (the same record number)")
			}
			en, err := history.ReadSeq(dir, seq)
			if err != nil {
				if errors.Is(err, history.ErrNoRecord) {
					return nil, fmt.Errorf("job %s: %v: %w", id, err, jobstore.ErrNotFound)
				}
				return nil, err
			}
			if reveal := e.revealer(id); reveal != nil {
				reveal(&en.Record)
			}
			b, _ := json.MarshalIndent(en.Record, "", "  ")
			return &Result{Text: string(b) + "\n", Message: fmt.Sprintf("Record %d of job %s", seq, id),
				Fields: []Field{{"record", "Record", string(b)}}, Data: map[string]any{"record": en.Record}}, nil
		}
		last, _ := e.fs.GetInt("last")
		if !e.fs.Changed("last") && e.format == "text" {
			last = historyPage
		}
		if last < 0 {
			return nil, usagef("--last takes a number of interactions, 0 for all")
		}
		recs, whole, err := readHistory(dir, last)
		if err != nil {
			return nil, err
		}
		if reveal := e.revealer(id); reveal != nil {
			for i := range recs {
				reveal(&recs[i])
			}
		}
		created := ""
		if m, err := e.store.Load(id); err == nil {
			created = m.CreatedAt
		}
		h := history.Materialise(id, created, e.store.Workspace(id), recs)
		r := &Result{Document: h, Message: counted(len(h.Interactions), "interaction") + ", " + counted(len(h.RecoveryPoints), "recovery point"),
			Columns: historyColumns, Rows: historyRows(h, recs)}
		cmds := 0
		for _, ev := range h.Events {
			if ev.Steward != nil {
				cmds++
			}
		}
		if cmds > 0 {
			r.Message += ", " + counted(cmds, "steward command")
		}
		if len(h.ProtocolEvents) > 0 {
			r.Message += ", " + counted(len(h.ProtocolEvents), "protocol event")
		}
		if !whole {
			r.Message += " (the last " + counted(last, "interaction") + " and what followed: --last 0 shows all)"
		}
		msgs, errs := 0, 0
		for _, row := range r.Rows {
			switch row[0] {
			case "msg":
				msgs++
			case "err":
				errs++
			}
		}
		if msgs > 0 {
			r.Message += ", " + counted(msgs, "ledger message")
		}
		if errs > 0 {
			r.Message += ", " + counted(errs, "error")
		}
		return r, nil
	},
}

// counted is n of a noun for logist history's summary line: "1 error",
// "0 errors", "2 errors" (noun is the singular; each of the line's nouns
// takes an s).
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// historyColumns are logist history's table's columns. PHASE is the phase
// a row happened in: for a recovery point, the phase it was made in (the
// phase whose end it marks); the phase it resumes at is in its note.
var historyColumns = []string{"INTERACTION", "TIME", "ROLE", "PHASE", "STATUS", "ACTION", "COST", "SECONDS", "SUMMARY / ERROR"}

// historyRows are the table's rows in the order of the history (recs, in
// record order; h is their jobHistory.json): each interaction where its
// request was made (its last attempt's, whose time it shows), each steward
// command, recovery point, protocol event, ledger message and error record
// where it was recorded. So the table reads in time order, and a page (--last N) is the
// end of it.
func historyRows(h *history.JobHistory, recs []history.Record) [][]string {
	// The record that makes each interaction's row: its last intent.
	at := make(map[int]int, len(h.Interactions)) // interaction number -> index in recs
	for i, rec := range recs {
		if rec.Type == history.TypeIntent && rec.Interaction != nil {
			at[*rec.Interaction] = i
		}
	}
	interaction := make(map[int]*history.Interaction, len(h.Interactions))
	for i := range h.Interactions {
		interaction[h.Interactions[i].Sequence] = &h.Interactions[i]
	}
	sentBack := sentBackReasons(recs)
	var rows [][]string
	for i := range recs {
		rec := &recs[i]
		switch rec.Type {
		case history.TypeIntent:
			if rec.Interaction == nil || at[*rec.Interaction] != i || interaction[*rec.Interaction] == nil {
				continue
			}
			rows = append(rows, interactionRow(interaction[*rec.Interaction], sentBack))
		case history.TypeSteward:
			if st := rec.Steward; st != nil {
				note := st.Reason
				if st.Guidance != "" {
					note = "guidance: " + st.Guidance
				}
				rows = append(rows, []string{"cmd", shortTime(rec.Time), "Steward", orDash(rec.Phase), "STEWARD", stewardAction(st), "", "", oneLine(note, 80)})
			}
		case history.TypeEvent:
			if ev := rec.Event; ev != nil {
				what := ev.Subject
				if what == "" {
					what = "-"
				}
				if ev.Sig != "" {
					what += " (signed " + ev.KeyID + ")"
				}
				rows = append(rows, []string{"ev", shortTime(rec.Time), ev.Role, orDash(rec.Phase), "EVENT", ev.Type, "", "", oneLine(what, 80)})
			}
		case history.TypeMessage:
			if row := messageRow(rec); row != nil {
				rows = append(rows, row)
			}
		case history.TypeRecoveryPoint:
			if cp := rec.RecoveryPoint; cp != nil {
				rows = append(rows, []string{"cp", shortTime(rec.Time), "", orDash(rec.Phase), "CHECKPOINT", cp.CheckpointID, "", "", pointNote(cp)})
			}
		case history.TypeError:
			// Recorded after the intent of the call it is about (a call
			// cut by a stop, the egress it was refused), so it is on that
			// call's page. Its message may hold agent text (a hostname);
			// cut at 160 characters as logist logs cuts it.
			if e := rec.Error; e != nil {
				rows = append(rows, []string{"err", shortTime(rec.Time), orDash(rec.Role), orDash(rec.Phase), "ERROR", oneLine(e.Code, 40), "", "", oneLine(e.Message, 160)})
			}
		}
	}
	return rows
}

// interactionRow is an agent call's row: its answer, or IN FLIGHT and its
// prompt while it has none.
func interactionRow(in *history.Interaction, sentBack map[int]string) []string {
	rs := in.Response
	if rs == nil {
		return []string{fmt.Sprint(in.Sequence), shortTime(in.Timestamp), in.Role, orDash(in.Phase), "IN FLIGHT", "-", "-", "-", oneLine(in.Request.Prompt, 60)}
	}
	note, action := rs.Summary, orDash(rs.Action)
	if rs.ErrorCode != "" {
		note = rs.ErrorCode + ": " + rs.Error
	}
	if rs.Outcome != "" {
		// What the phase's effect made of the answer, and why it sent
		// the work back (a guard's message).
		action += "→" + rs.Outcome
		if why := sentBack[in.Sequence]; rs.SentBack && why != "" {
			note = why
		}
	}
	return []string{fmt.Sprint(in.Sequence), shortTime(in.Timestamp), in.Role, orDash(in.Phase), rs.Status, action,
		usd(rs.CostUSD), fmt.Sprintf("%.2f", rs.ExecutionTimeSeconds), oneLine(note, 80)}
}

// stewardAction is a steward command's ACTION cell: the command, and for
// a rollback the checkpoint it returned to.
func stewardAction(st *history.Steward) string {
	if cp, _ := st.Changes["checkpoint_id"].(string); st.Command == history.CommandRollback && cp != "" {
		return st.Command + " → " + oneLine(cp, 60)
	}
	return st.Command
}

// pointNote is a recovery point's note: its commit in a git workspace,
// the phase a rollback to it resumes at (or that the job ended there), and
// its description.
func pointNote(cp *history.RecoveryPoint) string {
	note := "resumes at " + cp.ResumePhase + "; " + cp.Description
	if cp.ResumePhase == "" {
		note = "the job ended here; " + cp.Description
	}
	if cp.Git != nil && len(cp.Git.Commit) >= 12 {
		// In a git workspace: the point's commit on the job branch.
		note = "[" + cp.Git.Commit[:12] + "] " + note
	}
	return oneLine(note, 100)
}

// messageRow is a deliberation's ledger message's row (nil if the record
// holds none).
func messageRow(rec *history.Record) []string {
	var m struct {
		ID       string         `json:"id"`
		Type     string         `json:"type"`
		From     string         `json:"from"`
		Content  map[string]any `json:"content"`
		Audience []string       `json:"audience"`
	}
	if json.Unmarshal(rec.Message, &m) != nil {
		return nil
	}
	note, _ := m.Content["text"].(string)
	if note == "" {
		b, _ := json.Marshal(m.Content)
		note = string(b)
	}
	if len(m.Audience) > 0 {
		note = fmt.Sprintf("(private to %s) %s", strings.Join(m.Audience, ", "), note)
	}
	return []string{"msg", shortTime(rec.Time), m.From, orDash(rec.Phase), m.Type, m.ID, "", "", oneLine(note, 80)}
}

// sentBackReasons maps each interaction whose answer sent the work back
// to the reason of the transition that did (workflow.Decide's: the
// effect's outcome and feedback, such as a guard's message).
func sentBackReasons(recs []history.Record) map[int]string {
	out := map[int]string{}
	last := -1 // the interaction of the response just read
	for i := range recs {
		r := &recs[i]
		switch {
		case r.Type == history.TypeResponse && r.Interaction != nil && r.Response != nil && r.Response.SentBack:
			last = *r.Interaction
		case r.Type == history.TypeTransition && r.Transition != nil && last >= 0:
			out[last] = r.Transition.Reason
			last = -1
		case r.Type == history.TypeIntent || r.Type == history.TypeResponse:
			last = -1
		}
	}
	return out
}

// historyPage is how many interactions `logist history` shows in text
// output when not told (--last): its first page, read from the end of the
// history, costs the same at any length (issue 21's goal 4). A document
// (--format json, jobHistory.json) is whole unless --last says otherwise.
const historyPage = 50

// readHistory reads the whole history of the job in dir (last 0), or its
// end from the last-th newest interaction on; whole says it is all of it.
func readHistory(dir string, last int) (recs []history.Record, whole bool, err error) {
	if last == 0 {
		recs, err = history.ReadAll(dir)
		return recs, true, err
	}
	return history.ReadLast(dir, last)
}

func shortTime(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}
