package history

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/logist/logist/internal/atomicfile"
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
	b, err := readOwn(filepath.Join(dir, IndexFile), -1)
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
	// What this Log knows of the file it renames: the state and last hash
	// after its records, read or written by it.
	k := &sealKnown{state: l.state.clone(), lastHash: l.lastHash, size: l.size}
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
	l.f, l.fi, l.size = f, nil, 0
	l.archives, l.lastLineStart, l.lastLineHash, l.markOff = n, 0, "", 0
	dropMark(l.dir)
	if err := l.seal(n, k); err != nil {
		return err
	}
	return l.recoverRotation()
}

// sealKnown is what a rotation knows of the archive it has just made:
// the state and last hash after its records, which its Log read or wrote,
// and the file's length then. Sealing the archive then parses its first
// and last lines, not every one: at 100 MiB, parsing was nearly all of
// the cost of the append that rotated (seconds). A file of another length
// is parsed whole.
type sealKnown struct {
	state    State
	lastHash string
	size     int64
}

// summarize is the index's entry for an archive of data (whole lines)
// following idx, and the state and last hash after it: from k when it
// describes data, else from every line.
func summarize(data []byte, idx *Index, k *sealKnown) (a Archive, st State, last string, err error) {
	if k != nil && k.size == int64(len(data)) && len(data) > 0 && data[len(data)-1] == '\n' {
		firstLine := data[:bytes.IndexByte(data, '\n')+1]
		lastLine := data[bytes.LastIndexByte(data[:len(data)-1], '\n')+1:]
		first, ferr := ParseLine(firstLine)
		lastE, lerr := ParseLine(lastLine)
		if ferr == nil && lerr == nil && !lastE.More {
			return Archive{FirstSeq: first.Seq, LastSeq: lastE.Seq, Records: bytes.Count(data, []byte{'\n'}),
				Bytes: int64(len(data)), FirstPrevHash: first.PrevHash, LastHash: k.lastHash}, k.state.clone(), k.lastHash, nil
		}
	}
	es, err := parseLines(data, 0)
	if err != nil || len(es) == 0 {
		return Archive{}, State{}, "", err
	}
	st = idx.State.clone()
	last = idx.LastHash
	for i := range es {
		st.apply(&es[i].Record)
		if !es[i].Legacy {
			last = es[i].Hash
		}
	}
	return Archive{FirstSeq: es[0].Seq, LastSeq: es[len(es)-1].Seq, Records: len(es), Bytes: int64(len(data)),
		FirstPrevHash: es[0].PrevHash, LastHash: last}, st, last, nil
}

// rotationLeft says whether a rotation may have been cut short in dir,
// whose index lists n archives: a plain archive is there. A rotation
// names its archive n+1 (rotate, after recoverRotation sealed every
// plain one), and a crash leaves it either not yet indexed (n+1) or
// indexed and not yet removed (n): so a stat of those two names tells
// an open whether to read the folder (recoverRotation), where a read of
// the folder at every open cost four system calls.
func rotationLeft(dir string, n int) bool {
	for _, k := range []int{n + 1, n} {
		if k == 0 {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, archiveName(k))); !errors.Is(err, fs.ErrNotExist) {
			return true // there, or not known not to be
		}
	}
	return false
}

// readDir is os.ReadDir; tests count the folder reads.
var readDir = os.ReadDir

// recoverRotation compresses and indexes every plain archive: after a
// rotation, or after a crash in the middle of one.
func (l *Log) recoverRotation() error {
	ents, err := readDir(l.dir)
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
		if err := l.seal(n, nil); err != nil {
			return err
		}
	}
	return nil
}

// seal compresses archive n, adds it to the index, and removes the plain
// file. k, if not nil, is what the rotation that made it knows of it.
func (l *Log) seal(n int, k *sealKnown) error {
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
	a, st, last, err := summarize(data, idx, k)
	if err != nil {
		return fmt.Errorf("archive %s: %w", plain, err)
	}
	if a.Records == 0 {
		return os.Remove(plain)
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
	a.File = gzName
	idx.Archives = append(idx.Archives, a)
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
	data, err := readOwn(Path(dir), -1)
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
