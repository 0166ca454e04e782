package cli

import (
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/secrets"
	"github.com/logist/logist/internal/signing"
)

// opener opens what encrypt_history sealed with the content key
// (secrets.KeyPath); whoever cannot read the key sees it sealed.
func (e *env) opener() *jobview.Opener {
	return jobview.NewOpener(secrets.KeyPath(e.store.Dir, signing.Dir, e.getenv))
}

// opened opens, for printing, the fields encrypt_history seals in a job's
// manifest file (manifest.MapAgentText).
func (e *env) opened(m *manifest.Manifest) *manifest.Manifest {
	if !m.EncryptHistory {
		return m
	}
	return e.opener().Manifest(m)
}
