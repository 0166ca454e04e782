// Package manifest reads, checks and writes job manifests (job.json): the
// seed 002 manifest plus what a job needs to run. Decoding is strict: the
// schema refuses unknown fields, and a manifest from a newer Logist is
// refused rather than half-read.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/robfig/cron/v3"

	"github.com/logist/logist/internal/jsonkeys"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/regfile"
	"github.com/logist/logist/internal/workflow"
	"github.com/logist/logist/schemas"
)

// CurrentVersion is the manifest schema_version this Logist writes.
const CurrentVersion = 1

// MaxSize bounds a manifest file; larger files are refused unread.
const MaxSize = 1 << 20

// Defaults for limits the manifest leaves out.
const (
	DefaultMaxRetries      = 3
	DefaultMaxAPIRetries   = 3
	DefaultBackoffMS       = 1000
	DefaultCallTimeoutSecs = 1800
	DefaultWorkflow        = "supervised"
)

// MaxPromptBytes bounds a role's prompt file (prompts), as MaxSize bounds
// the manifest that names it: the prompt goes whole into every request of
// the role (its record, its request file, the view), so a file of 50 MiB
// took logistd to 1.7 GiB of memory for one call; a megabyte is about a
// quarter of a million tokens.
const MaxPromptBytes = 1 << 20

// Manifest is a job's authoritative snapshot.
type Manifest struct {
	SchemaVersion        int                    `json:"schema_version"`
	JobID                string                 `json:"job_id"`
	Description          string                 `json:"description,omitempty"`
	Status               lifecycle.Status       `json:"status"`
	CurrentPhase         *string                `json:"current_phase"`
	CreatedAt            string                 `json:"created_at,omitempty"`
	Workflow             json.RawMessage        `json:"workflow,omitempty"`
	TaskDescription      string                 `json:"task_description"`
	ContextFiles         []string               `json:"context_files,omitempty"`
	Agents               map[string]AgentConfig `json:"agents"`
	Prompts              map[string]string      `json:"prompts,omitempty"`
	CostThreshold        *float64               `json:"cost_threshold,omitempty"`
	TimeThresholdMinutes *float64               `json:"time_threshold_minutes,omitempty"`
	Limits               *Limits                `json:"limits,omitempty"`
	Seed                 *int64                 `json:"seed,omitempty"`
	// Protocol is the protocol workflow's policy (internal/protocol.Policy);
	// kept raw here, decoded by the workflow that uses it.
	Protocol json.RawMessage `json:"protocol,omitempty"`
	// Game is a deliberation workflow's game configuration (the parliament's
	// members, the negotiation's scenario), decoded by the game.
	Game           json.RawMessage `json:"game,omitempty"`
	SecretEnv      []string        `json:"secret_env,omitempty"`
	EncryptHistory bool            `json:"encrypt_history,omitempty"`
	Workspace      *Workspace      `json:"workspace,omitempty"`
	// Sandbox is how the job's processes are contained ("" = the
	// daemon's default, auto unless logistd --sandbox says otherwise).
	Sandbox string `json:"sandbox,omitempty"`
	// SandboxNetwork is what network the job's contained processes reach
	// besides the metering proxy: none (the default) or host.
	SandboxNetwork string       `json:"sandbox_network,omitempty"`
	Schedule       *Schedule    `json:"schedule,omitempty"`
	ScheduledFrom  string       `json:"scheduled_from,omitempty"`
	ScheduledAt    string       `json:"scheduled_at,omitempty"`
	Metrics        Metrics      `json:"metrics"`
	History        []AuditEntry `json:"history"`
	Run            RunState     `json:"run"`

	// SandboxNetworkAllow are the hosts or host:port entries the job's
	// contained processes may reach besides the metering proxy, through
	// logistd's egress proxy, by host (docs/security.md).
	SandboxNetworkAllow []string `json:"sandbox_network_allow,omitempty"`
}

// AgentConfig says which provider plays a role and how.
type AgentConfig struct {
	Provider       string       `json:"provider"`
	Model          string       `json:"model,omitempty"`
	TimeoutSeconds float64      `json:"timeout_seconds,omitempty"`
	Script         []ScriptStep `json:"script,omitempty"`
	Command        *Command     `json:"command,omitempty"`
	HTTP           *HTTP        `json:"http,omitempty"`
}

