package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Tools Logist executes for the Executor.
const (
	ToolShell     = "shell"
	ToolWriteFile = "write_file"
)

// Policy defaults.
const (
	DefaultMinEvidence        = 1
	DefaultToolTimeoutSeconds = 300
	DefaultMaxToolOutputBytes = 1 << 20
	DefaultCheckTimeout       = 600
)

// Policy is the protocol section of a job's manifest: the action guard's
// risk classes, the evidence guard's minimum, whether a tool failure may
// be followed by a fallback proposal, the tools and their limits, and the
// job's own verification checks.
type Policy struct {
	// ApprovalRisk are the risk classes whose intents need the Critic's
	// approval before they run (default ["high"]).
	ApprovalRisk []string `json:"approval_risk,omitempty"`
	// MinEvidence is the evidence guard's minimum number of artifact
	// references per claim (default 1; the seed requires references, so
	// it is never less).
	MinEvidence int `json:"min_evidence,omitempty"`
	// AllowFallback lets the Planner propose again during execution after
	// a tool failure or a blocked intent.
	AllowFallback bool `json:"allow_fallback,omitempty"`
	// Tools are the tools intents may run (default shell, write_file).
	Tools              []string `json:"tools,omitempty"`
	ToolTimeoutSeconds int      `json:"tool_timeout_seconds,omitempty"`
	MaxToolOutputBytes int64    `json:"max_tool_output_bytes,omitempty"`
	// Checks are the job's own verification commands (a test suite), run
	// in the workspace during auditing.
	Checks []Check `json:"checks,omitempty"`
	// MaxRounds bounds the Executor's tool rounds (intents, then Logist
	// runs them) before claims are due.
	MaxRounds int `json:"max_rounds,omitempty"`
}

// DefaultMaxRounds is Policy.MaxRounds when the manifest says nothing.
const DefaultMaxRounds = 5

// Check is one of the job's verification commands.
type Check struct {
	Name           string   `json:"name"`
	Argv           []string `json:"argv"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty"`
}

// WithDefaults fills what the manifest left out. An explicitly empty
// ApprovalRisk (a non-nil empty list) means no class needs approval.
func (p Policy) WithDefaults() Policy {
	if p.ApprovalRisk == nil {
		p.ApprovalRisk = []string{"high"}
	}
	if p.MinEvidence < DefaultMinEvidence {
		p.MinEvidence = DefaultMinEvidence
	}
	if p.Tools == nil {
		p.Tools = []string{ToolShell, ToolWriteFile}
	}
	if p.ToolTimeoutSeconds <= 0 {
		p.ToolTimeoutSeconds = DefaultToolTimeoutSeconds
	}
	if p.MaxToolOutputBytes <= 0 {
		p.MaxToolOutputBytes = DefaultMaxToolOutputBytes
	}
	if p.MaxRounds <= 0 {
		p.MaxRounds = DefaultMaxRounds
	}
	checks := make([]Check, len(p.Checks))
	for i, c := range p.Checks {
		if c.TimeoutSeconds <= 0 {
			c.TimeoutSeconds = DefaultCheckTimeout
		}
		checks[i] = c
	}
	p.Checks = checks
	return p
}

func (p Policy) needsApproval(risk string) bool {
	for _, r := range p.ApprovalRisk {
		if r == risk {
			return true
		}
	}
	return false
}

func (p Policy) allowsTool(tool string) bool {
	for _, t := range p.Tools {
		if t == tool {
			return true
		}
	}
	return false
}

// DecodePolicy reads a manifest's "protocol" section (empty: the
// defaults) and fills the defaults.
func DecodePolicy(raw []byte) (Policy, error) {
	var p Policy
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return p, fmt.Errorf("protocol policy: %w", err)
		}
	}
	return p.WithDefaults(), nil
}
