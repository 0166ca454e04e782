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
// key file appears whole, only once, and the loser loads the winner's.
func LoadOrCreate(jobsDir string) (*Key, error) {
	dir := filepath.Join(jobsDir, Dir)
	k, err := Load(jobsDir)
	if err == nil {
		// A crash between writing the two halves leaves no public file.
		pubFile := filepath.Join(dir, PublicFile)
		if _, serr := os.Stat(pubFile); errors.Is(serr, fs.ErrNotExist) {
			if werr := atomicfile.WriteFile(pubFile, []byte(EncodePublic(k.pub)+"\n"), 0o600); werr != nil {
				return nil, werr
			}
		}
		return k, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := atomicfile.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	// The public key first: a key file without its public half would be
	// unverifiable.
	if err := atomicfile.WriteFile(filepath.Join(dir, PublicFile+"."+KeyID(pub)), []byte(EncodePublic(pub)+"\n"), 0o600); err != nil {
		return nil, err
	}
	// The key file appears whole or not at all: written and fsync'd under
	// a temporary name, then hard-linked into place, which fails if another
	// process won the race. (Created in place, a crash between creating
	// and writing it left an empty key file that no start could load.)
	seed := []byte(base64.StdEncoding.EncodeToString(priv.Seed()) + "\n")
	err = createWhole(filepath.Join(dir, PrivateFile), seed)
	if errors.Is(err, fs.ErrExist) {
		os.Remove(filepath.Join(dir, PublicFile+"."+KeyID(pub)))
		return Load(jobsDir)
	}
	if err != nil {
		return nil, fmt.Errorf("write signing key: %w", err)
	}
	if err := os.Rename(filepath.Join(dir, PublicFile+"."+KeyID(pub)), filepath.Join(dir, PublicFile)); err != nil {
		return nil, fmt.Errorf("write public key: %w", err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return nil, err
	}
	return &Key{priv: priv, pub: pub, id: KeyID(pub)}, nil
}

// createWhole creates file with data unless it exists (fs.ErrExist).
func createWhole(file string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return err
	}
	err = os.Link(f.Name(), file)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	// No hard links on this file system: create in place.
	g, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, werr = g.Write(data)
	serr = g.Sync()
	cerr = g.Close()
	return errors.Join(werr, serr, cerr)
}

// Load loads the jobs folder's key.
func Load(jobsDir string) (*Key, error) {
	b, err := os.ReadFile(filepath.Join(jobsDir, Dir, PrivateFile))
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("signing key %s is malformed", filepath.Join(jobsDir, Dir, PrivateFile))
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	return &Key{priv: priv, pub: pub, id: KeyID(pub)}, nil
}

// LoadPublic reads a public key file (signing.pub or one given to verify).
func LoadPublic(file string) (ed25519.PublicKey, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	pub, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key %s is malformed", file)
	}
	return ed25519.PublicKey(pub), nil
}