// HTTP configures the http provider (OpenAI-compatible Chat Completions).
// Secrets are named by environment variable, never written here.
type HTTP struct {
	BaseURL          string            `json:"base_url"`
	Model            string            `json:"model"`
	APIKeyEnv        string            `json:"api_key_env,omitempty"`
	StructuredOutput string            `json:"structured_output,omitempty"`
	Temperature      *float64          `json:"temperature,omitempty"`
	MaxTokens        int               `json:"max_tokens,omitempty"`
	HeadersEnv       map[string]string `json:"headers_env,omitempty"`
	CAFile           string            `json:"ca_file,omitempty"`
	Price            *Price            `json:"price,omitempty"`
}

// Price is what a model costs in USD per million tokens.
type Price struct {
	InputPerMTok       float64  `json:"input_per_mtok"`
	OutputPerMTok      float64  `json:"output_per_mtok"`
	CachedInputPerMTok *float64 `json:"cached_input_per_mtok,omitempty"`
}

// ScriptStep is one answer of the built-in scripted agent.
type ScriptStep struct {
	Action        string            `json:"action,omitempty"`
	Summary       string            `json:"summary,omitempty"`
	EvidenceFiles []string          `json:"evidence_files,omitempty"`
	Files         map[string]string `json:"files,omitempty"`
	Raw           *string           `json:"raw,omitempty"`
	// Fields are added to the generated answer (a workflow role's own
	// fields, such as the protocol Planner's proposals).
	Fields  map[string]any `json:"fields,omitempty"`
	CostUSD float64        `json:"cost_usd,omitempty"`
	DelayMS int64          `json:"delay_ms,omitempty"`
	Error   string         `json:"error,omitempty"`
}

