package jobview

import (
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/secrets"
)

// Opener opens, for the steward's eyes, what encrypt_history sealed: the
// history's content and job.json's agent text (manifest.MapAgentText). The
// CLI and the console show jobs through one; without a readable content
// key it leaves the text sealed.
type Opener struct{ c *secrets.Cipher }

// NewOpener loads the content key file keyPath (secrets.KeyPath). A key
// that cannot be read gives an Opener that opens nothing.
func NewOpener(keyPath string) *Opener {
	c, err := secrets.LoadCipher(keyPath)
	if err != nil {
		return &Opener{}
	}
	return &Opener{c: c}
}

// open opens one sealed value of job id (other values pass unchanged).
func (o *Opener) open(id string) func(string) string {
	return func(s string) string {
		if p, err := o.c.Open(s, id); err == nil {
			return p
		}
		return s
	}
}

// Manifest opens m's sealed agent text in place and returns m.
func (o *Opener) Manifest(m *manifest.Manifest) *manifest.Manifest {
	if o != nil && o.c != nil && m != nil && m.EncryptHistory {
		m.MapAgentText(o.open(m.JobID))
	}
	return m
}

// Record opens the sealed content of a record of job id in place.
func (o *Opener) Record(id string, r *history.Record) {
	if o != nil && o.c != nil {
		r.Content(o.open(id))
	}
}

// Records opens every record of job id in place.
func (o *Opener) Records(id string, recs []history.Record) {
	for i := range recs {
		o.Record(id, &recs[i])
	}
}

// Reveal is Record for job id as a function (nil: nothing to open), the
// form verify and the record printers take.
func (o *Opener) Reveal(id string) func(*history.Record) {
	if o == nil || o.c == nil {
		return nil
	}
	return func(r *history.Record) { o.Record(id, r) }
}

// Text opens one sealed value s of job id without touching where it came
// from (a listing's shared entry).
func (o *Opener) Text(id, s string) string {
	if o == nil || o.c == nil {
		return s
	}
	return o.open(id)(s)
}
