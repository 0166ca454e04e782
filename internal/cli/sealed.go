package cli

import (
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/secrets"
	"github.com/logist/logist/internal/signing"
)

// opened opens, for printing, the fields encrypt_history seals in a job's
// manifest file (manifest.MapAgentText) with the jobs folder's content
// key; whoever cannot read the key sees them sealed.
func (e *env) opened(m *manifest.Manifest) *manifest.Manifest {
	if !m.EncryptHistory {
		return m
	}
	c, err := secrets.LoadCipher(secrets.KeyPath(e.store.Dir, signing.Dir, e.getenv))
	if err != nil {
		return m
	}
	m.MapAgentText(func(s string) string {
		if p, err := c.Open(s, m.JobID); err == nil {
			return p
		}
		return s
	})
	return m
}