// Command configures the command provider.
type Command struct {
	// Preset names an agent CLI Logist knows how to run (claude-code,
	// codex, ...); Argv is then not needed.
	Preset  string   `json:"preset,omitempty"`
	Program string   `json:"program,omitempty"`
	Args    []string `json:"args,omitempty"`
	BaseURL string   `json:"base_url,omitempty"`
	// Session: "continue" (default) resumes the role's previous session on
	// a RETRY of the phase or a steward resume; "fresh" always starts cold.
	Session  string `json:"session,omitempty"`
	MaxTurns int    `json:"max_turns,omitempty"`
	Price    *Price `json:"price,omitempty"`

	Argv           []string          `json:"argv,omitempty"`
	Stdin          string            `json:"stdin,omitempty"`
	Answer         string            `json:"answer,omitempty"`
	EnvAllow       []string          `json:"env_allow,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	MaxOutputBytes int64             `json:"max_output_bytes,omitempty"`
}

// Workspace names what a job's workspace starts as: a clone of a git
// repository on a job branch of its own (Git), or a copy of a folder (Copy,
// an absolute path; .git is not copied). One of the two. It is made before
// the first phase (internal/runner), never changed after. It is made before
// the first phase (internal/runner), never changed after.
type Workspace struct {
	Git  *GitSource `json:"git,omitempty"`
	Copy string     `json:"copy,omitempty"`
}

// GitSource is a repository (an absolute path on the daemon's machine, or a
// URL its git can reach) and the ref the job starts from (default HEAD).
type GitSource struct {
	Repo string `json:"repo"`
	Ref  string `json:"ref,omitempty"`
}

// EnvAllowed is one name a command agent's env_allow lets through from the
// daemon's environment, with its JSON pointer in the manifest.
type EnvAllowed struct{ Pointer, Name string }

// EnvAllowed lists the names the command agents' env_allow let through, by
// role (sorted), then in the order given.
func (m *Manifest) EnvAllowed() []EnvAllowed {
	var out []EnvAllowed
	for _, role := range slices.Sorted(maps.Keys(m.Agents)) {
		if c := m.Agents[role].Command; c != nil {
			for i, n := range c.EnvAllow {
				out = append(out, EnvAllowed{Pointer: fmt.Sprintf("/agents/%s/command/env_allow/%d", role, i), Name: n})
			}
		}
	}
	return out
}

// EnvAllowNames is the names of EnvAllowed.
func (m *Manifest) EnvAllowNames() []string {
	var out []string
	for _, e := range m.EnvAllowed() {
		out = append(out, e.Name)
	}
	return out
}

// KeyEnvNames is the daemon variables an http agent's configuration names
// as its credentials (api_key_env, headers_env's values): secrets by what
// the manifest says they hold, whatever they are called.
func (m *Manifest) KeyEnvNames() []string {
	var out []string
	for _, role := range slices.Sorted(maps.Keys(m.Agents)) {
		if h := m.Agents[role].HTTP; h != nil {
			if h.APIKeyEnv != "" {
				out = append(out, h.APIKeyEnv)
			}
			for _, name := range slices.Sorted(maps.Keys(h.HeadersEnv)) {
				out = append(out, h.HeadersEnv[name])
			}
		}
	}
	return out
}

// IsGit says whether the job works in a git workspace.
func (m *Manifest) IsGit() bool { return m.Workspace != nil && m.Workspace.Git != nil }

// Schedule makes a manifest a template for recurring jobs.
type Schedule struct {
	Cron                       string   `json:"cron"`
	Timezone                   string   `json:"timezone,omitempty"`
	ConcurrencyPolicy          string   `json:"concurrency_policy,omitempty"`
	StartingDeadlineSeconds    *float64 `json:"starting_deadline_seconds,omitempty"`
	SuccessfulRunsHistoryLimit *int     `json:"successful_runs_history_limit,omitempty"`
	FailedRunsHistoryLimit     *int     `json:"failed_runs_history_limit,omitempty"`
	Suspend                    bool     `json:"suspend,omitempty"`
}

// Schedule states: whether a template fires (ScheduleState).
const (
	// ScheduleActive: each tick of its expression creates a run.
	ScheduleActive = "active"
	// SchedulePaused: no tick creates a run until a steward resumes it
	// (logist schedules pause|resume, or schedule.suspend written by hand).
	SchedulePaused = "paused"
	// ScheduleStopped: a steward halted the template (CANCELED, final); it
	// never fires again. Its runs are jobs of their own and go on.
	ScheduleStopped = "stopped"
)

// ScheduleState says whether template m fires: the one rule the scheduler,
// the steward and the CLI's listings follow ("" for a manifest without a
// schedule).
func (m *Manifest) ScheduleState() string {
	switch {
	case m.Schedule == nil:
		return ""
	case m.Status.Terminal():
		return ScheduleStopped
	case m.Schedule.Suspend:
		return SchedulePaused
	}
	return ScheduleActive
}

// Spec returns the cron schedule, parsed in its time zone: the one check of
// an expression (validation, the scheduler and the CLI alike). One that never
// matches, or an @every interval under MinEvery, is refused.
func (s *Schedule) Spec() (cron.Schedule, error) {
	spec := s.Cron
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		// robfig/cron reads a zone there, and one with no expression
		// after it ("TZ=UTC") panics its parser (v3.0.1: it slices to
		// the first space): the manifest stopped the daemon at intake.
		return nil, fmt.Errorf("cron %q: a time zone goes in schedule.timezone, not in the expression", s.Cron)
	}
	if s.Timezone != "" {
		if _, err := time.LoadLocation(s.Timezone); err != nil {
			return nil, fmt.Errorf("timezone %q: %v", s.Timezone, err)
		}
		spec = "CRON_TZ=" + s.Timezone + " " + spec
	}
	sch, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("cron %q: %v", s.Cron, err)
	}
	if d, ok := sch.(cron.ConstantDelaySchedule); ok && d.Delay < MinEvery {
		return nil, fmt.Errorf("cron %q: an @every interval must be at least %s (a 5-field expression ticks at most once a minute)", s.Cron, minEveryText)
	}
	// robfig/cron's Next searches five years ahead and gives the zero
	// time when nothing there matches (February 30th): such a schedule
	// never fires.
	if sch.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("cron %q: never matches (no time in the next five years fits it)", s.Cron)
	}
	return sch, nil
}

// MinEvery is the shortest @every interval a schedule may have: a
// 5-field cron expression ticks at most once a minute, and @every no more
// often (each tick makes a job folder, and runs that fail are kept).
const MinEvery = time.Minute

const minEveryText = "1m"

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Limits bounds retries and calls.
type Limits struct {
	MaxRetries         *int     `json:"max_retries,omitempty"`
	MaxAPIRetries      *int     `json:"max_api_retries,omitempty"`
	BackoffInitialMS   *int64   `json:"backoff_initial_ms,omitempty"`
	CallTimeoutSeconds *float64 `json:"call_timeout_seconds,omitempty"`
	// MaxParallelCalls bounds the calls a fan-out step makes at once.
	MaxParallelCalls *int `json:"max_parallel_calls,omitempty"`
	// MaxSnapshotBytes bounds one workspace snapshot's new content
	// (unset: snapshot.MaxBytes).
	MaxSnapshotBytes *int64 `json:"max_snapshot_bytes,omitempty"`
	// MaxAgentCalls is the job's calls budget (Budgets; unset: the
	// daemon's default).
	MaxAgentCalls *int `json:"max_agent_calls,omitempty"`
}

// Metrics are the job's accumulated spend.
type Metrics struct {
	CumulativeCost        float64 `json:"cumulative_cost"`         // cents
	CumulativeTimeSeconds float64 `json:"cumulative_time_seconds"` // agent execution time
	AgentCalls            int     `json:"agent_calls,omitempty"`
}

// AuditEntry is the manifest's short audit trail entry (seed 002 history).
type AuditEntry struct {
	Timestamp     string   `json:"timestamp,omitempty"`
	Role          string   `json:"role"`
	Action        string   `json:"action"`
	Phase         *string  `json:"phase,omitempty"`
	EvidenceFiles []string `json:"evidence_files,omitempty"`
	Note          string   `json:"note,omitempty"`
}

// RunState is runtime state Logist keeps between calls and across restarts.
type RunState struct {
	Reason          string   `json:"reason,omitempty"`
	ErrorCode       string   `json:"error_code,omitempty"`
	PhaseRetries    int      `json:"phase_retries,omitempty"`
	APIFailures     int      `json:"api_failures,omitempty"`
	Evidence        []string `json:"evidence,omitempty"`
	Feedback        string   `json:"feedback,omitempty"`
	PreviousSummary string   `json:"previous_summary,omitempty"`
	Guidance        string   `json:"guidance,omitempty"`
	LastSummary     string   `json:"last_summary,omitempty"`
	// SnapshotError is why the last recovery point has no workspace
	// snapshot (its cap was hit, the disk refused), until one succeeds.
	SnapshotError string `json:"snapshot_error,omitempty"`
	// GitError is why the last recovery point of a git workspace has no
	// commit on the job branch (git failed, or the workspace's repository
	// was refused: gitws.UnsafeRepoError), until one succeeds.
	GitError string `json:"git_error,omitempty"`
	// WorkflowState is the workflow's own state (the protocol session
	// state), where the workflow has one.
	WorkflowState   string `json:"workflow_state,omitempty"`
	CheckpointID    string `json:"checkpoint_id,omitempty"`
	LastScheduledAt string `json:"last_scheduled_at,omitempty"`
	// ScheduleResumedAt is when a steward last resumed the paused schedule
	// of a template (logist schedules resume): ticks before it were paused,
	// not missed, and are never caught up.
	ScheduleResumedAt string `json:"schedule_resumed_at,omitempty"`
	UpdatedAt         string `json:"updated_at,omitempty"`
	StartedAt         string `json:"started_at,omitempty"`
	// Sandbox is the containment the job's processes ran under, as
	// resolved at its last start ("bwrap+landlock", "landlock", "none").
	Sandbox    string `json:"sandbox,omitempty"`
	FinishedAt string `json:"finished_at,omitempty"`
	// DefaultBudgets are the daemon's defaults for the budgets the
	// manifest does not set, as the engine applied them at the job's last
	// step (Budgets).
	DefaultBudgets *Budgets `json:"default_budgets,omitempty"`
}

// Error is a manifest problem: which file, which field (JSON pointer), why.
type Error struct {
	File    string
	Pointer string
	Reason  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Pointer != "" {
		b.WriteString(": ")
		b.WriteString(e.Pointer)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

// Errors is a list of manifest problems found at once.
type Errors []*Error

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// tooNew is the reason a manifest written by a newer Logist is refused.
func tooNew(v int64) string {
	return fmt.Sprintf("version %d is newer than this logist supports (%d); upgrade logist", v, CurrentVersion)
}

// idChars reports whether id matches ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$:
// a loop, not a regular expression, whose compilation (the bounded
// repetition unrolled 127 times) cost every program's start a millisecond.
func idChars(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// IDRule is what a job id may hold (ValidID), as messages say it.
const IDRule = "letters, digits, '.', '_' and '-', at most 128, no '..'"

// ValidID reports whether id may name a job (and so a folder): no '/', no
// '..', no control characters.
func ValidID(id string) error {
	if !idChars(id) || strings.Contains(id, "..") {
		return fmt.Errorf("job id %q is invalid: use %s", id, IDRule)
	}
	return nil
}

// ReadFile reads and decodes a manifest file; see Decode.
func ReadFile(file string) (*Manifest, error) {
	data, err := regfile.ReadLimited(file, MaxSize)
	if err != nil {
		return nil, err
	}
	return Decode(file, data)
}

// Decode parses and checks a manifest: size, JSON syntax, version, schema,
// workflow and agents. file only names the source in errors.
func Decode(file string, data []byte) (*Manifest, error) { return decode(file, data, nil) }

// Check is Decode for data that DecodeTrusted has already decoded into m
// (unchanged since): every check Decode makes, in Decode's order and with
// its errors, without decoding data into a Manifest a second time. It
// returns m when data passes.
func Check(file string, data []byte, m *Manifest) (*Manifest, error) {
	if m == nil {
		return Decode(file, data)
	}
	return decode(file, data, m)
}

// decode is Decode, with data's strict decode already made (m) if not nil:
// that decode cannot fail where DecodeTrusted's succeeded on the same bytes.
// A panic of its checks (a fault of Logist's, or of a library it calls, as
// robfig/cron's was) is the manifest's refusal, not the end of the daemon
// whose intake read it, at every start (schemas.Guard).
func decode(file string, data []byte, m *Manifest) (*Manifest, error) {
	var out *Manifest
	err := schemas.Guard("the manifest's rules", func() (err error) {
		out, err = checks(file, data, m)
		return err
	})
	if fe, ok := err.(*schemas.FaultError); ok {
		return nil, &Error{File: file, Reason: fe.Error()}
	}
	return out, err
}

// checks is decode's work (a variable: tests make it fault).
var checks = func(file string, data []byte, m *Manifest) (*Manifest, error) {
	if len(data) > MaxSize {
		return nil, &Error{File: file, Reason: fmt.Sprintf("file is larger than %d bytes", MaxSize)}
	}
	if !json.Valid(data) {
		return nil, &Error{File: file, Reason: "invalid JSON: " + syntaxError(data)}
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, &Error{File: file, Reason: "invalid JSON: " + err.Error()}
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, &Error{File: file, Reason: "manifest must be a JSON object"}
	}
	if key, at := jsonkeys.DuplicateIn(data, doc); key != "" {
		// The schema and the engine would see the last of the two, a
		// person or another reader perhaps the first.
		return nil, &Error{File: file, Pointer: at, Reason: fmt.Sprintf("key %q is given twice in this object; give each key once (readers differ on which one counts)", key)}
	}
	if v, ok := obj["schema_version"]; ok {
		n, isNum := v.(json.Number)
		iv, err := n.Int64()
		if isNum && err == nil && iv > CurrentVersion {
			return nil, &Error{File: file, Pointer: "/schema_version", Reason: tooNew(iv)}
		}
	}
	if err := schemas.Validate(schemas.Manifest, doc); err != nil {
		var se *schemas.Error
		if errors.As(err, &se) {
			es := make(Errors, len(se.Violations))
			for i, v := range se.Violations {
				p := v.Pointer
				if p == "" {
					p = "/"
				}
				es[i] = &Error{File: file, Pointer: p, Reason: v.Reason}
			}
			return nil, es
		}
		return nil, &Error{File: file, Reason: err.Error()}
	}
	if m == nil {
		var err error
		if m, err = DecodeTrusted(file, data); err != nil {
			return nil, err
		}
	}
	if err := m.check(file); err != nil {
		return nil, err
	}
	return m, nil
}

// Incomplete reports whether data looks like a JSON document still being
// written: empty, or valid up to an unexpected end.
func Incomplete(data []byte) bool {
	if len(bytes.TrimSpace(data)) == 0 {
		return true
	}
	if json.Valid(data) {
		// What Unmarshal would find first, without building the
		// document: a placement asks this of every file it places.
		return false
	}
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	return errors.As(err, &se) && se.Offset >= int64(len(data)) && strings.Contains(se.Error(), "unexpected end")
}

func syntaxError(data []byte) string {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := 1, 1
		for _, c := range data[:min(int(se.Offset), len(data))] {
			if c == '\n' {
				line++
				col = 1
			} else {
				col++
			}
		}
		return fmt.Sprintf("%s at line %d column %d", se.Error(), line, col)
	}
	if err != nil {
		return err.Error()
	}
	return "trailing data after the JSON value"
}

func (m *Manifest) normalise() {
	if m.SchemaVersion == 0 {
		m.SchemaVersion = CurrentVersion
	}
	if m.Status == "" {
		m.Status = lifecycle.Pending
	}
	if m.History == nil {
		m.History = []AuditEntry{}
	}
}

// check does the semantic checks the schema cannot express.
func (m *Manifest) check(file string) error {
	var es Errors
	wf, err := m.ResolveWorkflow()
	if err != nil {
		e := &Error{File: file, Pointer: "/workflow", Reason: err.Error()}
		var p *workflow.Problem
		if errors.As(err, &p) && m.InlineWorkflow() {
			e.Pointer, e.Reason = "/workflow"+p.Pointer, p.Reason
		}
		es = append(es, e)
	} else {
		if m.InlineWorkflow() {
			// What can never be right (a built-in workflow is held to it
			// by its tests); ResolveWorkflow still reads it, so that a
			// history recorded on it replays.
			refused, _ := wf.Routes()
			for _, p := range refused {
				es = append(es, &Error{File: file, Pointer: "/workflow" + p.Pointer, Reason: p.Reason})
			}
		}
		for _, role := range wf.Roles() {
			if _, ok := m.Agents[role]; !ok {
				es = append(es, &Error{File: file, Pointer: "/agents", Reason: fmt.Sprintf("workflow %s needs an agent for role %q", wf.Name, role)})
			}
		}
		if (m.Status == lifecycle.Running || m.Status == lifecycle.Reviewing) && m.CurrentPhase == nil {
			es = append(es, &Error{File: file, Pointer: "/current_phase", Reason: fmt.Sprintf("a %s job must name its current phase; leave status out (PENDING) to start from the beginning", m.Status)})
		}
		if m.CurrentPhase != nil {
			if _, ok := wf.Phases[*m.CurrentPhase]; !ok {
				es = append(es, &Error{File: file, Pointer: "/current_phase", Reason: fmt.Sprintf("phase %q is not in workflow %s", *m.CurrentPhase, wf.Name)})
			}
		}
	}
	for _, role := range slices.Sorted(maps.Keys(m.Agents)) {
		if a := m.Agents[role]; a.Provider == "command" && a.Command != nil {
			if len(a.Command.Argv) > 0 && strings.TrimSpace(a.Command.Argv[0]) == "" {
				es = append(es, &Error{File: file, Pointer: "/agents/" + role + "/command/argv/0", Reason: "the program to run is empty: name a program on logistd's PATH or an absolute path"})
			}
			if a.Command.Answer == "file" && !hasPlaceholder(a.Command.Argv, "{answer_file}") {
				es = append(es, &Error{File: file, Pointer: "/agents/" + role + "/command/argv", Reason: `answer "file" needs {answer_file} in argv so the program knows where to write`})
			}
		}
	}
	// The schema compares exact decimals; a positive value too small for a
	// float64 decodes as 0, which the schema would refuse once re-encoded.
	if m.TimeThresholdMinutes != nil && !(*m.TimeThresholdMinutes > 0) {
		es = append(es, &Error{File: file, Pointer: "/time_threshold_minutes", Reason: "must be > 0"})
	}
	if m.Limits != nil && m.Limits.CallTimeoutSeconds != nil && !(*m.Limits.CallTimeoutSeconds > 0) {
		es = append(es, &Error{File: file, Pointer: "/limits/call_timeout_seconds", Reason: "must be > 0"})
	}
	if m.Schedule != nil {
		if _, err := m.Schedule.Spec(); err != nil {
			ptr := "/schedule/cron"
			if strings.HasPrefix(err.Error(), "timezone") {
				ptr = "/schedule/timezone"
			}
			es = append(es, &Error{File: file, Pointer: ptr, Reason: err.Error()})
		}
	}
	for i, p := range m.ContextFiles {
		if c := path.Clean(p); path.IsAbs(p) || c == ".." || strings.HasPrefix(c, "../") {
			es = append(es, &Error{File: file, Pointer: fmt.Sprintf("/context_files/%d", i), Reason: "path must stay inside the workspace"})
		}
	}
	es = append(es, m.Workspace.check(file)...)
	if m.JobID != "" {
		if err := m.BranchableID(m.JobID); err != nil {
			es = append(es, &Error{File: file, Pointer: "/job_id", Reason: err.Error()})
		}
	}
	if len(es) > 0 {
		return es
	}
	return nil
}

// check refuses a source the daemon could read differently from what its
// author meant: a relative path (relative to which folder?) or an argument
// git would take for an option.
func (w *Workspace) check(file string) Errors {
	if w == nil {
		return nil
	}
	var es Errors
	if g := w.Git; g != nil {
		switch r := g.Repo; {
		case strings.HasPrefix(r, "-"):
			es = append(es, &Error{File: file, Pointer: "/workspace/git/repo", Reason: "may not start with '-'"})
		case !path.IsAbs(r) && !strings.Contains(r, "://") && !scpLike().MatchString(r):
			es = append(es, &Error{File: file, Pointer: "/workspace/git/repo", Reason: fmt.Sprintf("%q: name a local repository by its absolute path (logistd's folder is not yours), or give a URL", r)})
		}
		if strings.HasPrefix(g.Ref, "-") {
			es = append(es, &Error{File: file, Pointer: "/workspace/git/ref", Reason: "may not start with '-'"})
		}
	}
	if w.Copy != "" && !path.IsAbs(w.Copy) {
		es = append(es, &Error{File: file, Pointer: "/workspace/copy", Reason: fmt.Sprintf("%q: name the folder by its absolute path", w.Copy)})
	}
	return es
}

// BranchableID refuses, for a job with a git workspace, a job id that
// makes a job branch (logist/ID) git will not name: one ending in "." or
// ".lock" (git check-ref-format; ValidID already keeps out "..", '/',
// and every character git refuses). The job could never start. Other
// jobs may take any valid id.
func (m *Manifest) BranchableID(id string) error {
	if !m.IsGit() {
		return nil
	}
	for _, end := range []string{".lock", "."} {
		if strings.HasSuffix(id, end) {
			return fmt.Errorf("job id %q ends in %q, so its job branch logist/%s would be a name git refuses: choose an id that does not", id, end, id)
		}
	}
	return nil
}

// scpLike is git's user@host:path form of an ssh URL.
var scpLike = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^/]`) })

