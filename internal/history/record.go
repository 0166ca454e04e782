package history

import (
	"encoding/json"
	"fmt"
)

// RecordVersion is the version of the record format this Logist writes.
// Version 1 (Logist's first release) wrote bare records, one per line;
// version 2 wraps each in a hash-chained, signed envelope. Version 1 lines
// are migrated on read: they keep their content but carry no protection.
const RecordVersion = 2

// GenesisHash is the predecessor of a history's first chained record.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Record types. Each is appended once and never rewritten.
const (
	TypeIntent        = "intent"         // a request, written before the agent is called
	TypeResponse      = "response"       // the outcome of that call
	TypeTransition    = "transition"     // a status or phase change
	TypeSteward       = "steward"        // a steward command
	TypeRecoveryPoint = "recovery_point" // a safe phase boundary
	TypeError         = "error"          // an error event that is not a response (interruption, ...)
	TypeEvent         = "event"          // a workflow protocol event (seed 003), signed by the role that emits it
	TypeMessage       = "message"        // a deliberation ledger message (seeds 000, 004), as committed
	TypeCommit        = "commit"         // a manifest change with no record of its own (Commit)
)

// Record is one line of history.jsonl.
type Record struct {
	V           int    `json:"v"`
	Seq         int64  `json:"seq"`
	PrevHash    string `json:"prev_hash,omitempty"`
	Type        string `json:"type"`
	Time        string `json:"ts"`
	Interaction *int   `json:"interaction,omitempty"`
	Phase       string `json:"phase,omitempty"`
	Role        string `json:"role,omitempty"`
	Attempt     int    `json:"attempt,omitempty"`
	StateBefore string `json:"state_before,omitempty"`

	Request       *Request       `json:"request,omitempty"`
	Response      *Response      `json:"response,omitempty"`
	Transition    *Transition    `json:"transition,omitempty"`
	Steward       *Steward       `json:"steward,omitempty"`
	RecoveryPoint *RecoveryPoint `json:"recovery_point,omitempty"`
	Error         *ErrorInfo     `json:"error,omitempty"`
	Event         *ProtocolEvent `json:"event,omitempty"`
	// Message is a deliberation ledger message (internal/deliberation).
	Message json.RawMessage `json:"message,omitempty"`

	// More says the next record belongs to the same unit (AppendBatch):
	// a history that ends on a record with More ends in a unit a crash
	// cut short, which counts as never written.
	More bool `json:"more,omitempty"`
	// Commit, on a unit's last record, is the manifest the unit's change
	// left: the history, not the manifest file, is the durable copy.
	Commit *Commit `json:"commit,omitempty"`
}

// Commit is the manifest a change saved (internal/jobtx). The manifest file
// is rewritten after the history fsync without one of its own; a crash can
// leave it at Base, and the next transaction restores it from here.
type Commit struct {
	// Base is the SHA-256 (hex) of the manifest file the change replaced.
	Base string `json:"base_manifest_sha256"`
	// Sum is the SHA-256 (hex) of the manifest file it wrote.
	Sum string `json:"manifest_sha256"`
	// Manifest is that file's content, compact (the file is its
	// two-space indentation plus a newline): a JSON object, or a string
	// holding it deflated ("deflate:" and base64), sealed for a job with
	// encrypted history (internal/jobtx).
	Manifest json.RawMessage `json:"manifest"`
	// Plain is the manifest compact as its writer encoded it, before
	// packing and sealing: in memory only, never stored (nil when read).
	// It is json.Marshal's encoding of the manifest (compact, HTML
	// escaped), so a Manifest that is Plain itself (the same bytes in
	// memory) is stored as it is, not compacted again (appendRecord).
	Plain []byte `json:"-"`
	// Said is what Plain says of the job, as its writer held the
	// manifest it encoded: in memory only, set with Plain (nil when
	// read).
	Said *Said `json:"-"`
}

// Said is what a committed manifest says of its job's status, budget
// and spending, the fields of it a store keeps (clusterstore): handed
// over with the unit (Commit.Said) so that the store does not decode
// again the manifest its writer has just encoded.
type Said struct {
	Status string   // status
	Budget *float64 // cost_threshold, in cents; nil: none
	Cost   float64  // metrics.cumulative_cost, in cents
}

