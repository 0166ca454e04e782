// Package agent calls the agents that play a workflow's roles. A Provider
// turns a Request into the agent's raw answer plus what the call cost; the
// runner validates the answer and decides what happens next.
package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
)

// Request is everything an agent is told for one call (seed 002's request
// structure plus where to work).
type Request struct {
	JobID           string         `json:"job_id"`
	Phase           string         `json:"phase"`
	Role            string         `json:"role"`
	ContextFiles    []string       `json:"context_files"`
	SystemPrompt    string         `json:"system_prompt"`
	TaskDescription string         `json:"task_description"`
	Prompt          string         `json:"prompt"`
	Metadata        map[string]any `json:"metadata"`
	Workspace       string         `json:"workspace"`
	// Not sent to agents:
	JobDir      string `json:"-"`
	Interaction int    `json:"-"`
	// CallIndex is how many answers this role has given before (the
	// scripted agent's cursor).
	CallIndex int `json:"-"`
	// FileWritten says the request file (RequestFile) already holds this
	// request: the engine wrote it while the intent was being made durable.
	FileWritten bool `json:"-"`
	// ReadOnly are workspace files (relative paths) the agent may read
	// but not write (a parliament's governed files): a contained program
	// gets them read-only (Protected).
	ReadOnly []string `json:"-"`
	// Next is the call the engine expects the job to make after this one
	// (internal/runner's prediction), nil when it expects none: a
	// contained command agent starts that call's sandbox ahead of it, if
	// a command agent plays it (spare.go).
	Next *NextCall `json:"-"`
}

// NextCall is a call the engine expects: the agent that plays it, its
// phase and role; its interaction is the one after the current call's.
type NextCall struct {
	Provider    Provider
	Phase, Role string
}

// Result is one call's raw outcome. Streaming providers fill it only when
// the answer is complete: partial output is never a result.
type Result struct {
	Raw       []byte
	CostUSD   float64
	Tokens    *history.Tokens
	SessionID string
	Stderr    string
	// Stdout is what a program that answers in a file (answer "file")
	// printed besides: kept for the record, never read as its answer.
	Stdout []byte
	// NoAnswer says why a program that answers in a file has no answer
	// (it wrote no file Logist may read; Raw is empty): the reason a
	// steward is given beside AGENT_EMPTY's.
	NoAnswer string
	// Metered, when the call went through the metering proxy: CostUSD
	// and Tokens are the proxy's figures, this the rest of them.
	Metered *Metered
}

// Provider runs one call. It must return when ctx is done, having stopped
// everything it started.
type Provider interface {
	Call(ctx context.Context, req *Request) (*Result, error)
}

// Error is a failed call. Transient errors (API and transport failures, an
// agent program that crashed) are retried automatically with backoff; the
// others need a steward.
type Error struct {
	Code      string
	Transient bool
	Msg       string
	// Partial is whatever the agent had produced; kept for the record,
	// never treated as an answer.
	Partial []byte
	Stderr  string
	CostUSD float64
	// Retake marks a call that broke off mid-answer (a cut stream): nothing
	// it produced is recorded as a response, and the same turn is asked
	// again with the same stored request (seed 004 §2.2.1).
	Retake bool
	// RetryAfter is how long the API asked us to wait before asking again
	// (HTTP Retry-After); the engine's backoff is never shorter.
	RetryAfter time.Duration
	// Metered, when the call went through the metering proxy: CostUSD is
	// the proxy's figure.
	Metered *Metered
	// Printed says, for AGENT_OUTPUT_LIMIT from a process, how much it
	// was held to and why ("printed more than N bytes…"): the wording
	// every caller that reports it uses.
	Printed string
}

func (e *Error) Error() string { return e.Code + ": " + e.Msg }

// AsError returns err as *Error if it is one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// New builds the provider a role's configuration names.
func New(cfg manifest.AgentConfig) (Provider, error) {
	switch cfg.Provider {
	case "script":
		return &Script{Steps: cfg.Script}, nil
	case "command":
		if cfg.Command == nil {
			return nil, &Error{Code: codes.AgentConfig, Msg: "command provider without command"}
		}
		if cfg.Command.Preset != "" {
			p, ok := LookupPreset(cfg.Command.Preset)
			if !ok {
				return nil, &Error{Code: codes.AgentConfig, Msg: fmt.Sprintf("unknown preset %q (known: %v)", cfg.Command.Preset, PresetNames())}
			}
			return &PresetCommand{Preset: p, Cfg: *cfg.Command, Model: cfg.Model}, nil
		}
		return &Command{Cfg: *cfg.Command, Model: cfg.Model}, nil
	case "human":
		return Human{}, nil
	case "http":
		if cfg.HTTP == nil {
			return nil, &Error{Code: codes.AgentConfig, Msg: "http provider without http"}
		}
		return &OpenAI{Cfg: *cfg.HTTP}, nil
	}
	return nil, &Error{Code: codes.AgentConfig, Msg: fmt.Sprintf("unknown provider %q", cfg.Provider)}
}
