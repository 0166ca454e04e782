// Package codes is the catalogue of Logist's error codes: every code a job's
// run.error_code, a response's or error record's code, or a log line's
// error_code can carry, with what it means, its kind (error, warning or
// info) and whether it stops the job. Every package names its codes by the
// constants here, the log helper (internal/joblog) takes a line's level
// from the code's kind, and docs/codes.md is this table (a test keeps them
// equal), so there is one list.
//
// Codes of one workflow (the protocol's, the deliberations') and of the
// metering proxy are here too: a code is data, and naming it here imports
// nothing. The package imports nothing of Logist, so every package may use
// it. A workflow's own outcome names (the protocol's REJECTED, BLOCKED…)
// may also end up as a stopped job's run.error_code when its workflow
// sends them to a steward; they are the workflow's data, not codes.
package codes

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Kind is how serious a code is; a log line takes its level and its type
// field from it.
type Kind string

const (
	// Error: something failed.
	Error Kind = "error"
	// Warning: something is not as it should be, but what was done stands
	// (an answer accepted, a repair made, a call asked again).
	Warning Kind = "warning"
	// Info: the job waits for a person by design.
	Info Kind = "info"
)

// Code is one entry of the catalogue.
type Code struct {
	Name string
	Kind Kind
	// Stops: a job that gets this code does not go on by itself; it waits
	// for a steward, halts, or is not run again (the daemon's codes: the
	// daemon stops). Codes retried automatically first (transient agent
	// failures, storage errors) stop the job only once their retries are
	// used up, and say so.
	Stops bool
	// Area is where the code comes from (answer, call, engine, storage,
	// steward, daemon, schedule, protocol, deliberation, meter).
	Area string
	// Meaning is one line for a person reading a log or a job's status.
	Meaning string
}

// Validation of an agent's answer (internal/response).
const (
	AgentEmpty        = "AGENT_EMPTY"
	NotJSON           = "NOT_JSON"
	SeveralObjects    = "SEVERAL_OBJECTS"
	SchemaInvalid     = "SCHEMA_INVALID"
	ActionInvalid     = "ACTION_INVALID"
	SummaryMissing    = "SUMMARY_MISSING"
	ProtocolViolation = "PROTOCOL_VIOLATION"
	EvidenceMissing   = "EVIDENCE_MISSING"
	UndeclaredChanges = "UNDECLARED_CHANGES"
)

// Agent calls (internal/agent, the engine's calls).
const (
	APIError          = "API_ERROR"
	AgentExit         = "AGENT_EXIT"
	AgentStart        = "AGENT_START"
	AgentOutputLimit  = "AGENT_OUTPUT_LIMIT"
	AgentTimeout      = "AGENT_TIMEOUT"
	AgentCanceled     = "AGENT_CANCELED"
	AgentInterrupted  = "AGENT_INTERRUPTED"
	AgentConfig       = "AGENT_CONFIG"
	AgentStreamFail   = "AGENT_STREAM_FAIL"
	AgentOrphanKilled = "AGENT_ORPHAN_KILLED"
	AuthFailed        = "AUTH_FAILED"
	RateLimited       = "RATE_LIMITED"
	StreamCut         = "STREAM_CUT"
	APIMalformed      = "API_MALFORMED"
	MaxTokens         = "MAX_TOKENS"
	MaxTurns          = "MAX_TURNS"
	AgentBudget       = "AGENT_BUDGET"
	AgentFailed       = "AGENT_FAILED"
	NotInstalled      = "NOT_INSTALLED"
	AwaitingReply     = "AWAITING_REPLY"
)

// The engine's decisions (internal/runner, internal/workflow, internal/jobtx).
const (
	AgentStuck        = "AGENT_STUCK"
	RetryLimit        = "RETRY_LIMIT"
	CostBudget        = "COST_BUDGET"
	TimeBudget        = "TIME_BUDGET"
	WorkspaceUnsafe   = "WORKSPACE_UNSAFE"
	GitUnsafe         = "GIT_WORKSPACE_UNSAFE"
	WorkflowEffect    = "WORKFLOW_EFFECT"
	AwaitingSteward   = "AWAITING_STEWARD"
	SnapshotFailed    = "SNAPSHOT_FAILED"
	IllegalTransition = "ILLEGAL_TRANSITION"
	WorkspaceSource   = "WORKSPACE_SOURCE"
	GitCommitFailed   = "GIT_COMMIT_FAILED"
	GitReconciled     = "GIT_RECONCILED"
)

