package history

import (
	"encoding/json"
	"path/filepath"

	"github.com/logist/logist/internal/atomicfile"
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
	FormatVersion  int             `json:"format_version"`
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
// Its folder is not fsync'd (atomicfile.WriteView): the file is a view
// derived from history.jsonl, which is durable on its own and from which
// logist history --format json rebuilds it; nothing is acknowledged on the
// strength of the view. A power loss may leave the previous view (or none)
// in place, never a torn one, and the job's next stop rewrites it. That
// saves a folder fsync each time a job stops running.
func WriteJobHistory(dir, jobID, createdAt, workspace string) error {
	recs, err := ReadAll(dir)
	if err != nil {
		return err
	}
	return WriteJobHistoryOf(dir, jobID, createdAt, workspace, recs)
}

// WriteJobHistoryOf is WriteJobHistory from recs, the whole history (see
// Log.Records), without reading it again.
func WriteJobHistoryOf(dir, jobID, createdAt, workspace string, recs []Record) error {
	b, err := json.MarshalIndent(Materialise(jobID, createdAt, workspace, recs), "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteView(filepath.Join(dir, JobHistoryFile), append(b, '\n'), 0o600)
}