func hasPlaceholder(argv []string, ph string) bool {
	for _, a := range argv {
		if strings.Contains(a, ph) {
			return true
		}
	}
	return false
}

// InlineWorkflow reports whether the manifest defines its workflow
// itself rather than naming a built-in one.
func (m *Manifest) InlineWorkflow() bool {
	raw := bytes.TrimSpace(m.Workflow)
	return len(raw) > 0 && raw[0] == '{'
}

// Warnings are what the manifest's check lets pass but is likely a
// mistake in its workflow and prompts, each naming its field: an inline
// workflow's (workflow.Warnings), and a prompt for a role no phase of the
// workflow plays (it would never be used).
func (m *Manifest) Warnings() []string {
	wf, err := m.ResolveWorkflow()
	if err != nil {
		return nil // the check reports it
	}
	var out []string
	if m.InlineWorkflow() {
		for _, p := range wf.Warnings() {
			if p.Pointer != "" {
				p.Pointer = "/workflow" + p.Pointer
			}
			out = append(out, p.Error())
		}
	}
	roles := wf.Roles()
	for _, role := range slices.Sorted(maps.Keys(m.Prompts)) {
		if !slices.Contains(roles, role) {
			out = append(out, fmt.Sprintf("/prompts/%s: workflow %s has no role %q (its roles: %s): this prompt is never used",
				role, wf.Name, role, strings.Join(roles, ", ")))
		}
	}
	return out
}