// Storage (internal/jobtx, the scheduler's runs).
const (
	HistoryWrite    = "HISTORY_WRITE"
	ManifestWrite   = "MANIFEST_WRITE"
	StorageWrite    = "STORAGE_WRITE"
	HistoryMissing  = "HISTORY_MISSING"
	HistoryTooNew   = "HISTORY_TOO_NEW"
	HistoryCorrupt  = "HISTORY_CORRUPT"
	HistoryTornTail = "HISTORY_TORN_TAIL"
	CommitFinished  = "COMMIT_FINISHED"
	JobHistoryWrite = "JOBHISTORY_WRITE"
	RunFailed       = "RUN_FAILED"
	JobGone         = "JOB_GONE"
)

// The steward's commands, the daemon and the schedules.
const (
	RollbackFailed  = "ROLLBACK_FAILED"
	ManifestInvalid = "MANIFEST_INVALID"
	CostUnknown     = "COST_UNKNOWN"
	Place           = "PLACE"
	Scan            = "SCAN"
	Watcher         = "WATCHER"
	WatchLimit      = "WATCH_LIMIT"
	Schema          = "SCHEMA"
	Daemon          = "DAEMON"
	DaemonKey       = "DAEMON_KEY"
	JobsDirGone     = "JOBS_DIR_GONE"
	RunsAsRoot      = "RUNS_AS_ROOT"
	JobsDirExposed  = "JOBS_DIR_EXPOSED"
	TokenExposed    = "TOKEN_FILE_EXPOSED"
	CronFailed      = "CRON_FAILED"
	CronMissed      = "CRON_MISSED"
)

// Workflows: the protocol (internal/protocol/phases) and the deliberations
// (internal/deliberation/play).
const (
	ProtocolFailed     = "PROTOCOL_FAILED"
	VerificationFailed = "VERIFICATION_FAILED"
	GameFailed         = "GAME_FAILED"
	GameRole           = "GAME_ROLE"
	TurnSkipped        = "TURN_SKIPPED"
	TurnLate           = "TURN_LATE"
	ToolRunRecovered   = "TOOL_RUN_RECOVERED"
	// TurnPassed: a person playing a party skipped its turn (logist play).
	TurnPassed = "TURN_PASSED"
)

// The metering proxy (internal/meter): in the errors agents get from it,
// in its totals and in its logs.
const (
	TokenUnknown         = "TOKEN_UNKNOWN"
	EndpointNotMetered   = "ENDPOINT_NOT_METERED"
	UpstreamNotAllowed   = "UPSTREAM_NOT_ALLOWED"
	RequestInvalid       = "REQUEST_INVALID"
	RequestTooLarge      = "REQUEST_TOO_LARGE"
	EncodingUnsupported  = "ENCODING_UNSUPPORTED"
	ModelNotAllowed      = "MODEL_NOT_ALLOWED"
	ModelUnpriced        = "MODEL_UNPRICED"
	BudgetSpent          = "BUDGET_SPENT"
	UpstreamFailed       = "UPSTREAM_FAILED"
	UpstreamRefused      = "UPSTREAM_REFUSED"
	ResponseUnmeterable  = "RESPONSE_UNMETERABLE"
	CallRevoked          = "CALL_REVOKED"
	UpstreamIdleTimeout  = "UPSTREAM_IDLE_TIMEOUT"
	ClientGone           = "CLIENT_GONE"
	UpstreamStreamBroken = "UPSTREAM_STREAM_BROKEN"
)

// Containment (internal/sandbox through internal/agent's executor).
const (
	SandboxUnavailable = "SANDBOX_UNAVAILABLE"
	SandboxLost        = "SANDBOX_LOST"
	ManifestEdited     = "MANIFEST_EDITED"
)