// ProtocolEvent is a protocol event (seed 003): what a role did, chained to the
// previous event of the job by PrevEvent and, for the mandatory types,
// signed with the role's own key. The record's envelope chains and signs
// it again as part of the whole history.
type ProtocolEvent struct {
	Type string `json:"type"`
	// Role is the role that emitted it (the role guard checks it may).
	Role string `json:"role"`
	// Subject is the id the event is about (a proposal, intent, claim,
	// artifact); "" for session events.
	Subject string `json:"subject,omitempty"`
	// Body is the event's payload, schema-checked per type.
	Body map[string]any `json:"body"`
	// PrevEvent is the Hash of the job's previous event (GenesisHash for
	// the first).
	PrevEvent string `json:"prev_event"`
	// Hash is sha256 of the canonical form of the fields above.
	Hash string `json:"hash"`
	// KeyID and Sig: the role key's id and its Ed25519 signature of Hash
	// (base64), for the mandatory signed types.
	KeyID string `json:"key_id,omitempty"`
	Sig   string `json:"sig,omitempty"`
}

// Metadata keys of a request that more than the engine read.
const (
	// MetaTurnKey names the turn of a turn step (workflow.Turn.Key): a
	// human's reply is filed under it, and a deliberation and logist
	// verify tell a turn's call from a phase's by it.
	MetaTurnKey = "turn_key"
	// MetaAnswerSchema names the answer's own schema (a file in schemas/):
	// the phase's or the turn's, when it has one.
	MetaAnswerSchema = "answer_schema"
)

// Request is what an agent was asked, complete enough to ask again.
type Request struct {
	Prompt          string         `json:"prompt"`
	FilesContext    []string       `json:"files_context"`
	Metadata        map[string]any `json:"metadata"`
	SystemPrompt    string         `json:"system_prompt,omitempty"`
	TaskDescription string         `json:"task_description,omitempty"`
	WorkspacePath   string         `json:"workspace_path,omitempty"`
}

// Response statuses (seed 002).
const (
	StatusSuccess = "SUCCESS"
	StatusError   = "ERROR"
	StatusTimeout = "TIMEOUT"
)

// Response is what came back, valid or not.
type Response struct {
	Status               string   `json:"status"`
	Action               string   `json:"action,omitempty"`
	EvidenceFiles        []string `json:"evidence_files"`
	Summary              string   `json:"summary_for_supervisor"`
	RawResponse          string   `json:"raw_response"`
	ExecutionTimeSeconds float64  `json:"execution_time_seconds"`
	CostUSD              float64  `json:"cost_usd"`
	// Metered: CostUSD and Tokens are the metering proxy's figures (the
	// cost of record); ReportedCostUSD is what the agent said the call
	// cost, kept beside them when it said (docs/metering.md).
	Metered         bool     `json:"metered,omitempty"`
	ReportedCostUSD *float64 `json:"reported_cost_usd,omitempty"`
	ErrorCode       string   `json:"error_code,omitempty"`
	Error           string   `json:"error,omitempty"`
	Warnings        []string `json:"warnings,omitempty"`
	SessionID       string   `json:"session_id,omitempty"`
	Tokens          *Tokens  `json:"tokens,omitempty"`
	NewStatus       string   `json:"new_status,omitempty"`
	// Outcome is what the phase's effect made of the answer when it is not
	// the action (a workflow outcome such as REJECTED); SentBack marks one
	// that sends work back like a RETRY.
	Outcome  string `json:"outcome,omitempty"`
	SentBack bool   `json:"sent_back,omitempty"`
	Stderr   string `json:"stderr,omitempty"`
	// Stdout is what an agent that answers in a file printed besides
	// (bounded as Stderr is); absent for one that answers on stdout,
	// whose stdout is RawResponse, and in records written before Logist
	// kept it.
	Stdout string `json:"stdout,omitempty"`
	// Violations lists every way a refused answer broke its contract, in
	// seed 002's layer order (ErrorCode names the one it was refused for).
	// Absent in records written before Logist listed them.
	Violations []Violation `json:"violations,omitempty"`
	// WorkspaceChanges are the workspace files that changed during the
	// call (a scan before and after it), whether the answer listed them
	// as evidence or not; absent when none did or they were not compared.
	WorkspaceChanges *FileChanges `json:"workspace_changes,omitempty"`
}

// FileChanges are workspace files that changed, by path relative to the
// workspace: regular files and symlinks (folders are not listed), each
// list sorted.
type FileChanges struct {
	Added    []string `json:"added"`
	Modified []string `json:"modified"`
	Deleted  []string `json:"deleted"`
}

