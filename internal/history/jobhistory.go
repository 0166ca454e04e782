package history

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/jsonindent"
	"github.com/logist/logist/internal/regfile"
)

// JobHistoryVersion is the version of jobHistory.json this Logist writes
// (JobHistory.FormatVersion). Version 1 (no format_version field) listed
// steward commands among the interactions, as role Steward with an empty
// raw_response, each taking an interaction number; version 2 lists them
// in events only, so interactions are agent calls alone, numbered without
// gaps, each with the answer a replay checks.
const JobHistoryVersion = 2

// JobHistory is seed 002's jobHistory.json.
type JobHistory struct {
	FormatVersion int `json:"format_version"`
	// HistorySeq and HistoryHash name the newest history record the view
	// reflects (0 and GenesisHash for an empty history): a reader tells a
	// stale view from a current one by comparing them with the history's
	// head (JobHistoryCurrent). They come first, so that the check reads
	// only the file's start. Only the file has them: `logist history
	// --format json`, built from the log as it is, leaves them out.
	HistorySeq     int64           `json:"history_seq,omitempty"`
	HistoryHash    string          `json:"history_hash,omitempty"`
	JobID          string          `json:"job_id"`
	CreatedAt      string          `json:"created_at"`
	Interactions   []Interaction   `json:"interactions"`
	RecoveryPoints []RecoveryPoint `json:"recovery_points"`
	Events         []Event         `json:"events"`
	// ProtocolEvents are the workflow protocol's events (seed 003), for
	// jobs whose workflow records them.
	ProtocolEvents []ProtocolEntry `json:"protocol_events,omitempty"`
}

// ProtocolEntry is a protocol event with where it sits in the history.
type ProtocolEntry struct {
	Sequence  int64  `json:"sequence"`
	Timestamp string `json:"timestamp"`
	Phase     string `json:"phase,omitempty"`
	ProtocolEvent
}

// Interaction pairs an agent's request with its response (nil while in
// flight or when the call was interrupted). Steward commands are events,
// not interactions.
type Interaction struct {
	Sequence      int       `json:"sequence"`
	Timestamp     string    `json:"timestamp"`
	StateBefore   string    `json:"state_before"`
	WorkspacePath string    `json:"workspace_path"`
	Phase         string    `json:"phase,omitempty"`
	Role          string    `json:"role"`
	Attempt       int       `json:"attempt,omitempty"`
	Request       Request   `json:"request"`
	Response      *Response `json:"response"`
}

// Event is a transition, steward command or error, in order.
type Event struct {
	Seq        int64       `json:"seq"`
	Timestamp  string      `json:"timestamp"`
	Type       string      `json:"type"`
	Transition *Transition `json:"transition,omitempty"`
	Steward    *Steward    `json:"steward,omitempty"`
	Error      *ErrorInfo  `json:"error,omitempty"`
	// StateBefore is the job's status when a steward's command came.
	StateBefore string `json:"state_before,omitempty"`
	Role        string `json:"role,omitempty"`
	Phase       string `json:"phase,omitempty"`
}

// Materialise builds jobHistory.json's content from records.
func Materialise(jobID, createdAt, workspace string, recs []Record) *JobHistory {
	h := &JobHistory{FormatVersion: JobHistoryVersion, JobID: jobID, CreatedAt: createdAt,
		Interactions: []Interaction{}, RecoveryPoints: []RecoveryPoint{}, Events: []Event{}}
	open := map[int]int{} // interaction number -> index in h.Interactions
	for _, r := range recs {
		switch r.Type {
		case TypeIntent:
			if r.Interaction == nil {
				continue
			}
			in := Interaction{Sequence: *r.Interaction, Timestamp: r.Time, StateBefore: r.StateBefore, WorkspacePath: workspace,
				Phase: r.Phase, Role: r.Role, Attempt: r.Attempt}
			if r.Request != nil {
				in.Request = *r.Request
				if r.Request.WorkspacePath != "" {
					in.WorkspacePath = r.Request.WorkspacePath
				}
			}
			if i, ok := open[in.Sequence]; ok {
				// Re-attempt of the same turn after an interruption.
				h.Interactions[i] = in
			} else {
				open[in.Sequence] = len(h.Interactions)
				h.Interactions = append(h.Interactions, in)
			}
		case TypeResponse:
			if r.Interaction == nil || r.Response == nil {
				continue
			}
			if i, ok := open[*r.Interaction]; ok {
				resp := *r.Response
				h.Interactions[i].Response = &resp
			}
		case TypeEvent:
			if r.Event != nil {
				h.ProtocolEvents = append(h.ProtocolEvents, ProtocolEntry{Sequence: r.Seq, Timestamp: r.Time, Phase: r.Phase, ProtocolEvent: *r.Event})
			}
		case TypeRecoveryPoint:
			if r.RecoveryPoint == nil {
				continue
			}
			rp := *r.RecoveryPoint
			rp.EvidenceFiles = rp.Evidence() // a list, for old points too
			// Points recorded before the rule was applied when writing
			// them (the end of the job said it could be resumed from).
			rp.CanResumeFrom = rp.CanResumeFrom && rp.Restorable() == nil
			h.RecoveryPoints = append(h.RecoveryPoints, rp)
		case TypeSteward:
			// A command, not an agent's answer: an event, so that every
			// interaction has a raw_response to replay (seed 002).
			if r.Steward == nil {
				continue
			}
			h.Events = append(h.Events, Event{Seq: r.Seq, Timestamp: r.Time, Type: r.Type, Steward: r.Steward,
				StateBefore: r.StateBefore, Role: r.Role, Phase: r.Phase})
		case TypeTransition, TypeError:
			h.Events = append(h.Events, Event{Seq: r.Seq, Timestamp: r.Time, Type: r.Type, Transition: r.Transition, Error: r.Error, Role: r.Role, Phase: r.Phase})
		}
	}
	return h
}