// Metering of agent calls (internal/agent with internal/meter).
const CostDisagreement = "COST_DISAGREEMENT"

// The network allowlist's egress proxy (internal/egress).
const EgressRefused = "EGRESS_REFUSED"

// Cluster mode (internal/cluster).
const (
	ClusterFenced    = "CLUSTER_FENCED"
	ClusterLeaseLost = "CLUSTER_LEASE_LOST"
	ClusterClaim     = "CLUSTER_CLAIM"
	ClusterRun       = "CLUSTER_RUN"
	ClusterIndex     = "CLUSTER_INDEX_NOT_KEPT"
	// ContentKeyMismatch: a node lacks the content key an encrypt_history
	// job's records are sealed with (cluster/contentkey.go).
	ContentKeyMismatch = "CONTENT_KEY_MISMATCH"
)

// Hostile input and broken storage (issue 18).
const (
	ManifestTooLarge = "MANIFEST_TOO_LARGE"
	StorageDenied    = "STORAGE_DENIED"
	CallBudget       = "CALL_BUDGET"
)

// catalogue is every code, by area; docs/codes.md renders it.
var catalogue = []Code{
	// An agent's answer, held to its contract (seed 002's layers).
	{AgentEmpty, Error, true, "answer", "the agent answered nothing (one that answers in a file wrote none Logist may read: the reason says so, and whether its stdout holds what looks like the answer)"},
	{NotJSON, Error, true, "answer", "the answer holds no JSON object"},
	{SeveralObjects, Error, true, "answer", "the answer holds more than one JSON object"},
	{SchemaInvalid, Error, true, "answer", "the answer breaks the answer schema or the phase's own schema (a turn's answer that breaks its schema is recorded as a skipped turn instead)"},
	{ActionInvalid, Error, true, "answer", "the action is not COMPLETED, STUCK or RETRY"},
	{SummaryMissing, Error, true, "answer", "summary_for_supervisor is missing or empty"},
	{ProtocolViolation, Error, true, "answer", "an evidence path leaves the workspace (absolute, .., a symlink out), or a COMPLETED answer leaves a git workspace's repository one Logist will not or cannot commit in, or not the job's (docs/security.md)"},
	{EvidenceMissing, Warning, false, "answer", "an evidence file the answer names does not exist; the answer is accepted"},
	{UndeclaredChanges, Warning, false, "answer", "the call changed workspace files the answer does not list as evidence; the answer is accepted"},

	// An agent call.
	{APIError, Error, true, "call", "the model API or the transport failed; retried with backoff up to limits.max_api_retries, then the job stops"},
	{AgentExit, Error, true, "call", "the agent program exited with a non-zero status; retried like an API error"},
	{AgentStart, Error, true, "call", "the agent program could not be started (or its request file written)"},
	{AgentOutputLimit, Error, true, "call", "the agent printed more than its output limit (or wrote an answer file larger than it)"},
	{AgentTimeout, Error, true, "call", "the call exceeded its timeout; the agent's process group was killed"},
	{AgentCanceled, Info, false, "call", "a steward halted or moved the job during the call; what the call produced is recorded, not used"},
	{AgentInterrupted, Warning, false, "call", "the call was cut off by a shutdown or a crash; it is asked again with the same stored request"},
	{AgentConfig, Error, true, "call", "the role's agent configuration cannot be used (a prompt file, an API key variable, a preset's settings)"},
	{AgentStreamFail, Error, false, "call", "the model's stream broke mid-answer; the partial answer is dropped and the call asked again (limits.max_api_retries)"},
	{AgentOrphanKilled, Warning, false, "call", "an agent left running by a previous logistd was killed before its call was asked again"},
	{AuthFailed, Error, true, "call", "the model API refused the credentials (401/403)"},
	{RateLimited, Error, true, "call", "the model API asked to slow down (429); retried after its Retry-After, then the job stops"},
	{StreamCut, Error, true, "call", "the model's stream broke before the answer was complete; retried, then the job stops"},
	{APIMalformed, Error, true, "call", "the model API sent a chunk that is not JSON; retried, then the job stops"},
	{MaxTokens, Error, true, "call", "the answer was cut at the model's output limit"},
	{MaxTurns, Error, true, "call", "the agent CLI stopped at its turn limit"},
	{AgentBudget, Error, true, "call", "the agent CLI reached its own spending limit"},
	{AgentFailed, Error, true, "call", "the agent CLI reported a failure it did not classify"},
	{NotInstalled, Error, true, "call", "the agent CLI is not installed (not on PATH, nor at command.program)"},
	{AwaitingReply, Info, true, "call", "a role played by the steward waits for logist reply"},

	// What the engine decides.
	{AgentStuck, Error, true, "engine", "the agent answered STUCK"},
	{RetryLimit, Error, true, "engine", "more RETRYs than limits.max_retries since the start or the steward's last resume, rollback, reply or decision"},
	{CostBudget, Error, true, "engine", "the job's cost reached cost_threshold (HALTED_COST)"},
	{TimeBudget, Error, true, "engine", "the job's agent time reached time_threshold_minutes (HALTED_TIME)"},
	{WorkspaceUnsafe, Error, true, "engine", "the job's workspace is not its own folder (a symlink out, a file); no agent runs in it"},
	{GitUnsafe, Error, true, "engine", "the job's git repository was left set to run a program or to lead git past the workspace, or so that Logist cannot commit in it (no repository of the job's, a lock), after an answer was judged or at a point no answer completes (docs/security.md): the last recovery point has no commit, and no agent runs until a steward mends it"},
	{WorkflowEffect, Error, true, "engine", "a phase names an effect this logistd does not have, or its effect cannot play it"},
	{AwaitingSteward, Info, true, "engine", "the workflow waits for a steward's decision (logist pm)"},
	{SnapshotFailed, Error, false, "engine", "a recovery point's workspace snapshot failed; the job goes on, but cannot be rolled back to that point"},
	{IllegalTransition, Error, true, "engine", "a status change the lifecycle table does not allow was refused (a bug)"},
	{WorkspaceSource, Error, true, "engine", "the workspace the manifest names could not be made (git missing, a repository out of reach, a bad ref, no such folder); no agent ran"},
	{GitCommitFailed, Error, false, "engine", "a recovery point's commit on the job branch failed, or the workspace's repository was refused (it sets what would run a program or lead git past the workspace: docs/security.md); the job goes on (a refused repository then stops it: GIT_WORKSPACE_UNSAFE; an answer that leaves one is refused first: PROTOCOL_VIOLATION), its snapshot still restores the point, and logist status says why"},
	{GitReconciled, Warning, false, "engine", "a commit made for a recovery point that a crash kept out of the history was undone; the point is committed again when it is reached"},

	// The job's files.
	{HistoryWrite, Error, false, "storage", "a history append failed (the disk refused it); the job pauses and runs again"},
	{ManifestWrite, Error, false, "storage", "saving the manifest failed; the job pauses and runs again"},
	{StorageWrite, Error, false, "storage", "the disk refused another write (full, quota, read-only); the job pauses and runs again"},
	{HistoryMissing, Error, true, "storage", "the job's history is gone (deleted under it) or lost committed records (it ends before its signed head); the job is not run"},
	{HistoryTooNew, Error, true, "storage", "the job's history was written by a newer Logist; the job is not run"},
	{HistoryCorrupt, Error, true, "storage", "the job's history cannot be read; the job is not run"},
	{HistoryTornTail, Warning, false, "storage", "an incomplete last record (a crash mid-append) was cut off when the history was opened"},
	{CommitFinished, Warning, false, "storage", "a change a crash interrupted was finished: the manifest was restored from the history"},
	{JobHistoryWrite, Warning, false, "storage", "jobHistory.json could not be written; the job's history, the record, is intact"},
	{RunFailed, Error, true, "storage", "a job's run stopped with an error the log names; it is not run again by itself"},
	{JobGone, Warning, true, "storage", "a job's folder (or its job.json) was removed or renamed while its run was in progress: the run stopped, what it had not recorded is dropped, nothing is written in its place; a folder renamed shows INVALID (its job_id names the old folder) until job_id is set to the new name"},

	// The steward, the daemon, the schedules.
	{RollbackFailed, Error, false, "steward", "restoring a checkpoint's workspace failed; the job stays as it was"},
	{ManifestInvalid, Error, true, "daemon", "a job's manifest is invalid; the job shows INVALID until the file is fixed"},
	{CostUnknown, Warning, false, "daemon", "a job has a CLI preset whose model Logist cannot price (no command.price, the model not in the table or logistd's --prices): the metering proxy refuses such a model, so the job stops at that call (MODEL_UNPRICED) unless the program asks for a priced one (an unpriced http model is refused ahead instead: logist validate and the daemon's intake name http.price)"},
	{Place, Error, true, "daemon", "a manifest dropped in the jobs folder could not be moved into its job folder"},
	{Scan, Error, false, "daemon", "the jobs folder could not be scanned"},
	{Watcher, Error, false, "daemon", "watching the jobs folder failed; changes are found by rescans"},
	{WatchLimit, Warning, false, "daemon", "the inotify watch limit (fs.inotify.max_user_watches) is reached: job folders past it are polled every second instead of watched; raise it and restart logistd"},
	{Schema, Error, false, "daemon", "compiling the schemas ahead of the first job failed; they are compiled when first used"},
	{Daemon, Error, true, "daemon", "logistd stopped with an error"},
	{DaemonKey, Error, false, "daemon", "the jobs folder came back but its signing key could not be set up; tried again"},
	{JobsDirGone, Error, false, "daemon", "the jobs folder was removed or moved away; logistd waits for it to come back"},
	{RunsAsRoot, Warning, false, "daemon", "logistd runs as root: RLIMIT_NPROC does not bound its calls and whatever lands in its jobs folder runs with root's reach; run it as an unprivileged user (docs/security.md)"},
	{JobsDirExposed, Warning, false, "daemon", "the jobs folder lets other users write into it (writable by group or others and not owned by logistd's user, or world-writable without the sticky bit): they can drop manifests logistd runs; chown it to logistd's user, chmod 0700"},
	{TokenExposed, Warning, false, "daemon", "a console token file is readable by group or others: whoever reads it may act as that token's role; chmod 0600"},
	{CronFailed, Error, false, "schedule", "a scheduled run could not be created"},
	{CronMissed, Warning, false, "schedule", "ticks of a schedule due while logistd was down were past its starting deadline: no run was made for them"},

	// Workflows.
	{ProtocolFailed, Error, true, "protocol", "the protocol session cannot go on (it failed, was aborted, or broke its integrity rules)"},
	{VerificationFailed, Error, true, "protocol", "the protocol verifier failed the session's trace"},
	{GameFailed, Error, true, "deliberation", "the deliberation cannot go on (its game refused a step)"},
	{GameRole, Error, true, "deliberation", "a participant is played by a role with no agent in the manifest"},
	{TurnLate, Warning, false, "deliberation", "a background turn (the stance helper) had not answered when the step's other turns ended: it was cut and the game went on without it"},
	{TurnSkipped, Warning, false, "deliberation", "a participant's turn failed or came back empty: the chair records it as skipped and the game goes on"},
	{ToolRunRecovered, Warning, false, "protocol", "a protocol tool run was in flight when logistd stopped: what was left of it was killed, the workspace restored to the recovery point the runs started from, and the run recorded as interrupted; the Executor plans again"},

	// The metering proxy: a refused or ended request of an agent; the
	// agent gets the error, the call's own outcome is recorded as usual.
	{TokenUnknown, Warning, false, "meter", "401: the API key is not a live call token (never issued, revoked, proxy closed)"},
	{EndpointNotMetered, Warning, false, "meter", "404: an endpoint the proxy does not forward"},
	{UpstreamNotAllowed, Warning, false, "meter", "403: the call's grant names no upstream of the API's family"},
	{RequestInvalid, Warning, false, "meter", "400: a request body the proxy cannot read (no model, not JSON)"},
	{RequestTooLarge, Warning, false, "meter", "413: a request body over the proxy's limit"},
	{EncodingUnsupported, Warning, false, "meter", "415: a request body encoding other than gzip or deflate"},
	{ModelNotAllowed, Warning, false, "meter", "403: a model the call's grant does not list"},
	{ModelUnpriced, Error, true, "meter", "400: the metering proxy refuses a model with no known price (never metered as free, whatever the budget); the call fails and the job stops in INTERVENTION_REQUIRED until a steward prices the model (http.price or command.price, or logistd --prices) and resumes it"},
	{BudgetSpent, Warning, false, "meter", "the call's budget is spent: refused before forwarding (402), or the stream cut"},
	{UpstreamFailed, Warning, false, "meter", "502/504: the provider could not be reached or broke off"},
	{UpstreamRefused, Warning, false, "meter", "the provider refused the request (its status in http_status); its answer is passed on"},
	{ResponseUnmeterable, Warning, false, "meter", "502: a response the proxy cannot read (encoding, size)"},
	{CallRevoked, Warning, false, "meter", "a response ended because its call was revoked"},
	{UpstreamIdleTimeout, Warning, false, "meter", "the provider fell silent mid-response"},
	{ClientGone, Warning, false, "meter", "the agent stopped reading the response"},
	{UpstreamStreamBroken, Warning, false, "meter", "the provider's response body broke off"},

	// Cluster mode.
	{ClusterFenced, Warning, false, "cluster", "the store refused this node's write or heartbeat: the job's epoch moved on (another node owns it, or a steward changed it: a halt); the node stopped it here and writes nothing more for it"},
	{ClusterLeaseLost, Warning, false, "cluster", "this node could not renew a job's lease in time (paused, or cut off from the database): it stopped the job before another node may take it"},
	{ClusterClaim, Error, false, "cluster", "claiming work from the cluster's database failed; tried again"},
	{ClusterRun, Error, false, "cluster", "a job's run on this node ended with an error; its lease is released (or expires) and any node may take it up"},
	{ClusterIndex, Warning, false, "cluster", "a git job stopped for a steward had staged changes that do not go with it (a conflict in its index, or git failed to record it): the node that resumes it has the files, unstaged"},
	// Containment of agent processes (internal/sandbox).
	{SandboxUnavailable, Error, true, "sandbox", "no sandbox layer the job asks for works on this host (the reason names what is missing: bwrap, user namespaces, Landlock); the job does not start, never runs uncontained; install it, or a steward opts the job out with sandbox \"none\""},
	{ManifestEdited, Warning, false, "sandbox", "job.json was edited while its job runs by no steward command: the committed budgets, agents, workflow and sandbox, and Logist's record of the run (status, phase, run state, metrics), were put back (the rest of the edit is kept)"},
	{SandboxLost, Warning, false, "sandbox", "a contained call's launcher ended without a result (killed, machine restart); nothing of it runs any more and the call is asked again"},
	// Hostile input and broken storage (issue 18).
	{StorageDenied, Error, false, "storage", "a job's file or folder refused access (EACCES, EPERM): the job is stalled and runs again with backoff (a job.json the daemon may not read: once it is given back to the daemon's user); logist status shows why"},
	{ManifestTooLarge, Error, false, "storage", "a change would make the manifest larger than the 1 MiB logist reads: it is not written (nor its history unit)"},
	{CallBudget, Error, true, "engine", "the job's agent calls reached its calls budget (limits.max_agent_calls, else logistd's --default-max-agent-calls): INTERVENTION_REQUIRED until a steward raises it (logist resume --max-agent-calls)"},
	// Human players of a game (issue 20).
	{TurnPassed, Info, false, "deliberation", "a person playing a party skipped its turn (logist play --skip): the chair records the turn as skipped and the game goes on"},
	// Metering of agent calls (issue 19).
	{CostDisagreement, Warning, false, "meter", "an agent CLI's own cost report disagrees with the metering proxy's (by more than a tenth of a cent and 10 %): the proxy's figure is the cost of record, both are in the response's warning"},
	// Cluster mode's shared content key (issue 23).
	{ContentKeyMismatch, Error, false, "cluster", "a node has no content key, or another one than the one an encrypt_history job's records are sealed with (its fingerprint is in the database): it gives the job back without writing anything; give every node the same key (LOGIST_CONTENT_KEY_FILE)"},
	{EgressRefused, Warning, false, "sandbox", "the egress proxy refused a call's connection: the destination is not on the job's network allowlist (sandbox_network_allow), resolves to an address of the host or a private network the list does not name, or is the daemon's own listener"},
}

