// Package signing holds the Ed25519 key that signs every history record of
// a jobs folder. The daemon creates it on first start (the first steward
// command creates it if no daemon ever ran) in <jobs>/.logist/, readable only
// by its owner: whoever can read it can write signed history.
package signing

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/regfile"
)

// Dir is the folder, inside the jobs folder, that holds Logist's keys.
const Dir = ".logist"

// File names inside Dir.
const (
	PrivateFile = "signing.key"
	PublicFile  = "signing.pub"
)

// Key signs history records.
type Key struct {
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	id   string
}

// ID names the key: the first 16 hex digits of SHA-256 of the public key.
func (k *Key) ID() string { return k.id }

// Sign signs msg.
func (k *Key) Sign(msg []byte) []byte { return ed25519.Sign(k.priv, msg) }

// Public returns the public key.
func (k *Key) Public() ed25519.PublicKey { return k.pub }

// KeyID computes the id of a public key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// EncodePublic is the text form of a public key (base64), as stored in
// signing.pub.
func EncodePublic(pub ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(pub) }

// LoadOrCreate loads the jobs folder's key, creating it (0600, in a 0700
// folder) if there is none. Two processes racing to create it agree: the
// key file appears whole, only once (atomicfile.CreateExclusive, whose
// rules also say what a crash may leave), and the loser loads the
// winner's.
func LoadOrCreate(jobsDir string) (*Key, error) {
	dir := filepath.Join(jobsDir, Dir)
	if err := atomicfile.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	file := filepath.Join(dir, PrivateFile)
	b, created, err := atomicfile.ReadOrCreate(file, 0o600, func() ([]byte, error) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generate signing key: %w", err)
		}
		return []byte(base64.StdEncoding.EncodeToString(priv.Seed()) + "\n"), nil
	})
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	k, err := parseKey(file, b)
	if err != nil {
		return nil, err
	}
	// The public half is derived from the key: written by its creator
	// (over any left from a key lost before it, such as an empty key file
	// CreateExclusive replaced), and by whoever finds it missing, as the
	// next start after a crash between the two files does.
	pubFile := filepath.Join(dir, PublicFile)
	if _, serr := os.Stat(pubFile); created || errors.Is(serr, fs.ErrNotExist) {
		if werr := atomicfile.WriteFile(pubFile, []byte(EncodePublic(k.pub)+"\n"), 0o600); werr != nil {
			return nil, werr
		}
	}
	return k, nil
}

// Load loads the jobs folder's key.
func Load(jobsDir string) (*Key, error) {
	file := filepath.Join(jobsDir, Dir, PrivateFile)
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	return parseKey(file, b)
}

// parseKey reads a key file's content (the seed in base64).
func parseKey(file string, b []byte) (*Key, error) {
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("signing key %s is malformed", file)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	return &Key{priv: priv, pub: pub, id: KeyID(pub)}, nil
}

// LoadPublic reads a public key file (signing.pub or one given to verify).
// A file of several keys (a keyring: an export of a cluster, whose nodes
// each sign with their own key) gives its first; LoadKeyring gives all.
func LoadPublic(file string) (ed25519.PublicKey, error) {
	keys, err := LoadKeyring(file)
	if err != nil {
		return nil, err
	}
	return keys[0], nil
}

// LoadKeyring reads a file of public keys, one a line (a single key is a
// keyring of one).
func LoadKeyring(file string) ([]ed25519.PublicKey, error) {
	b, err := regfile.ReadFile(file) // never blocks on a FIFO, nor reads a device without end
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	var keys []ed25519.PublicKey
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		pub, err := base64.StdEncoding.DecodeString(line)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("public key %s is malformed", file)
		}
		keys = append(keys, ed25519.PublicKey(pub))
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("public key %s is malformed", file)
	}
	return keys, nil
}

// EncodeKeyring is the text form of a keyring (LoadKeyring reads it).
func EncodeKeyring(keys []ed25519.PublicKey) []byte {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(EncodePublic(k))
		b.WriteString("\n")
	}
	return []byte(b.String())
}
