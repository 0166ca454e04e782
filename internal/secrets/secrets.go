// Package secrets keeps secret values out of what Logist records: a
// Redactor replaces the values of the environment variables a manifest marks
// secret, and a Cipher encrypts prompt and answer content at rest (AES-GCM)
// for jobs that opt in.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/logist/logist/internal/atomicfile"
)

// Redactor replaces secret values with [REDACTED:NAME].
type Redactor struct{ r *strings.Replacer }

// NewRedactor builds a redactor for the named variables' values. Longer
// values are replaced first, so a secret containing another is not split.
func NewRedactor(names []string, getenv func(string) string) *Redactor {
	type pair struct{ name, value string }
	var ps []pair
	for _, n := range names {
		if v := getenv(n); v != "" {
			ps = append(ps, pair{n, v})
		}
	}
	if len(ps) == 0 {
		return nil
	}
	sort.Slice(ps, func(i, j int) bool { return len(ps[i].value) > len(ps[j].value) })
	var args []string
	for _, p := range ps {
		args = append(args, p.value, "[REDACTED:"+p.name+"]")
	}
	return &Redactor{strings.NewReplacer(args...)}
}

// Redact replaces every secret value in s. A nil Redactor returns s.
func (r *Redactor) Redact(s string) string {
	if r == nil || s == "" {
		return s
	}
	return r.r.Replace(s)
}

// KeyFile is the content key, in the jobs folder's .logist unless KeyEnv
// names another file.
const KeyFile = "content.key"

// KeyEnv names the content key file when it is kept outside the jobs
// folder (a copy or backup of the folder then holds sealed content without
// its key). logistd and logist must both see the same setting.
const KeyEnv = "LOGIST_CONTENT_KEY_FILE"

// KeyPath is where the content key of the jobs folder jobsDir is: the file
// KeyEnv names (getenv; nil: the process's environment), else
// <jobsDir>/<dotDir>/content.key.
func KeyPath(jobsDir, dotDir string, getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if p := getenv(KeyEnv); p != "" {
		return p
	}
	return filepath.Join(jobsDir, dotDir, KeyFile)
}

// Prefix marks an encrypted field.
const Prefix = "enc:v1:"

// Cipher encrypts history content with AES-256-GCM.
type Cipher struct {
	aead cipher.AEAD
	fpr  string
}

// LoadOrCreateCipher loads the content key file p (KeyPath), creating it
// (0600, in a 0700 folder) if missing: whole or not at all, once, so
// processes racing to create it use the same key (atomicfile.CreateExclusive,
// whose rules also say what a crash may leave).
func LoadOrCreateCipher(p string) (*Cipher, error) {
	if err := atomicfile.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, err
	}
	b, _, err := atomicfile.ReadOrCreate(p, 0o600, func() ([]byte, error) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		return []byte(base64.StdEncoding.EncodeToString(key) + "\n"), nil
	})
	if err != nil {
		return nil, fmt.Errorf("content key: %w", err)
	}
	return parseCipher(p, b)
}

// LoadCipher loads a content key file.
func LoadCipher(p string) (*Cipher, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("content key: %w", err)
	}
	return parseCipher(p, b)
}

// parseCipher reads a content key file's content (32 bytes in base64).
func parseCipher(p string, b []byte) (*Cipher, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("content key %s is malformed", p)
	}
	return newCipher(key)
}

func newCipher(key []byte) (*Cipher, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("logist content key fingerprint v1\x00"), key...))
	return &Cipher{aead: aead, fpr: hex.EncodeToString(sum[:16])}, nil
}

// Fingerprint names the key without revealing it (a hash of it under a
// label of its own): cluster nodes compare theirs with the one a sealed
// job's records were written with.
func (c *Cipher) Fingerprint() string { return c.fpr }

// Seal encrypts s; aad binds the ciphertext to its job (a ciphertext moved
// to another job does not open).
func (c *Cipher) Seal(s, aad string) string {
	if s == "" || strings.HasPrefix(s, Prefix) {
		return s
	}
	nonce := make([]byte, c.aead.NonceSize())
	rand.Read(nonce)
	ct := c.aead.Seal(nonce, nonce, []byte(s), []byte(aad))
	return Prefix + base64.StdEncoding.EncodeToString(ct)
}

// Open decrypts a sealed field; other strings are returned as they are.
func (c *Cipher) Open(s, aad string) (string, error) {
	if !strings.HasPrefix(s, Prefix) {
		return s, nil
	}
	ct, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, Prefix))
	n := c.aead.NonceSize()
	if err != nil || len(ct) < n {
		return "", errors.New("encrypted field is malformed")
	}
	pt, err := c.aead.Open(nil, ct[:n], ct[n:], []byte(aad))
	if err != nil {
		return "", errors.New("encrypted field does not open with this key")
	}
	return string(pt), nil
}

// Sealed reports whether s is an encrypted field.
func Sealed(s string) bool { return strings.HasPrefix(s, Prefix) }