var byName = func() map[string]Code {
	m := make(map[string]Code, len(catalogue))
	for _, c := range catalogue {
		if _, dup := m[c.Name]; dup {
			panic("codes: " + c.Name + " is listed twice")
		}
		m[c.Name] = c
	}
	return m
}()

// Lookup returns the catalogue's entry for name.
func Lookup(name string) (Code, bool) {
	c, ok := byName[name]
	return c, ok
}

// KindOf is name's kind; a name the catalogue does not know is an error
// (a test keeps every code the binaries use in the catalogue).
func KindOf(name string) Kind {
	if c, ok := byName[name]; ok {
		return c.Kind
	}
	return Error
}

// All returns every code, by area in the catalogue's order, then by name.
func All() []Code {
	areas := map[string]int{}
	for _, c := range catalogue {
		if _, ok := areas[c.Area]; !ok {
			areas[c.Area] = len(areas)
		}
	}
	out := slices.Clone(catalogue)
	slices.SortStableFunc(out, func(a, b Code) int {
		return cmp.Or(cmp.Compare(areas[a.Area], areas[b.Area]), strings.Compare(a.Name, b.Name))
	})
	return out
}

// Markdown is the catalogue as docs/codes.md holds it.
func Markdown() string {
	var b strings.Builder
	b.WriteString(`# Error codes

Every code a job's ` + "`run.error_code`" + `, a history record or a log line's ` + "`error_code`" + ` can carry. This
file is generated from the catalogue in [` + "`internal/codes`" + `](../internal/codes/codes.go) (` + "`logist help codes`" + ` prints
it too); a test fails when they differ.

- **kind**: ` + "`error`" + ` (something failed; logged at ERROR with ` + "`\"type\": \"error\"`" + `), ` + "`warning`" + ` (what was done
  stands; logged at WARN with ` + "`\"type\": \"warning\"`" + `), ` + "`info`" + ` (the job waits for a person by design).
- **stops**: the job does not go on by itself (it waits for a steward, halts, or is not run again). Codes that
  are retried automatically first stop it once their retries are used up.

A workflow may also stop a job with one of its own outcome names (the protocol's ` + "`REJECTED`" + `, ` + "`BLOCKED`" + `…, where
its workflow sends them to a steward); those are the workflow's data, listed in its documentation.
`)
	area := ""
	for _, c := range All() {
		if c.Area != area {
			area = c.Area
			fmt.Fprintf(&b, "\n## %s\n\n| code | kind | stops | meaning |\n|---|---|---|---|\n", area)
		}
		stops := "no"
		if c.Stops {
			stops = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", c.Name, c.Kind, stops, strings.ReplaceAll(c.Meaning, "|", `\|`))
	}
	return b.String()
}

// Text is the catalogue for a terminal (logist help codes).
func Text() string {
	var b strings.Builder
	width := 0
	for _, c := range catalogue {
		width = max(width, len(c.Name))
	}
	area := ""
	for _, c := range All() {
		if c.Area != area {
			if area != "" {
				b.WriteByte('\n')
			}
			area = c.Area
			fmt.Fprintf(&b, "%s:\n", area)
		}
		stops := ""
		if c.Stops {
			stops = ", stops"
		}
		fmt.Fprintf(&b, "  %-*s  %s%s: %s\n", width, c.Name, c.Kind, stops, c.Meaning)
	}
	return b.String()
}