// ResolveWorkflow returns the job's workflow: a built-in by name (default
// supervised) or the inline definition.
func (m *Manifest) ResolveWorkflow() (*workflow.Workflow, error) {
	raw := bytes.TrimSpace(m.Workflow)
	if len(raw) == 0 {
		return workflow.Builtin(DefaultWorkflow)
	}
	if raw[0] == '"' {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return nil, err
		}
		return workflow.Builtin(name)
	}
	var w workflow.Workflow
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, err
	}
	if err := w.Check(); err != nil {
		return nil, err
	}
	return &w, nil
}

// Encode renders the manifest as indented JSON with a trailing newline.
// A manifest larger than MaxSize is an error (CheckSize).
func (m *Manifest) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	if err := CheckSize(m.JobID, b); err != nil {
		return nil, err
	}
	return b, nil
}

// ErrTooLarge says a manifest would be larger than MaxSize.
var ErrTooLarge = errors.New("manifest too large")

// CheckSize refuses an encoded manifest that Logist could not read back
// (larger than MaxSize): every writer checks before writing, so no job is
// ever left with a manifest its own daemon lists as INVALID.
func CheckSize(jobID string, b []byte) error {
	if len(b) > MaxSize {
		return fmt.Errorf("%w: job %s's manifest would be %d bytes, larger than the %d logist reads; not written", ErrTooLarge, jobID, len(b), MaxSize)
	}
	return nil
}

