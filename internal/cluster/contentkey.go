package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/secrets"
	"github.com/logist/logist/internal/signing"
)

// An encrypt_history job's records are sealed with the content key of
// the node that writes them. In a cluster every node is given the same
// key (LOGIST_CONTENT_KEY_FILE, secrets.KeyPath), and the database holds
// the key's fingerprint (never the key) as a file of the job's folder,
// shipped with the first unit a node commits under the job's fence: a
// node whose key is missing or another one gives the job back before it
// writes anything, rather than write records the other nodes, status and
// history could not open.

// fingerprintFile is that file, relative to the job's folder (outside
// its workspace: no agent sees it).
const fingerprintFile = ".content-key.fingerprint"

// errContentKey: this node cannot write the job's sealed records.
var errContentKey = errors.New("content key")

// checkContentKey decides whether this node may run the job in folder
// form dir, whose manifest file is manifestFile. A sealed job that has no
// fingerprint yet is given this node's: the first unit commits it.
func (n *Node) checkContentKey(dir string, manifestFile []byte) error {
	var m struct {
		EncryptHistory bool `json:"encrypt_history"`
	}
	if json.Unmarshal(manifestFile, &m) != nil || !m.EncryptHistory {
		return nil
	}
	id := filepath.Base(dir)
	path := secrets.KeyPath(n.Dir, signing.Dir, n.Getenv)
	c, err := secrets.LoadCipher(path)
	if err != nil {
		return fmt.Errorf("job %s has encrypt_history and this node cannot read the cluster's content key (%v): give every node the same key (LOGIST_CONTENT_KEY_FILE): %w", id, err, errContentKey)
	}
	stored, err := os.ReadFile(filepath.Join(dir, fingerprintFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return atomicfile.WriteFile(filepath.Join(dir, fingerprintFile), []byte(c.Fingerprint()+"\n"), 0o600)
	case err != nil:
		return err
	}
	if want := strings.TrimSpace(string(stored)); want != c.Fingerprint() {
		return fmt.Errorf("job %s has encrypt_history, sealed with the content key of fingerprint %s; this node's key %s has fingerprint %s: give every node the same key (LOGIST_CONTENT_KEY_FILE): %w",
			id, want, path, c.Fingerprint(), errContentKey)
	}
	return nil
}
