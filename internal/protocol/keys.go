package protocol

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/logist/logist/internal/atomicfile"
)

// KeysDir is where a job keeps its role keys, relative to the job folder.
const KeysDir = ".protocol/keys"

// Roles are the roles that hold keys (System signs nothing of its own: its
// events are protected by the history's envelope signature).
var Roles = []string{Planner, Critic, Executor, Auditor}

// Keys are a job's per-role Ed25519 keys.
type Keys struct {
	priv map[string]ed25519.PrivateKey
}

// LoadOrCreateKeys loads the job's key for each role, creating the missing
// ones. A key is created once and reused for the whole life of the job, so
// the public keys recorded in session_initialized keep verifying; two
// processes racing to create one agree on the winner's.
func LoadOrCreateKeys(jobDir string, roles []string) (*Keys, error) {
	dir := filepath.Join(jobDir, KeysDir)
	if err := atomicfile.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// MkdirAll keeps an existing folder's mode; the keys must stay private.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	k := &Keys{priv: map[string]ed25519.PrivateKey{}}
	for _, role := range roles {
		if !validRoleName(role) {
			return nil, fmt.Errorf("protocol key: bad role name %q", role)
		}
		priv, err := loadOrCreateKey(filepath.Join(dir, role+".key"))
		if err != nil {
			return nil, fmt.Errorf("protocol key for %s: %w", role, err)
		}
		k.priv[role] = priv
	}
	return k, nil
}

func validRoleName(r string) bool {
	if r == "" || len(r) > 40 {
		return false
	}
	for _, c := range r {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// loadOrCreateKey loads a role's key file, creating it first if there is
// none (atomicfile.CreateExclusive: whole or not at all, once; its rules
// say what a crash may leave).
func loadOrCreateKey(file string) (ed25519.PrivateKey, error) {
	b, _, err := atomicfile.ReadOrCreate(file, 0o600, func() ([]byte, error) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		return []byte(base64.StdEncoding.EncodeToString(priv.Seed()) + "\n"), nil
	})
	if err != nil {
		return nil, err
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("key file %s is malformed", file)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// KeyID names a role's key: "<role>:<first 16 hex digits of sha256(pub)>".
func KeyID(role string, pub ed25519.PublicKey) string {
	s := sha256.Sum256(pub)
	return role + ":" + hex.EncodeToString(s[:8])
}

// EncodePublicKey is the text form recorded in session_initialized.
func EncodePublicKey(pub ed25519.PublicKey) string {
	return "ed25519:" + base64.StdEncoding.EncodeToString(pub)
}

// DecodePublicKey parses EncodePublicKey's form.
func DecodePublicKey(s string) (ed25519.PublicKey, error) {
	b64, ok := strings.CutPrefix(s, "ed25519:")
	if !ok {
		return nil, fmt.Errorf("public key %q: not ed25519:<base64>", s)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key %q is malformed", s)
	}
	return ed25519.PublicKey(b), nil
}

// Sign signs an event hash (its hex text, as bytes) with role's key.
func (k *Keys) Sign(role, hash string) (keyID, sig string, err error) {
	priv, ok := k.priv[role]
	if !ok {
		return "", "", fmt.Errorf("no protocol key for role %q", role)
	}
	pub := priv.Public().(ed25519.PublicKey)
	return KeyID(role, pub), base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(hash))), nil
}

// Public returns role -> "ed25519:<base64 public key>", the "roles" body of
// session_initialized.
func (k *Keys) Public() map[string]string {
	out := make(map[string]string, len(k.priv))
	for role, priv := range k.priv {
		out[role] = EncodePublicKey(priv.Public().(ed25519.PublicKey))
	}
	return out
}

// RoleNames lists the roles that have keys, sorted.
func (k *Keys) RoleNames() []string {
	out := make([]string, 0, len(k.priv))
	for r := range k.priv {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}
