package cli

import (
	"bufio"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/textsafe"
	"github.com/logist/logist/internal/verify"
)

// Results of logist verify --all, a job's word (text) and "result" (json).
const (
	resultIntact     = "intact"
	resultFailed     = "failed"
	resultUnreadable = "unreadable"
)

// verifyItem is one job's item in logist verify --all --format json: its
// result, why it could not be read, and its report (as logist verify
// JOB's item; none for a job not verified).
type verifyItem struct {
	JobID  string `json:"job_id"`
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
	*verify.Report
}

// verifyCounts is the summary of logist verify --all.
type verifyCounts struct {
	Jobs       int `json:"jobs"`
	Intact     int `json:"intact"`
	Failed     int `json:"failed"`
	Unreadable int `json:"unreadable"`
}

// verifyAll verifies every job folder of the jobs folder
// (jobstore.EachJob: the folders logist list shows), one at a time, and
// prints each job's result as soon as it has it: a line in text, an item
// in json (the envelope written as it goes: "items" first, then the
// summary, "ok" and any "error"). Only names are held across jobs, so
// memory stays that of the largest history however many jobs there are.
// A job that cannot be read is printed and counted, and the walk goes
// on. The error, if any failed or could not be read, is a verifyFailed
// (logist verify JOB's exit code), printed already.
func verifyAll(e *env, keys []ed25519.PublicKey) error {
	if err := e.store.CheckDir(); err != nil {
		return err
	}
	w := bufio.NewWriterSize(e.stdout, 16<<10)
	p := &verifyPrinter{w: w, json: e.format == "json"}
	opener := e.opener() // one content key for the walk
	var n verifyCounts
	err := e.store.EachJob(func(en *jobstore.Entry) error {
		if err := e.ctx.Err(); err != nil {
			return err
		}
		it := verifyEntry(e, en, keys, opener.Reveal(en.ID))
		n.Jobs++
		switch it.Result {
		case resultIntact:
			n.Intact++
		case resultFailed:
			n.Failed++
		default:
			n.Unreadable++
		}
		p.item(it)
		// A line per job as it is verified: an operator watching a walk of
		// 50,000 jobs sees it move (a write per job is nothing beside
		// reading and replaying its history).
		return w.Flush()
	})
	if err != nil && (!p.json || p.items == 0) {
		// The folder could not be listed, or the walk was stopped: the
		// lines printed stand, and Main prints why (text: on stderr; json:
		// its envelope, nothing of this one printed yet).
		_ = w.Flush() // output: no exit code of its own (seed 001)
		return err
	}
	failed := err // json: the walk stopped, its envelope closed with why
	if failed == nil && n.Failed+n.Unreadable > 0 {
		failed = &verifyFailed{n: n.Failed, unread: n.Unreadable}
	}
	p.end(e.store.Dir, n, failed)
	_ = w.Flush() // see above
	if failed != nil {
		return &printed{failed}
	}
	return nil
}

// verifyEntry verifies one job of the walk. A manifest this user may not
// read, or a folder whose name is no job id, is not verified (it could
// not be read as a job); an invalid manifest replays with the default
// workflow, as logist verify JOB does; a history whose files could not be
// read at all (verify.Report.Unreadable) is unreadable, not failed.
func verifyEntry(e *env, en *jobstore.Entry, keys []ed25519.PublicKey, reveal func(*history.Record)) verifyItem {
	it := verifyItem{JobID: en.ID}
	if en.Err != nil && (jobview.LoadStatus(en.Err) == jobview.StatusUnreadable || manifest.ValidID(en.ID) != nil) {
		it.Result, it.Error = resultUnreadable, jobview.InvalidNote(e.store.Dir, *en)
		return it
	}
	rep, err := verify.Job(en.ID, en.Dir, verifyOptions(keys, en.Manifest, reveal))
	switch {
	case err != nil:
		it.Result, it.Error = resultUnreadable, "could not be read: "+inJob(en.Dir, err)
	case rep.Unreadable():
		it.Result, it.Error, it.Report = resultUnreadable, "could not be read: "+inJob(en.Dir, rep.ReadErr), rep
	case rep.OK():
		it.Result, it.Report = resultIntact, rep
	default:
		it.Result, it.Report = resultFailed, rep
	}
	return it
}

// inJob is err's message with the job's folder, which the line names
// already, cut from its paths, and what to do when it was refused.
func inJob(dir string, err error) string {
	s := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
	if errors.Is(err, fs.ErrPermission) {
		s += " (run logist as the user that runs logistd)"
	}
	return s
}

// verifyPrinter prints logist verify --all as it goes.
type verifyPrinter struct {
	w     *bufio.Writer
	json  bool
	items int
}

// item prints one job: in text its result, its id and what verify found,
// on one line (agent text, paths and ids neutralised: textsafe.Line).
func (p *verifyPrinter) item(it verifyItem) {
	if p.json {
		sep := ",\n    "
		if p.items == 0 {
			sep = "{\n  \"items\": [\n    " // the envelope, opened at its first item
		}
		p.items++
		p.writeJSON(sep, it, "    ")
		return
	}
	word, detail := strings.ToUpper(it.Result), it.Error
	switch it.Result {
	case resultIntact:
		word, detail = "OK", fmt.Sprintf("%d records; %s", it.Records, intactText(it.Report))
	case resultFailed:
		detail = fmt.Sprintf("%d records; %s", it.Records, it.FirstBad())
		if len(it.Problems) > 1 {
			detail += fmt.Sprintf(" (%d problems in all: logist verify %s lists them)", len(it.Problems), it.JobID)
		}
	}
	fmt.Fprintf(p.w, "%-10s  %s  %s\n", word, textsafe.Line(it.JobID), textsafe.Line(detail))
}

// end prints the count and, in json, closes the envelope with "ok" and
// failed's error (nil: none).
func (p *verifyPrinter) end(dir string, n verifyCounts, failed error) {
	msg := fmt.Sprintf("%d jobs in %s: %d verified intact, %d failed verification, %d could not be read",
		n.Jobs, dir, n.Intact, n.Failed, n.Unreadable)
	if !p.json {
		fmt.Fprintln(p.w, textsafe.Line(msg))
		return
	}
	closing := "\n  ],"
	if p.items == 0 {
		closing = "{\n  \"items\": [],"
	}
	_, _ = io.WriteString(p.w, closing) // output: see verifyAll
	p.writeJSON("\n  \"summary\": ", n, "  ")
	p.writeJSON(",\n  \"message\": ", msg, "  ")
	p.writeJSON(",\n  \"ok\": ", failed == nil, "  ")
	if failed != nil {
		p.writeJSON(",\n  \"error\": ", jobview.ErrorBody(failed), "  ")
	}
	_, _ = io.WriteString(p.w, "\n}\n")
}

// writeJSON writes lead and v, indented at prefix as writeJSON indents a
// whole document, with the runes a terminal acts on escaped.
func (p *verifyPrinter) writeJSON(lead string, v any, prefix string) {
	b, err := json.MarshalIndent(v, prefix, "  ")
	if err != nil {
		b, _ = json.Marshal(err.Error()) // a string: never fails
	}
	_, _ = io.WriteString(p.w, lead)         // output: see verifyAll
	_, _ = p.w.Write(textsafe.EscapeJSON(b)) // see above
}
