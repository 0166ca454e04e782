package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// A manifest holds two things: the job's configuration (what its author or
// a steward decided: task, workflow, agents, prompts, budgets, limits,
// schedule, ...) and the state Logist keeps while the job runs (status,
// phase, metrics, the short audit trail, run state). Config is the first
// alone: every steward command that changes configuration records the hash
// of the configuration it leaves (history.Steward.ConfigSHA256), so an
// audit can tell a recorded change from an unrecorded one.

// Config returns a copy of m without its run state: status, current phase,
// creation time, metrics, audit trail and run state are zero.
func (m *Manifest) Config() *Manifest {
	c := m.Clone()
	c.Status, c.CurrentPhase, c.CreatedAt = "", nil, ""
	c.Metrics, c.History, c.Run = Metrics{}, nil, RunState{}
	return c
}

// ConfigHash is the SHA-256 (hex) of m's configuration (Config) in its
// JSON encoding.
func (m *Manifest) ConfigHash() (string, error) {
	b, err := json.Marshal(m.Config())
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
