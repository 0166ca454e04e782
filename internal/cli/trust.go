package cli

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"path/filepath"
	"sync"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/signing"
)

// committedBySignature is jobstore.Store.Committed for the jobs folder dir:
// a manifest file is one a Logist transaction committed when the newest
// commit in the job's history names its SHA-256 and that record's
// signature verifies with the folder's key. Validating the file again
// would give the answer Logist gave when it wrote it, and compiling the
// manifest schema is most of what a read-only command like status costs.
// Anything else (no history, a hand edit, another key) is checked in full.
func committedBySignature(dir string) func(id string, sum [32]byte) bool {
	var once sync.Once
	var pub ed25519.PublicKey
	return func(id string, sum [32]byte) bool {
		once.Do(func() {
			pub, _ = signing.LoadPublic(filepath.Join(dir, signing.Dir, signing.PublicFile))
		})
		if pub == nil {
			return false
		}
		e, ok := history.LastCommitSeal(filepath.Join(dir, id))
		if !ok || e.Sum != hex.EncodeToString(sum[:]) || e.Key != signing.KeyID(pub) {
			return false
		}
		body := sha256.Sum256(e.Body)
		hb, herr := hex.DecodeString(e.Hash)
		sig, serr := base64.StdEncoding.DecodeString(e.Sig)
		return herr == nil && serr == nil && hex.EncodeToString(body[:]) == e.Hash && ed25519.Verify(pub, hb, sig)
	}
}
