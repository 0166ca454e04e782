package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Follower reads a job's history as it grows, while a writer appends and
// rotates it: every record comes out once, in order. It remembers the last
// sequence number it passed on, and the active file's identity and the
// offset it has read to. A rotation (the active file renamed into an
// archive and a new one started) or a gap in the sequence sends it back to
// ReadEntries, which reads archives and active file consistently; records
// it has already passed on are skipped by sequence number.
type Follower struct {
	dir   string
	seen  bool  // a record has been passed on
	last  int64 // its sequence number
	file  os.FileInfo
	off   int64
	index string // the archive index as last read ("" if none)
	// waiting: the last poll stopped at records a rotation is moving.
	waiting bool
}

// NewFollower follows the history in the job folder dir from its first
// record. The folder need not hold a history yet.
func NewFollower(dir string) *Follower { return &Follower{dir: dir} }

// NewFollowerAfter follows the history in dir from the record after seq:
// a reader that has the records up to seq already (-1: none).
func NewFollowerAfter(dir string, seq int64) *Follower {
	f := NewFollower(dir)
	f.Skip(seq)
	return f
}

// Seen reports whether a record has been passed on.
func (f *Follower) Seen() bool { return f.seen }

// Last is the sequence number of the last record passed on or skipped; -1
// if none.
func (f *Follower) Last() int64 {
	if !f.seen {
		return -1
	}
	return f.last
}

// Skip passes over the records up to seq without passing them on, for a
// reader that has them by other means (their writer).
func (f *Follower) Skip(seq int64) {
	if seq >= 0 && (!f.seen || seq > f.last) {
		f.seen, f.last = true, seq
	}
}

// Waiting reports that the last Poll stopped at records a rotation is
// moving into an archive: they can be read once it is indexed, a few
// milliseconds later.
func (f *Follower) Waiting() bool { return f.waiting }

// Poll passes on every record appended since the last poll. A history
// that keeps changing while it is read (rotations in a row) is left for
// the next poll (Waiting): the change that stops it wakes Follow again.
func (f *Follower) Poll(emit func(Entry) error) error {
	f.waiting = false
	for attempt := 0; attempt < 4; attempt++ {
		if f.file != nil {
			ok, err := f.tail(emit)
			if err != nil || ok {
				return err
			}
		}
		waiting, err := f.resync(emit)
		if err != nil {
			return err
		}
		f.waiting = waiting
		if f.file == nil && !waiting {
			return nil // no history yet
		}
	}
	return nil
}

// PollSettled is Poll that, caught in the middle of a rotation, lets it
// finish (for up to a second) so the output ends where the history does.
func (f *Follower) PollSettled(emit func(Entry) error) error {
	err := f.Poll(emit)
	for tries := 0; err == nil && f.waiting && tries < 200; tries++ {
		time.Sleep(5 * time.Millisecond)
		err = f.Poll(emit)
	}
	return err
}

// ErrFolderGone says the job folder was removed while it was followed.
var ErrFolderGone = errors.New("job folder removed")

// FollowOptions tune Follow.
type FollowOptions struct {
	// Done, if set, is asked before each read; once it has said true and
	// the history is read to its end, Follow returns nil. (Ask what is
	// written after the history, such as the manifest: then every record
	// up to that point is there to read.)
	Done func() bool
	// Wake names other files in the job folder whose changes wake the
	// follower, such as the one Done reads.
	Wake []string
}

// Follow passes on the records so far, then each record appended after,
// woken by fsnotify on the job folder (appends, rotations, o.Wake's
// files), until ctx ends (ctx.Err()), o.Done says so (nil), the folder is
// removed (ErrFolderGone) or emit fails (its error).
func (f *Follower) Follow(ctx context.Context, emit func(Entry) error, o FollowOptions) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", f.dir, err)
	}
	defer w.Close() //nolint:errcheck // a watcher holds no data
	// The watch is in place before the first read: a record appended in
	// between is read twice (and passed on once), never missed.
	if err := w.Add(f.dir); err != nil {
		return fmt.Errorf("watch %s: %w", f.dir, err)
	}
	for {
		fin := o.Done != nil && o.Done()
		if err := f.Poll(emit); err != nil {
			return err
		}
		if fin && !f.waiting {
			return nil
		}
		if _, err := os.Stat(f.dir); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", f.dir, ErrFolderGone)
		}
		if err := f.waitEvent(ctx, w, o.Wake); err != nil {
			return err
		}
	}
}

