package history

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// ReadAfter is a page of dir's history: its records with Seq > after, at
// most limit of them, in order, as ReadAll then a filter gives them; more
// says records come after the page. It costs about the page, not the
// history: archives the index says end at or before after are not read,
// nor those after the page, and in the active file the page's first line
// is found by a binary search over byte offsets (peekLine at each probe),
// then only the page's lines are decoded, and the next line's header
// peeked to know more. Like ReadEntries, it reads again if the history was
// rotated while it read, and fails with ErrBusy after a few seconds of
// continuous rotation.
//
// A writer gives each record the next sequence number, so seqs increase
// along a history (follow and verify hold it to that); a gap, which a
// history migrated from the seed's format may have, is no matter. A
// unit a writer has not finished, and a torn last line, are not history,
// as to ReadEntries.
func ReadAfter(dir string, after int64, limit int) (recs []Record, more bool, err error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		before, err := readIndex(dir)
		if err != nil {
			return nil, false, err
		}
		p := &pager{after: after, limit: limit}
		if err := p.read(dir, before); err != nil {
			return nil, false, err
		}
		now, err := readIndex(dir)
		if err != nil {
			return nil, false, err
		}
		if len(now.Archives) == len(before.Archives) {
			recs, more := p.result()
			return recs, more, nil
		}
		if time.Now().After(deadline) {
			return nil, false, fmt.Errorf("%s: %w", dir, ErrBusy)
		}
	}
}

// pager gathers a page from records offered in history order.
type pager struct {
	after int64
	limit int
	recs  []Record
	// valid is how many of recs are known history: up to the last one
	// that ends a unit (not More), or all once a later one does.
	valid int
	// done: a record past the page that ends a unit was seen, so the
	// page is whole and more records follow it.
	done bool
}

// want says whether a record of seq is to be offered in full (in the
// page) rather than only its seq and More (past it).
func (p *pager) want(seq int64) bool { return seq > p.after && len(p.recs) < p.limit }

// offer takes the next record of the history (r nil for one past the page,
// whose header alone was read).
func (p *pager) offer(seq int64, unitMore bool, r *Record) {
	if seq <= p.after || p.done {
		return
	}
	if len(p.recs) < p.limit {
		p.recs = append(p.recs, *r)
		if !unitMore {
			p.valid = len(p.recs)
		}
		return
	}
	if !unitMore {
		p.valid, p.done = len(p.recs), true
	}
}

func (p *pager) result() ([]Record, bool) {
	if p.recs == nil {
		return []Record{}, p.done
	}
	return p.recs[:p.valid], p.done
}

// read offers the history's records after p.after, archives (as idx lists
// them) then the active file, until the page is done.
func (p *pager) read(dir string, idx *Index) error {
	for _, a := range idx.Archives {
		if a.LastSeq <= p.after {
			continue
		}
		es, err := readArchive(dir, a)
		if err != nil {
			return err
		}
		for i := range es {
			p.offer(es[i].Seq, es[i].More, &es[i].Record)
		}
		if p.done {
			return nil
		}
	}
	return p.readActive(dir)
}

// pageLine, if set, hears each line of the active file ReadAfter parses
// in full or peeks at (tests count them).
var pageLine func()

// pageScan is how close the binary search brings the page's start before
// the file is read forward from there.
var pageScan int64 = 16 << 10

func (p *pager) readActive(dir string) error {
	f, err := openOwn(Path(dir), os.O_RDONLY)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read history: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read history: %w", err)
	}
	size := fi.Size()
	from, err := p.seek(f, size)
	if err != nil {
		return err
	}
	r := bufio.NewReaderSize(io.NewSectionReader(f, from, size-from), 64<<10)
	pos := from
	for !p.done {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: read the rest of it.
			line = append([]byte(nil), line...)
			var rest []byte
			rest, err = r.ReadBytes('\n')
			line = append(line, rest...)
		}
		if err == io.EOF {
			return nil // the end, or a torn last line: not yet history
		}
		if err != nil {
			return fmt.Errorf("read history: %w", err)
		}
		if pageLine != nil {
			pageLine()
		}
		if len(p.recs) > 0 && len(p.recs) < p.limit {
			// Within the page: every line from here on has a greater seq.
			e, err := ParseLine(line)
			if err != nil {
				return fmt.Errorf("history record at byte %d is corrupt: %w", pos, err)
			}
			p.offer(e.Seq, e.More, &e.Record)
			pos += int64(len(line))
			continue
		}
		pk, _, perr := peekLine(line)
		if perr != nil {
			return fmt.Errorf("history record at byte %d is corrupt: %w", pos, perr)
		}
		if p.want(pk.Seq) {
			e, err := ParseLine(line)
			if err != nil {
				return fmt.Errorf("history record at byte %d is corrupt: %w", pos, err)
			}
			p.offer(e.Seq, e.More, &e.Record)
		} else {
			p.offer(pk.Seq, pk.More, nil)
		}
		pos += int64(len(line))
	}
	return nil
}

// seek is where in f (size bytes long) to read forward from: a line start
// before which every line's seq is at most p.after, no more than about
// pageScan bytes (and a line) before the first line whose seq is greater.
func (p *pager) seek(f *os.File, size int64) (int64, error) {
	// Every whole line starting before lo has seq <= after; the first
	// whole line starting at or after hi, if any, has seq > after.
	lo, hi := int64(0), size
	for hi-lo > pageScan {
		mid := lo + (hi-lo)/2
		start, end, seq, ok, err := lineFrom(f, mid, size)
		if err != nil {
			return 0, err
		}
		if !ok || start >= hi || seq > p.after {
			hi = mid
			continue
		}
		lo = end
	}
	return lo, nil
}

// lineFrom peeks at the first whole line of f starting at or after off
// (0 < off < size): its start and end offsets and seq; ok false if none.
func lineFrom(f *os.File, off, size int64) (start, end, seq int64, ok bool, err error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, off-1, size-off+1), 16<<10)
	skipped, err := r.ReadSlice('\n')
	n := int64(len(skipped))
	for errors.Is(err, bufio.ErrBufferFull) {
		skipped, err = r.ReadSlice('\n')
		n += int64(len(skipped))
	}
	if err == io.EOF {
		return 0, 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, 0, false, fmt.Errorf("read history: %w", err)
	}
	start = off - 1 + n
	line, err := r.ReadBytes('\n')
	if err == io.EOF {
		return 0, 0, 0, false, nil // a torn last line
	}
	if err != nil {
		return 0, 0, 0, false, fmt.Errorf("read history: %w", err)
	}
	if pageLine != nil {
		pageLine()
	}
	pk, _, err := peekLine(line)
	if err != nil {
		return 0, 0, 0, false, fmt.Errorf("history record at byte %d is corrupt: %w", start, err)
	}
	return start, start + int64(len(line)), pk.Seq, true, nil
}
