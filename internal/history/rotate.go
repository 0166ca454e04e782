package history

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/regfile"
)

// Index describes the archives, oldest first, and the state at the end of
// the newest, so opening a history reads only the active file.
type Index struct {
	Archives []Archive `json:"archives"`
	// LastHash is the hash of the last record archived: the active file's
	// first record names it as its predecessor.
	LastHash string `json:"last_hash,omitempty"`
	State    State  `json:"state"`
}

// Archive is one rotated, gzip-compressed part of a history.
type Archive struct {
	File          string `json:"file"`
	FirstSeq      int64  `json:"first_seq"`
	LastSeq       int64  `json:"last_seq"`
	Records       int    `json:"records"`
	Bytes         int64  `json:"bytes"`
	FirstPrevHash string `json:"first_prev_hash"`
	LastHash      string `json:"last_hash"`
}

func readIndex(dir string) (*Index, error) {
	b, err := regfile.ReadFile(filepath.Join(dir, IndexFile))
	if errors.Is(err, os.ErrNotExist) {
		return &Index{State: State{Responses: map[string]int{}}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read history index: %w", err)
	}
	var idx Index
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("history index %s is corrupt: %w", filepath.Join(dir, IndexFile), err)
	}
	if idx.State.Responses == nil {
		idx.State.Responses = map[string]int{}
	}
	return &idx, nil
}

func writeIndex(dir string, idx *Index) error {
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, IndexFile), append(b, '\n'), 0o600)
}

// rotate closes the active file as the next archive and starts a new one.
// Order, each step durable before the next: rename the active file to
// history-NNNNNN.jsonl; create a new empty active file; then compress and
// index the archive (recoverRotation redoes that part after a crash).
func (l *Log) rotate() error {
	l.recs, l.recsOK = nil, false
	// A plain archive left by a rotation whose sealing failed has the
	// number this rotation would take: seal it first, or keep the active
	// file as it is, rather than rename over it.
	if err := l.recoverRotation(); err != nil {
		return err
	}
	idx, err := readIndex(l.dir)
	if err != nil {
		return err
	}
	n := len(idx.Archives) + 1
	plain := filepath.Join(l.dir, archiveName(n))
	if err := os.Rename(l.path, plain); err != nil {
		return fmt.Errorf("rotate: %w", err)
	}
	if err := atomicfile.SyncDir(l.dir); err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|os.O_APPEND|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("rotate: new active file: %w", err)
	}
	if err := atomicfile.SyncDir(l.dir); err != nil {
		_ = f.Close() // empty; the error is the fsync's
		return err
	}
	_ = l.f.Close() // the archive: each record was fsync'd as appended
	l.f, l.size = f, 0
	l.archives, l.lastLineStart, l.lastLineHash, l.markOff = n, 0, "", 0
	dropMark(l.dir)
	return l.recoverRotation()
}

// recoverRotation compresses and indexes every plain archive: after a
// rotation, or after a crash in the middle of one.
func (l *Log) recoverRotation() error {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("read job folder: %w", err)
	}
	var plains []int
	for _, e := range ents {
		if n, ok := plainArchive(e.Name()); ok {
			plains = append(plains, n)
		}
	}
	sort.Ints(plains)
	for _, n := range plains {
		if err := l.seal(n); err != nil {
			return err
		}
	}
	return nil
}

// seal compresses archive n, adds it to the index, and removes the plain
// file.
func (l *Log) seal(n int) error {
	idx, err := readIndex(l.dir)
	if err != nil {
		return err
	}
	plain := filepath.Join(l.dir, archiveName(n))
	gzName := archiveName(n) + archiveGz
	if n <= len(idx.Archives) {
		// Indexed before the crash; only the plain copy is left over.
		if err := os.Remove(plain); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return atomicfile.SyncDir(l.dir)
	}
	if n != len(idx.Archives)+1 {
		return fmt.Errorf("history archive %s is out of sequence (index has %d)", plain, len(idx.Archives))
	}
	data, err := os.ReadFile(plain)
	if err != nil {
		return err
	}
	es, err := parseLines(data, 0)
	if err != nil {
		return fmt.Errorf("archive %s: %w", plain, err)
	}
	if len(es) == 0 {
		return os.Remove(plain)
	}
	st := idx.State.clone()
	last := idx.LastHash
	for i := range es {
		st.apply(&es[i].Record)
		if !es[i].Legacy {
			last = es[i].Hash
		}
	}
	tmp := filepath.Join(l.dir, "."+gzName+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	_, werr := zw.Write(data)
	cerr := zw.Close()
	serr := f.Sync()
	ferr := f.Close()
	if err := errors.Join(werr, cerr, serr, ferr); err != nil {
		_ = os.Remove(tmp) // a cut temp copy; the plain archive stays
		return fmt.Errorf("compress %s: %w", plain, err)
	}
	if err := os.Rename(tmp, filepath.Join(l.dir, gzName)); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(l.dir); err != nil {
		return err
	}
	idx.Archives = append(idx.Archives, Archive{File: gzName, FirstSeq: es[0].Seq, LastSeq: es[len(es)-1].Seq,
		Records: len(es), Bytes: int64(len(data)), FirstPrevHash: es[0].PrevHash, LastHash: last})
	idx.LastHash, idx.State = last, st
	if err := writeIndex(l.dir, idx); err != nil {
		return err
	}
	if err := os.Remove(plain); err != nil {
		return err
	}
	return atomicfile.SyncDir(l.dir)
}

func readArchive(dir string, a Archive) ([]Entry, error) {
	f, err := os.Open(filepath.Join(dir, a.File))
	if err != nil {
		return nil, fmt.Errorf("history archive: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("history archive %s: %w", a.File, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("history archive %s: %w", a.File, err)
	}
	es, err := parseLines(data, 0)
	if err != nil {
		return es, fmt.Errorf("history archive %s: %w", a.File, err)
	}
	return es, nil
}

// ErrNoRecord says no record has the sequence number asked for.
var ErrNoRecord = errors.New("no such record")

// ReadSeq finds record seq, decompressing at most the one archive the index
// says holds it.
func ReadSeq(dir string, seq int64) (*Entry, error) {
	idx, err := readIndex(dir)
	if err != nil {
		return nil, err
	}
	for _, a := range idx.Archives {
		if seq >= a.FirstSeq && seq <= a.LastSeq {
			es, err := readArchive(dir, a)
			if err != nil {
				return nil, err
			}
			return findSeq(es, seq)
		}
	}
	data, err := os.ReadFile(Path(dir))
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	es, err := parseLines(data, 0)
	if err != nil {
		return nil, err
	}
	return findSeq(es, seq)
}

func findSeq(es []Entry, seq int64) (*Entry, error) {
	for i := range es {
		if es[i].Seq == seq {
			return &es[i], nil
		}
	}
	return nil, fmt.Errorf("record %d: %w", seq, ErrNoRecord)
}