// Phase returns the current phase or "".
func (m *Manifest) Phase() string {
	if m.CurrentPhase == nil {
		return ""
	}
	return *m.CurrentPhase
}

// SetPhase sets or clears the current phase.
func (m *Manifest) SetPhase(p string) {
	if p == "" {
		m.CurrentPhase = nil
		return
	}
	m.CurrentPhase = &p
}

// MaxRetries returns the RETRY limit per phase.
func (m *Manifest) MaxRetries() int {
	if m.Limits != nil && m.Limits.MaxRetries != nil {
		return *m.Limits.MaxRetries
	}
	return DefaultMaxRetries
}

// DefaultMaxParallelCalls is how many turns of a fan-out run at once.
const DefaultMaxParallelCalls = 4

// MaxParallelCalls returns how many calls a fan-out step makes at once.
func (m *Manifest) MaxParallelCalls() int {
	if m.Limits != nil && m.Limits.MaxParallelCalls != nil && *m.Limits.MaxParallelCalls > 0 {
		return *m.Limits.MaxParallelCalls
	}
	return DefaultMaxParallelCalls
}

// MaxAPIRetries returns how often an API/transport error is retried.
func (m *Manifest) MaxAPIRetries() int {
	if m.Limits != nil && m.Limits.MaxAPIRetries != nil {
		return *m.Limits.MaxAPIRetries
	}
	return DefaultMaxAPIRetries
}