// Violation is one way an answer broke its contract (internal/response).
type Violation struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
	// Path is the evidence path the violation is about, if any.
	Path string `json:"path,omitempty"`
	// Workspace marks what the workspace said when the answer was judged
	// (a path that leads out through a symlink, or could not be resolved),
	// rather than the answer's own text: the workspace may have changed
	// since, so a replay takes it as recorded.
	Workspace bool `json:"workspace,omitempty"`
}

// Tokens counts model usage where a provider reports it.
type Tokens struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
	Cache  int64 `json:"cache,omitempty"`
}

// Transition is a status/phase change, as logged (seed 004 §7.1).
type Transition struct {
	From         string `json:"from"`
	To           string `json:"to"`
	FromPhase    string `json:"from_phase,omitempty"`
	ToPhase      string `json:"to_phase,omitempty"`
	Event        string `json:"event"`
	Actor        string `json:"actor"`
	CheckpointID string `json:"checkpoint_id,omitempty"`
	Reason       string `json:"reason,omitempty"`
}

// Steward commands as their records name them (Steward.Command).
const (
	CommandActivate       = "activate"
	CommandResume         = "resume"
	CommandHalt           = "halt"
	CommandRollback       = "rollback"
	CommandReply          = "reply"  // logist reply: a human's answer for a role
	CommandDecide         = "decide" // logist pm: a decision a deliberation waits for
	CommandSet            = "set"
	CommandSchedulePause  = "schedule_pause"
	CommandScheduleResume = "schedule_resume"
)

// Steward records a steward command.
type Steward struct {
	Command   string         `json:"command"`
	CommandID string         `json:"command_id"`
	User      string         `json:"user,omitempty"`
	Guidance  string         `json:"guidance,omitempty"`
	Reason    string         `json:"reason,omitempty"`
	Changes   map[string]any `json:"changes,omitempty"`
	// Snapshot, on a rollback, is the snapshot of the checkpoint it
	// restored (Changes["checkpoint_id"]): the base the next recovery
	// point's changes are listed against. Absent in rollbacks recorded
	// before Logist kept it.
	Snapshot *SnapshotRef `json:"snapshot,omitempty"`
	// ConfigSHA256, on a command that changed the job's configuration
	// (set, a schedule's pause or resume, a resume that raised a budget),
	// is the hash of the configuration it left (manifest.ConfigHash): a
	// change of configuration without such a record was not a steward's.
	ConfigSHA256 string `json:"config_sha256,omitempty"`
}

// Change returns the old and new value the command recorded for the
// configuration field (a dotted path, such as limits.max_retries) if it
// changed it; nil is absent.
func (s *Steward) Change(field string) (old, new any, ok bool) {
	c, ok := s.Changes[field].(map[string]any)
	if !ok || s.ConfigSHA256 == "" {
		return nil, nil, false
	}
	return c["old"], c["new"], true
}

// normalize gives r's list fields their empty value where they are nil, so
// that a record never says null where it means "none" (seed 002's lists are
// lists): Append applies it before a record is encoded (write) and
// ParseLine after one is decoded (records written before this rule may hold
// null), so an interrupted call's stored request is asked again exactly as
// first sent. A recovery point's evidence_files is filled on write only:
// read, its absence says the point predates it (RecoveryPoint.Evidence).
func (r *Record) normalize(write bool) {
	if q := r.Request; q != nil {
		if q.FilesContext == nil {
			q.FilesContext = []string{}
		}
		if q.Metadata == nil {
			q.Metadata = map[string]any{}
		}
	}
	if p := r.Response; p != nil {
		if p.EvidenceFiles == nil {
			p.EvidenceFiles = []string{}
		}
		p.WorkspaceChanges.normalize()
	}
	if p := r.RecoveryPoint; p != nil {
		if p.RollbackFiles == nil {
			p.RollbackFiles = []string{}
		}
		if write && p.EvidenceFiles == nil {
			p.EvidenceFiles = []string{}
		}
		p.Changes.normalize()
	}
}

func (c *FileChanges) normalize() {
	if c == nil {
		return
	}
	for _, l := range []*[]string{&c.Added, &c.Modified, &c.Deleted} {
		if *l == nil {
			*l = []string{}
		}
	}
}

