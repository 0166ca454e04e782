package history

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/logist/logist/internal/regfile"
)

// Opening a history reads the state (State, the last hash) from its
// records. So that the cost of an open does not grow with the history, a
// Log leaves a scan mark in the job folder: where in the active file its
// reading had got to, the last line's place and hash there, and the state
// at that point. An open that finds a mark it can trust reads only the
// records after it.
//
// The mark is a cache, never the record: it is written in place without
// an fsync, carries its own checksum, and is trusted only when the active
// file still holds, ending at the mark's offset, a whole line whose bytes
// hash to the mark's last hash (so a torn or stale mark, a rotated or
// replaced file, fall back to reading the whole file, as before). It
// holds no more than the history index's state does, and what an open
// reads from the records is no more checked than the mark is: verify
// checks hashes and signatures, from the records alone.

// markEvery is how far the active file may grow past the mark before a
// new one is written (at an append or an open): an open reads at most
// this much more than the mark. 128 KiB is about 200 records.
const markEvery = 128 << 10

// markVersion is the layout of the mark; any other is ignored.
const markVersion = 1

type scanMark struct {
	V int `json:"v"`
	// Archives is the number of archives the index listed: a rotation
	// since makes the mark stale.
	Archives int `json:"archives"`
	// Off is the length of the active file the state covers; LineStart
	// is where its last line begins, LastHash that line's hash.
	Off       int64  `json:"off"`
	LineStart int64  `json:"line_start"`
	LastHash  string `json:"last_hash"`
	State     State  `json:"state"`
}

func markPath(dir string) string { return filepath.Join(dir, MarkFile) }

// readMark returns the mark of dir's history if it can be trusted for
// the active file f (of size size) and an index of archives archives;
// ok false otherwise, and the caller reads the whole file.
func readMark(dir string, f *os.File, size int64, archives int) (m *scanMark, ok bool) {
	// Never through a link, never blocking on a fifo planted there.
	mf, err := regfile.OpenFile(markPath(dir), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false
	}
	var b []byte
	if fi, err := mf.Stat(); err == nil && fi.Mode().IsRegular() {
		b, err = io.ReadAll(io.LimitReader(mf, 16<<20))
		if err != nil {
			b = nil
		}
	}
	_ = mf.Close() // read-only
	if b == nil {
		return nil, false
	}
	body, sum, found := bytes.Cut(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if !found || hexSum(body) != string(sum) {
		return nil, false // torn, or not a mark
	}
	var mk scanMark
	if json.Unmarshal(body, &mk) != nil || mk.V != markVersion || mk.Archives != archives ||
		mk.LineStart < 0 || mk.Off <= mk.LineStart || mk.Off > size || mk.Off-mk.LineStart > 64<<20 {
		return nil, false
	}
	line := make([]byte, mk.Off-mk.LineStart)
	if _, err := f.ReadAt(line, mk.LineStart); err != nil && err != io.EOF {
		return nil, false
	}
	if line[len(line)-1] != '\n' || (mk.LineStart > 0 && !endsLine(f, mk.LineStart)) {
		return nil, false
	}
	e, err := ParseLine(line)
	if err != nil || e.Legacy || e.More || e.Hash != mk.LastHash || hexSum(e.Body) != e.Hash ||
		e.Seq+1 != mk.State.NextSeq {
		return nil, false
	}
	if mk.State.Responses == nil {
		mk.State.Responses = map[string]int{}
	}
	if mk.State.OpenIntent != nil {
		mk.State.OpenIntent.normalize(false) // as a scan leaves it
	}
	return &mk, true
}

// endsLine reports whether the byte before off in f is a newline.
func endsLine(f *os.File, off int64) bool {
	var b [1]byte
	_, err := f.ReadAt(b[:], off-1)
	return err == nil && b[0] == '\n'
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// saveMark writes a new mark if the active file has grown markEvery past
// the last one and its last line is a hashed one. A failure is ignored:
// the mark only saves reading.
func (l *Log) saveMark() {
	if l.size-l.markOff < markEvery || l.lastLineHash == "" || l.lastLineHash != l.lastHash {
		return
	}
	idx := l.archives
	mk := scanMark{V: markVersion, Archives: idx, Off: l.size, LineStart: l.lastLineStart, LastHash: l.lastHash, State: l.state}
	body, err := json.Marshal(mk)
	if err != nil {
		return
	}
	out := make([]byte, 0, len(body)+66)
	out = append(append(append(append(out, body...), '\n'), hexSum(body)...), '\n')
	f, err := openMark(markPath(l.dir))
	if err != nil {
		return
	}
	_, werr := f.WriteAt(out, 0)
	terr := f.Truncate(int64(len(out)))
	if f.Close() == nil && werr == nil && terr == nil {
		l.markOff = l.size
	}
}

// openMark opens the mark at p for writing in place: the file there if it
// is a regular file of one link, else (a link, a fifo, a hard link to a
// file elsewhere planted in its place) a new one instead, so that the
// write never reaches anything but the mark.
func openMark(p string) (*os.File, error) {
	const flags = os.O_WRONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	f, err := regfile.OpenFile(p, flags|os.O_CREATE, 0o600)
	if err == nil {
		if fi, serr := f.Stat(); serr == nil && fi.Mode().IsRegular() {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink == 1 {
				return f, nil
			}
		}
		_ = f.Close() // not written
	}
	if err := os.Remove(p); err != nil {
		return nil, err
	}
	return regfile.OpenFile(p, flags|os.O_CREATE|os.O_EXCL, 0o600)
}

// dropMark removes the mark (a rotation makes it stale; removing it saves
// the next open the check).
func dropMark(dir string) { _ = os.Remove(markPath(dir)) }