// BackoffInitial returns the first API-retry delay.
func (m *Manifest) BackoffInitial() time.Duration {
	if m.Limits != nil && m.Limits.BackoffInitialMS != nil {
		return Duration(float64(*m.Limits.BackoffInitialMS), time.Millisecond)
	}
	return DefaultBackoffMS * time.Millisecond
}

// CallTimeout returns the per-call timeout for role.
func (m *Manifest) CallTimeout(role string) time.Duration {
	if a, ok := m.Agents[role]; ok && a.TimeoutSeconds > 0 {
		return seconds(a.TimeoutSeconds)
	}
	if m.Limits != nil && m.Limits.CallTimeoutSeconds != nil {
		return seconds(*m.Limits.CallTimeoutSeconds)
	}
	return DefaultCallTimeoutSecs * time.Second
}

func seconds(f float64) time.Duration { return Duration(f, time.Second) }

// Duration is the one conversion of a number from outside (a manifest's
// timeouts, budgets and delays, an answer's or a server's wait) into a
// duration of that many units: past the longest duration (292 years) it
// is the longest, not a conversion that wraps round to a negative one (a
// time budget of 1e9 minutes read as already spent, a timeout of 1e10 s
// as already passed); NaN, 0 and negatives are 0.
func Duration(v float64, unit time.Duration) time.Duration {
	ns := v * float64(unit)
	switch {
	case !(ns > 0):
		return 0
	case ns >= math.MaxInt64: // float64(math.MaxInt64) is 2^63
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// TimeBudget returns the time budget the manifest itself sets, or 0 when
// it sets none (TimeBudgetUnder adds the daemon's default).
func (m *Manifest) TimeBudget() time.Duration { return m.TimeBudgetUnder(nil) }

// OverCost reports whether the job is at or over the cost budget the
// manifest sets (Exhausted is the rule, with the daemon's defaults).
func (m *Manifest) OverCost() bool { return m.over(BudgetCost, nil) }

// OverTime reports whether the job has used the time budget the manifest
// sets.
func (m *Manifest) OverTime() bool { return m.over(BudgetTime, nil) }

// Audit appends a short entry to the manifest's history. It keeps at most
// MaxAuditEvidence of the evidence paths and the first MaxAuditNote bytes
// of the note (history.jsonl has them all): a steward's text is in the
// manifest once (run.reason, run.guidance), not again in each entry.
func (m *Manifest) Audit(now time.Time, role, action, note string, evidence []string) {
	if len(evidence) > MaxAuditEvidence {
		evidence = evidence[:MaxAuditEvidence:MaxAuditEvidence]
	}
	note = auditNote(note)
	e := AuditEntry{Timestamp: now.UTC().Format(time.RFC3339Nano), Role: role, Action: action, Note: note, EvidenceFiles: evidence}
	if m.CurrentPhase != nil {
		p := *m.CurrentPhase
		e.Phase = &p
	}
	m.History = append(m.History, e)
	if n := len(m.History) - MaxAuditEntries; n > 0 {
		// A short trail: history.jsonl holds every record. Unbounded, the
		// manifest every commit rewrites (and every status reads) would grow
		// with the job, past MaxSize on a long one.
		m.History = append(m.History[:0:0], m.History[n:]...)
	}
}

// MaxAuditEntries bounds the manifest's audit trail to its newest entries.
const MaxAuditEntries = 50

// MaxAuditNote bounds an audit entry's note, in bytes (the text cut at a
// character's start, then excerptCut): with MaxAuditEntries entries, a few
// tens of KiB at most, whatever the notes were.
const MaxAuditNote = 1024

// excerptCut ends a text Excerpt cut.
const excerptCut = "…[truncated]"

// auditNote is note as an audit entry keeps it (Excerpt, MaxAuditNote).
func auditNote(note string) string { return Excerpt(note, MaxAuditNote) }

// Excerpt is s whole up to n bytes, else its first bytes up to a
// character's start (never half a UTF-8 sequence) and "…[truncated]": the
// one way Logist shortens a text it keeps (audit notes, the engine's
// excerpts of an agent's output and summaries).
func Excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + excerptCut
}

// MaxAuditEvidence bounds the evidence paths an audit entry keeps: with
// MaxAuditEntries entries and the answer schema's bounds (100 paths of at
// most 1024 bytes) the trail stays far below MaxSize.
const MaxAuditEvidence = 4