// Checkpoint is the checkpoint record r makes the job's current one, if it
// moves it: a recovery point makes itself current, a steward's rollback
// the point it returned to. snap is that checkpoint's workspace snapshot
// (nil if it has none, or a rollback recorded before Logist named it).
// It is the one rule of the current checkpoint: State follows it, and so
// does jobtx for records not yet committed.
func (r *Record) Checkpoint() (id string, snap *SnapshotRef, ok bool) {
	switch {
	case r.Type == TypeRecoveryPoint && r.RecoveryPoint != nil:
		return r.RecoveryPoint.CheckpointID, r.RecoveryPoint.Snapshot, true
	case r.Type == TypeSteward && r.Steward != nil && r.Steward.Command == CommandRollback:
		if id, _ := r.Steward.Changes["checkpoint_id"].(string); id != "" {
			return id, r.Steward.Snapshot, true
		}
	}
	return "", nil, false
}

// RecoveryPoint is a safe boundary a job can resume from (seed 002).
type RecoveryPoint struct {
	CheckpointID  string `json:"checkpoint_id"`
	Sequence      int    `json:"sequence"`
	ResumePhase   string `json:"resume_phase"`
	CanResumeFrom bool   `json:"can_resume_from"`
	Description   string `json:"description"`
	// RollbackFiles are the files this point's phase changed: those a
	// rollback to the previous checkpoint (BaseCheckpoint) would restore
	// or remove, the paths of Changes. Recovery points recorded before
	// Logist compared snapshots held the answer's evidence here.
	RollbackFiles []string `json:"rollback_files"`
	// Changes are the workspace files changed since BaseCheckpoint, the
	// checkpoint the job was at (the previous point, or the one a rollback
	// returned to), from the two snapshots; absent for the first point and
	// when either snapshot is missing.
	Changes        *FileChanges `json:"changes,omitempty"`
	BaseCheckpoint string       `json:"base_checkpoint_id,omitempty"`
	// EvidenceFiles are what the answer that completed the phase listed
	// as evidence (absent in points recorded before they were kept apart
	// from RollbackFiles: see Evidence).
	EvidenceFiles []string       `json:"evidence_files"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	// Snapshot is the restorable copy of the workspace at this point
	// (internal/snapshot); nil if none could be taken.
	Snapshot *SnapshotRef `json:"snapshot,omitempty"`
	// Git, in a git workspace, is the point's commit on the job branch
	// (internal/gitws); nil when the job has no git workspace or the
	// commit failed.
	Git *GitPoint `json:"git,omitempty"`
}

// GitPoint is a recovery point's commit in a git workspace. The first
// point (cp-start) records where the workspace came from: the repository,
// the ref asked for, and the base commit it named then (Commit).
type GitPoint struct {
	Branch string `json:"branch"`
	Commit string `json:"commit"`
	Repo   string `json:"repo,omitempty"`
	Ref    string `json:"ref,omitempty"`
}

// Evidence is the evidence of the answer that completed the point's phase:
// EvidenceFiles, or for a point recorded before they were kept apart, its
// RollbackFiles, which then held them.
func (p *RecoveryPoint) Evidence() []string {
	switch {
	case p.EvidenceFiles != nil:
		return p.EvidenceFiles
	case p.Changes == nil && p.RollbackFiles != nil:
		return p.RollbackFiles
	}
	return []string{}
}

// SnapshotRef points at a workspace snapshot.
type SnapshotRef struct {
	// Listing is the listing file, relative to the job folder; "" when the
	// workspace was empty (no file is written: the record says it all).
	Listing string `json:"listing"`
	Files   int    `json:"files"`
	Bytes   int64  `json:"bytes"`
	New     int64  `json:"new_bytes"`
}

// ErrorInfo is an error event (seed 004 §7.2 fields beyond job and actor).
type ErrorInfo struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	CheckpointID string `json:"checkpoint_id,omitempty"`
}

// Restorable says whether a steward can roll a job back to this point
// (nil), or why not: the point where the job ended has no phase to resume
// at, and one whose workspace snapshot failed has nothing to restore. It
// is the one rule: logist rollback refuses what it refuses, and a point is
// recorded (and shown in jobHistory.json) as can_resume_from only when it
// holds.
func (p *RecoveryPoint) Restorable() error {
	switch {
	case p.ResumePhase == "":
		return fmt.Errorf("checkpoint %s is where the job ended; roll back to an earlier one", p.CheckpointID)
	case p.Snapshot == nil:
		return fmt.Errorf("checkpoint %s has no workspace snapshot to restore", p.CheckpointID)
	}
	return nil
}
