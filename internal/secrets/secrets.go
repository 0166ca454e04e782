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

// secretWords are the words of an environment variable's name that say it
// holds a credential (LooksSecret); secretSuffixes end a word that does
// (PGPASSWORD, GITHUBTOKEN, CLIENTSECRET, OPENAIAPIKEY).
var (
	secretWords = map[string]bool{
		"KEY": true, "KEYS": true, "APIKEY": true, "TOKEN": true, "TOKENS": true,
		"SECRET": true, "SECRETS": true, "PASSWORD": true, "PASSWORDS": true, "PASSWD": true,
		"PASSPHRASE": true, "CREDENTIAL": true, "CREDENTIALS": true, "CREDS": true, "AUTH": true,
	}
	secretSuffixes = []string{"APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIALS"}
)

// LooksSecret is the one rule for an environment variable a manifest lets
// through by name (command.env_allow) without listing it in secret_env: its
// name, upper-cased and split into words at every character that is not a
// letter or digit, has a word that is KEY, KEYS, APIKEY, TOKEN, TOKENS,
// SECRET, SECRETS, PASSWORD, PASSWORDS, PASSWD, PASSPHRASE, CREDENTIAL,
// CREDENTIALS, CREDS or AUTH, or a word ending in APIKEY, TOKEN, SECRET,
// PASSWORD, PASSWD, PASSPHRASE or CREDENTIALS. OPENAI_API_KEY,
// ANTHROPIC_AUTH_TOKEN, AWS_SECRET_ACCESS_KEY, PGPASSWORD and GH_TOKEN look
// secret; PATH, HOME, LANG, TOKENIZERS_PARALLELISM, KEYBOARD and
// GIT_AUTHOR_NAME do not (words, not substrings).
func LooksSecret(name string) bool {
	words := strings.FieldsFunc(strings.ToUpper(name), func(r rune) bool {
		return (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	})
	for _, w := range words {
		if secretWords[w] {
			return true
		}
		for _, s := range secretSuffixes {
			if strings.HasSuffix(w, s) {
				return true
			}
		}
	}
	return false
}

// MinRedactLen is the shortest value Redactable accepts.
const MinRedactLen = 8

// Redactable is the one rule for whether a credential's value is long
// enough to be replaced wherever it occurs in text Logist records: at least
// MinRedactLen bytes. A shorter one (1, true, on, a local server's dummy
// key) is a flag or a placeholder rather than a key, and replacing it would
// rewrite every "1" or "true" in the records. It applies to every value not
// listed in secret_env: env_allow variables whose name LooksSecret
// (JobRedactor), and the keys and headers the http provider and the
// metering proxy redact from error text. A value listed in secret_env is
// redacted whatever its length (the manifest says it is a secret).
func Redactable(v string) bool { return len(v) >= MinRedactLen }

// JobRedactor is the redactor of a job's records: the values of the
// variables secretEnv names, of those envAllow lets through to an agent
// whose name LooksSecret, and of those keyEnv names (an http agent's key
// and headers: credentials whatever their names), the last two when they
// are Redactable, each replaced with [REDACTED:NAME] as NewRedactor does.
func JobRedactor(secretEnv, envAllow, keyEnv []string, getenv func(string) string) *Redactor {
	names := append([]string{}, secretEnv...)
	listed := map[string]bool{}
	for _, n := range secretEnv {
		listed[n] = true
	}
	guessed := map[string]bool{}
	for _, n := range envAllow {
		if !listed[n] && !guessed[n] && LooksSecret(n) {
			guessed[n] = true
			names = append(names, n)
		}
	}
	for _, n := range keyEnv {
		if !listed[n] && !guessed[n] {
			guessed[n] = true
			names = append(names, n)
		}
	}
	return NewRedactor(names, func(n string) string {
		v := getenv(n)
		if guessed[n] && !Redactable(v) {
			return ""
		}
		return v
	})
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
