package history

// The signed head. Every durable append leaves beside the log the sequence
// number and hash of its newest record, signed (HeadFile). The chain proves
// that each record follows the one before it; only the head proves that
// the log still ends where Logist left it. A log cut at a record boundary
// (truncated, emptied, replaced by an older copy) is a perfectly valid
// chain, and without the head it would be continued as if nothing had been
// lost. Opening a history (OpenWith, Refresh) and `logist verify` compare
// the head with the log's last record through CheckHead.
//
// The head is written in place after the records' fsync and is not itself
// fsync'd: a crash can leave it one append behind the log (harmless: the
// log may run ahead of its head, never behind it), but never ahead, since
// it is written only once the records are durable. A head that cannot be
// written leaves the last one in place, stale in the same harmless way.

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Head is the content of HeadFile.
type Head struct {
	// Seq and Hash are those of the newest record the log held when the
	// head was written.
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
	// Key and Sig sign HeadMessage(Seq, Hash) with the jobs folder's key
	// (empty for a history written without a signer).
	Key string `json:"key,omitempty"`
	Sig string `json:"sig,omitempty"`
}

// ErrMissing says a history lost records that had been committed: it ends
// before its head. The job must not be run on it (HISTORY_MISSING).
var ErrMissing = errors.New("history lost committed records")

// MissingError is a history that ends before its head.
type MissingError struct {
	Path     string
	Head     Head
	LastSeq  int64 // -1: the log holds no record
	LastHash string
}

func (e *MissingError) Error() string {
	if e.LastSeq < 0 {
		return fmt.Sprintf("history %s is empty, but its head says it held records up to %d: %v; "+
			"not continuing it: restore the file (or remove %s to accept the loss)", e.Path, e.Head.Seq, ErrMissing, HeadFile)
	}
	if e.Head.Seq > e.LastSeq {
		return fmt.Sprintf("history %s ends at record %d, but its head says it held records up to %d: %v; "+
			"not continuing it: restore the file (or remove %s to accept the loss)", e.Path, e.LastSeq, e.Head.Seq, ErrMissing, HeadFile)
	}
	return fmt.Sprintf("history %s: record %d is not the one its head names (hash %.12s…, head %.12s…): %v; "+
		"not continuing it: restore the file", e.Path, e.LastSeq, e.LastHash, e.Head.Hash, ErrMissing)
}

func (e *MissingError) Unwrap() error { return ErrMissing }

// HeadMessage is what a head's signature signs.
func HeadMessage(seq int64, hash string) []byte {
	sum := sha256.Sum256(fmt.Appendf(nil, "logist history head\n%d\n%s\n", seq, hash))
	return sum[:]
}

// CheckHead is the one rule that compares a head with the log: the log's
// newest record (lastSeq, -1 for none, and its hash) must be at or past the
// head, and at the head it must be the record the head names. A nil head
// (a history older than heads, or none written yet) passes.
func CheckHead(path string, h *Head, lastSeq int64, lastHash string) error {
	if h == nil {
		return nil
	}
	if h.Seq > lastSeq || (h.Seq == lastSeq && h.Hash != lastHash) {
		return &MissingError{Path: path, Head: *h, LastSeq: lastSeq, LastHash: lastHash}
	}
	return nil
}

// ReadHead reads the head of the history in the job folder dir; nil if it
// has none, or an empty one (a crash right after its creation). A head
// that holds anything else that is not a head is corrupt (HISTORY_CORRUPT):
// it is never taken for no head, which would let a cut log through.
func ReadHead(dir string) (*Head, error) {
	p := filepath.Join(dir, HeadFile)
	b, err := readOwn(p, 4096)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read history head: %w", err)
	}
	// A head file with nothing in it yet is what a crash between its
	// creation and its first write leaves (or a machine crash that kept
	// the new entry but not its data): no head was written, as when the
	// file is missing.
	if len(bytes.Trim(b, " \n\x00")) == 0 {
		return nil, nil
	}
	var h Head
	if err := json.Unmarshal(b, &h); err != nil || h.Hash == "" {
		return nil, fmt.Errorf("history head %s is corrupt (%d bytes); remove it only if the log is known to be whole", p, len(b))
	}
	return &h, nil
}

// VerifyHead checks a head's signature with verify, a function that checks
// an Ed25519 signature of the key named (the caller's key store).
func VerifyHead(h *Head, verify func(key string, msg, sig []byte) bool) error {
	if h.Sig == "" {
		return errors.New("the head is not signed")
	}
	sig, err := base64.StdEncoding.DecodeString(h.Sig)
	if err != nil || !verify(h.Key, HeadMessage(h.Seq, h.Hash), sig) {
		return errors.New("the head's signature does not verify")
	}
	return nil
}

// writeHead records seq and hash as the head, in place (see the comment
// at the top). Errors are dropped: the records are durable already, and a
// stale head is harmless.
func (l *Log) writeHead(seq int64, hash string) {
	h := Head{Seq: seq, Hash: hash}
	if s := l.opts.Signer; s != nil {
		h.Key = s.ID()
		h.Sig = base64.StdEncoding.EncodeToString(s.Sign(HeadMessage(seq, hash)))
	}
	b, _ := json.Marshal(h) // plain fields: cannot fail
	b = append(b, '\n')
	if l.headF == nil {
		p := filepath.Join(l.dir, HeadFile)
		// Its entry in the folder is not fsync'd either: a crash may lose
		// a new head file, and a history with no head is not checked.
		f, err := openOwn(p, os.O_RDWR|os.O_CREATE)
		if err != nil {
			return
		}
		if fi, err := f.Stat(); err == nil {
			l.headLen = int(fi.Size()) // another process's head may be longer
		}
		l.headF = f
	}
	// Padded with spaces to the longest head written, so the file never
	// needs truncating; JSON ignores the trailing blanks.
	if len(b) < l.headLen {
		b = append(b[:len(b)-1], bytes.Repeat([]byte(" "), l.headLen-len(b))...)
		b = append(b, '\n')
	}
	if _, err := l.headF.WriteAt(b, 0); err == nil {
		l.headLen = len(b)
	}
}
