// Package protocol is the agent protocol of seed 003 (Planner, Critic,
// Executor, Auditor) as Logist runs it: session states, the event types
// and which role may emit each, role keys and event signatures, the
// policy guards, the content-addressed artifact store, the tools Logist
// executes for the Executor, and the verifier that checks a whole trace.
//
// Events are history records (history.TypeEvent) of the job: the history's
// envelope chains and signs every record with the daemon's key; events are
// chained again among themselves (ProtocolEvent.PrevEvent) and the
// mandatory types are signed with the emitting role's own key.
package protocol

// Session states (seed 003, "Session Lifecycle").
type State string

const (
	Initialized State = "initialized"
	Planning    State = "planning"
	Reviewing   State = "reviewing"
	Executing   State = "executing"
	Claiming    State = "claiming"
	Auditing    State = "auditing"
	Completed   State = "completed"
	Failed      State = "failed"
	Aborted     State = "aborted"
)

// Roles.
const (
	Planner  = "planner"
	Critic   = "critic"
	Executor = "executor"
	Auditor  = "auditor"
	// System is Logist itself (session events, tool execution).
	System = "SYSTEM"
)

// Event types.
const (
	SessionInitialized     = "session_initialized"
	ProposalCreated        = "proposal_created"
	ProposalReviewed       = "proposal_reviewed"
	ToolIntentSigned       = "tool_intent_signed"
	ToolIntentReviewed     = "tool_intent_reviewed"
	ToolExecutionStarted   = "tool_execution_started"
	ToolExecutionCompleted = "tool_execution_completed"
	ToolExecutionFailed    = "tool_execution_failed"
	ClaimIssued            = "claim_issued"
	ClaimChallenged        = "claim_challenged"
	FinalStatementSigned   = "final_statement_signed"
	VerificationStarted    = "verification_run_started"
	VerificationCompleted  = "verification_run_completed"
	SessionFailed          = "session_failed"
	SessionAborted         = "session_aborted"
)

// Mandatory signed types (seed 003): signed by the emitting role's key.
var Mandatory = map[string]bool{
	ProposalCreated: true, ToolIntentSigned: true, ClaimIssued: true,
	ClaimChallenged: true, FinalStatementSigned: true, VerificationCompleted: true,
}

// Emitters is the role guard: the only role that may emit each type.
var Emitters = map[string]string{
	SessionInitialized:     System,
	ProposalCreated:        Planner,
	ProposalReviewed:       Critic,
	ToolIntentSigned:       Executor,
	ToolIntentReviewed:     Critic,
	ToolExecutionStarted:   System,
	ToolExecutionCompleted: System,
	ToolExecutionFailed:    System,
	ClaimIssued:            Executor,
	ClaimChallenged:        Critic,
	FinalStatementSigned:   Planner,
	VerificationStarted:    Auditor,
	VerificationCompleted:  Auditor,
	SessionFailed:          System,
	SessionAborted:         System,
}

// Failure classes `logist verify` and the verifier report (seed 003).
const (
	FailSignatureInvalid = "signature_invalid"
	FailChainBreak       = "chain_break"
	FailHashMismatch     = "hash_mismatch"
	FailRolePolicy       = "role_policy_violation"
	FailSchemaInvalid    = "schema_invalid"
	FailMissingArtifact  = "missing_artifact"
	FailOrdering         = "ordering_violation"
	FailFinalization     = "finalization_violation"
)