// WriteJobHistory materialises jobHistory.json in dir atomically.
//
// Nothing about it is fsync'd (atomicfile.WriteCopy): the file is a view
// derived from history.jsonl, which is durable on its own; nothing is
// acknowledged on the strength of the view. A crash may leave the previous
// view, none, or (a machine crash, on some file systems) an empty or torn
// file. The view says which record it reflects (HistorySeq, HistoryHash),
// so whoever finds it missing, torn or stale rebuilds it from the history
// (EnsureJobHistory: the daemon at start for every job that is not
// running, and every job's next stop). That saves two fsyncs each time a
// job stops running: the file's and its folder's.
func WriteJobHistory(dir, jobID, createdAt, workspace string) error {
	es, err := ReadEntries(dir)
	if err != nil {
		return err
	}
	recs, hash := make([]Record, len(es)), GenesisHash
	for i := range es {
		recs[i] = es[i].Record
	}
	if len(es) > 0 {
		hash = es[len(es)-1].Hash
	}
	return WriteJobHistoryOf(dir, jobID, createdAt, workspace, recs, hash)
}

// WriteJobHistoryOf is WriteJobHistory from recs, the whole history (see
// Log.Records), without reading it again; lastHash is the hash of its
// newest record (Log.LastHash).
func WriteJobHistoryOf(dir, jobID, createdAt, workspace string, recs []Record, lastHash string) error {
	h := Materialise(jobID, createdAt, workspace, recs)
	h.HistoryHash = GenesisHash
	if len(recs) > 0 {
		h.HistorySeq, h.HistoryHash = recs[len(recs)-1].Seq, lastHash
	}
	b, err := jsonindent.Marshal(h, "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteCopy(filepath.Join(dir, JobHistoryFile), append(b, '\n'), 0o600, nil)
}

// viewHead finds the view's HistorySeq and HistoryHash in its first bytes
// (MarshalIndent's layout, which WriteJobHistoryOf writes).
// history_seq is left out at 0 (an empty history, or one record).
var viewHead = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\{\s*"format_version": \d+,\s*(?:"history_seq": (\d+),\s*)?"history_hash": "([0-9a-f]{64})"`)
})

// viewEnd is how a whole view ends: the top-level object's closing brace,
// alone on the last line (inner ones are indented).
var viewEnd = []byte("\n}\n")

// JobHistoryCurrent reports whether the job folder dir's jobHistory.json
// is whole and reflects its history up to the history's head (the signed
// head beside the log: a few hundred bytes read, not the history). A view
// past the head is current (the head may lag the log by an append after a
// crash; the view was built from the log). A history without a head (older
// than heads) is read whole for its last record.
func JobHistoryCurrent(dir string) (bool, error) {
	f, err := regfile.OpenRegular(filepath.Join(dir, JobHistoryFile))
	if err != nil {
		// None, or not a regular file: a rebuild replaces it.
		return false, nil
	}
	defer func() { _ = f.Close() }() // read only
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	n := fi.Size()
	if n < int64(len(viewEnd)) {
		return false, nil
	}
	start := make([]byte, min(n, 512))
	if _, err := f.ReadAt(start, 0); err != nil {
		return false, err
	}
	end := make([]byte, len(viewEnd))
	if _, err := f.ReadAt(end, n-int64(len(end))); err != nil {
		return false, err
	}
	m := viewHead().FindSubmatch(start)
	if m == nil || !bytes.Equal(end, viewEnd) {
		return false, nil // torn, or older than HistorySeq
	}
	seq := int64(0)
	if len(m[1]) > 0 {
		if seq, err = strconv.ParseInt(string(m[1]), 10, 64); err != nil {
			return false, nil
		}
	}
	h, err := ReadHead(dir)
	if err != nil {
		return false, err
	}
	lastSeq, lastHash := int64(0), GenesisHash
	if h != nil {
		lastSeq, lastHash = h.Seq, h.Hash
	} else {
		es, err := ReadEntries(dir)
		if err != nil {
			return false, err
		}
		if len(es) > 0 {
			lastSeq, lastHash = es[len(es)-1].Seq, es[len(es)-1].Hash
		}
	}
	return seq > lastSeq || (seq == lastSeq && string(m[2]) == lastHash), nil
}

// EnsureJobHistory rebuilds dir's jobHistory.json from the history when
// it is missing, torn or stale (JobHistoryCurrent), and reports whether it
// did. A folder with no history and no view is left alone.
func EnsureJobHistory(dir, jobID, createdAt, workspace string) (bool, error) {
	ok, err := JobHistoryCurrent(dir)
	if err != nil || ok {
		return false, err
	}
	if _, err := os.Lstat(Path(dir)); errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Lstat(filepath.Join(dir, JobHistoryFile)); errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
	}
	return true, WriteJobHistory(dir, jobID, createdAt, workspace)
}