// waitEvent waits for a relevant event in the job folder (or to it, or a
// lost event: overflow) and then drains what else is queued.
func (f *Follower) waitEvent(ctx context.Context, w *fsnotify.Watcher, wake []string) error {
	relevant := func(ev fsnotify.Event) bool {
		if filepath.Clean(ev.Name) == filepath.Clean(f.dir) {
			return true // the folder itself: removed or moved away
		}
		switch name := filepath.Base(ev.Name); name {
		case FileName, IndexFile:
			return true
		default:
			for _, n := range wake {
				if name == n {
					return true
				}
			}
		}
		return false
	}
	for got := false; !got; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("file watcher closed")
			}
			got = relevant(ev)
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("file watcher closed")
			}
			_ = err // an overflow or other loss: read again to be sure
			got = true
		}
	}
	for {
		select {
		case <-w.Events:
		default:
			return nil
		}
	}
}

// readIndexFile returns the archive index's content ("" if there is none):
// a rotation always rewrites it.
func (f *Follower) readIndexFile() (string, error) {
	b, err := readOwn(filepath.Join(f.dir, IndexFile), -1)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read history index: %w", err)
	}
	return string(b), nil
}

// tail reads the active file from the offset. It returns false when the
// file is not the one it was reading (rotated, replaced, truncated) or a
// record is missing, and resync must run first.
func (f *Follower) tail(emit func(Entry) error) (bool, error) {
	idx, err := f.readIndexFile()
	if err != nil {
		return false, err
	}
	if idx != f.index {
		return false, nil // rotated: the records may be in a new archive
	}
	file, err := openOwn(Path(f.dir), os.O_RDONLY)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil // in the middle of a rotation
		}
		return false, fmt.Errorf("read history: %w", err)
	}
	defer file.Close() //nolint:errcheck // read-only
	fi, err := file.Stat()
	if err != nil {
		return false, fmt.Errorf("read history: %w", err)
	}
	if !os.SameFile(fi, f.file) || fi.Size() < f.off {
		return false, nil
	}
	if fi.Size() == f.off {
		return true, nil
	}
	data := make([]byte, fi.Size()-f.off)
	n, err := file.ReadAt(data, f.off)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read history: %w", err)
	}
	data = data[:n]
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return true, nil // a record being written: read it next time
		}
		en, err := ParseLine(data[:i])
		if err != nil {
			return false, fmt.Errorf("history of %s: record after %d is corrupt: %w", f.dir, f.last, err)
		}
		switch {
		case f.seen && en.Seq <= f.last:
			// already passed on
		case (f.seen && en.Seq == f.last+1) || (!f.seen && en.Seq == 0):
			if err := emit(en); err != nil {
				return false, err
			}
			f.seen, f.last = true, en.Seq
		default:
			return false, nil // a gap: records went into an archive first
		}
		f.off += int64(i + 1)
		data = data[i+1:]
	}
}

// resync reads the whole history (archives and active file), passes on
// what is new, and starts tailing the active file from its beginning
// (records already passed on are skipped). It stops at a gap in the
// sequence while the history is rotating (an archive not yet indexed, or
// the index changing while it reads) and reports that it is waiting: the
// records are read once the index lists them.
func (f *Follower) resync(emit func(Entry) error) (waiting bool, err error) {
	// Identify the index and the active file first: a rotation after this
	// is noticed by the next tail, and whatever ReadEntries reads of this
	// active file is skipped by sequence number when tailing it from 0.
	idx, err := f.readIndexFile()
	if err != nil {
		return false, err
	}
	fi, statErr := os.Stat(Path(f.dir))
	es, readErr := ReadEntries(f.dir)
	after, err := f.readIndexFile()
	if err != nil {
		return false, err
	}
	// ReadEntries gives up re-reading after a few rotations in a row; and
	// a rotation moves records into an archive before the index lists it.
	settled := after == idx && !rotating(f.dir)
	for _, en := range es {
		if f.seen && en.Seq <= f.last {
			continue
		}
		if (f.seen && en.Seq != f.last+1) || (!f.seen && en.Seq != 0) {
			if !settled {
				f.file = nil // read again: the missing records are on their way
				return true, nil
			}
			// A gap in a history at rest is in the history itself
			// (logist verify reports it): show what is there.
		}
		if err := emit(en); err != nil {
			return false, err
		}
		f.seen, f.last = true, en.Seq
	}
	if readErr != nil {
		return false, fmt.Errorf("read history of %s: %w", f.dir, readErr)
	}
	if statErr != nil {
		if errors.Is(statErr, fs.ErrNotExist) {
			// No history yet, or between the two renames of a rotation.
			f.file, f.off, f.index = nil, 0, idx
			return rotating(f.dir), nil
		}
		return false, fmt.Errorf("read history: %w", statErr)
	}
	f.file, f.off, f.index = fi, 0, idx
	return false, nil
}
