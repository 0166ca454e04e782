package history

import (
	"bytes"
	"errors"
	"io"
	"os"

	"github.com/logist/logist/internal/regfile"
)

// Readers that want the newest record of some kind (status, the CLI's
// trust in a manifest file) read the end of the active history file only,
// not the whole history.

// tailWindow is how much of the active file's end the tail readers read.
const tailWindow = 256 << 10

// lastEntry returns the newest entry at the end of dir's active history
// file (its last tailWindow bytes) for which match holds, skipping a unit
// a writer has not finished; ok is false when there is none there.
func lastEntry(dir string, match func(*Entry) bool) (e *Entry, ok bool) {
	f, err := regfile.OpenFile(Path(dir), os.O_RDONLY, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false
	}
	off := max(fi.Size()-tailWindow, 0)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, false
	}
	// Whole lines only, and not a unit a writer has not finished.
	end := bytes.LastIndexByte(buf, '\n')
	unitDone := false
	for end > 0 {
		start := bytes.LastIndexByte(buf[:end], '\n') + 1
		if start == 0 && off > 0 {
			return nil, false // the line began before the window
		}
		ent, err := ParseLine(buf[start:end])
		if err != nil {
			return nil, false
		}
		if !ent.More {
			unitDone = true
		}
		if unitDone && match(&ent) {
			return &ent, true
		}
		end = start - 1
	}
	return nil, false
}

// LastCommitEntry returns the newest record in the end of dir's active
// history file (its last 256 KiB) that carries a committed manifest
// (Record.Commit), as stored; ok is false when there is none there. It
// reads only the tail, for readers that want to know whether a manifest
// file is the one a Logist transaction committed.
func LastCommitEntry(dir string) (e *Entry, ok bool) {
	return lastEntry(dir, func(e *Entry) bool { return e.Commit != nil })
}

// LastResponse returns the newest response record (an agent's answer and
// how it was judged) for which match holds (nil: any), in the end of dir's
// active history file (its last 256 KiB); ok is false when there is none
// there (none yet, or the history has just rotated).
func LastResponse(dir string, match func(*Response) bool) (r *Record, ok bool) {
	e, ok := lastEntry(dir, func(e *Entry) bool {
		return e.Type == TypeResponse && e.Response != nil && (match == nil || match(e.Response))
	})
	if !ok {
		return nil, false
	}
	return &e.Record, true
}
