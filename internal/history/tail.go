package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// Readers that want the newest record of some kind (status, the CLI's
// trust in a manifest file) read the end of the active history file only,
// not the whole history.

// tailWindow is how much of the active file's end the tail readers read.
const tailWindow = 256 << 10

// lastEntry returns the newest entry at the end of dir's active history
// file (its last tailWindow bytes) for which match holds, skipping a unit
// a writer has not finished; ok is false when there is none there. Lines
// that do not hold every hint (bytes a matching record's JSON must
// contain) are not decoded: a scan of the window costs what decoding it
// would. Only the entry found is decoded in full (lastLine).
func lastEntry(dir string, match func(*peek) bool, hints ...[]byte) (e *Entry, ok bool) {
	line, _, _, ok := lastLine(dir, match, hints...)
	if !ok {
		return nil, false
	}
	ent, err := ParseLine(line)
	if err != nil {
		return nil, false
	}
	return &ent, true
}

// peek is the part of a record the tail readers choose by. Each line they
// pass is decoded into it rather than into a Record: the encoder sets up
// its field tables for the types a value holds on first use, and a
// Record's (requests, answers, transitions, recovery points) cost a
// `logist status` more than the lines it reads.
type peek struct {
	V      int    `json:"v"`
	Seq    int64  `json:"seq"`
	Type   string `json:"type"`
	More   bool   `json:"more"`
	Commit *struct {
		Sum string `json:"manifest_sha256"`
	} `json:"commit"`
	Response *struct {
		Warnings []string `json:"warnings"`
	} `json:"response"`
}

// peekLine is ParseLine's envelope and version rules with only peek's
// fields of the record decoded: a line ParseLine takes, it takes, with
// the same values in those fields.
func peekLine(line []byte) (p peek, env envelope, err error) {
	line = bytes.TrimRight(line, "\n")
	if err := json.Unmarshal(line, &env); err != nil {
		return peek{}, env, err
	}
	if env.Rec == nil {
		if err := json.Unmarshal(line, &p); err != nil {
			return peek{}, env, err
		}
		if p.V > RecordVersion {
			return peek{}, env, &VersionError{p.V}
		}
		if p.V != 1 || p.Type == "" {
			return peek{}, env, fmt.Errorf("not a history record")
		}
		return p, env, nil
	}
	if err := json.Unmarshal(env.Rec, &p); err != nil {
		return peek{}, env, err
	}
	if p.V > RecordVersion {
		return peek{}, env, &VersionError{p.V}
	}
	if p.V < 2 || p.Type == "" {
		return peek{}, env, fmt.Errorf("not a history record")
	}
	return p, env, nil
}

// lastLine is lastEntry's search: the line found, its peek and envelope.
func lastLine(dir string, match func(*peek) bool, hints ...[]byte) (line []byte, p peek, env envelope, ok bool) {
	f, err := openOwn(Path(dir), os.O_RDONLY)
	if err != nil {
		return nil, peek{}, envelope{}, false
	}
	defer f.Close() //nolint:errcheck // read-only
	fi, err := f.Stat()
	if err != nil {
		return nil, peek{}, envelope{}, false
	}
	off := max(fi.Size()-tailWindow, 0)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, peek{}, envelope{}, false
	}
	// Whole lines only, and not a unit a writer has not finished.
	end := bytes.LastIndexByte(buf, '\n')
	unitDone := false
	for end > 0 {
		start := bytes.LastIndexByte(buf[:end], '\n') + 1
		if start == 0 && off > 0 {
			return nil, peek{}, envelope{}, false // the line began before the window
		}
		if unitDone && !holdsAll(buf[start:end], hints) {
			end = start - 1
			continue
		}
		p, env, err := peekLine(buf[start:end])
		if err != nil {
			return nil, peek{}, envelope{}, false
		}
		if !p.More {
			unitDone = true
		}
		if unitDone && match(&p) {
			return buf[start:end], p, env, true
		}
		end = start - 1
	}
	return nil, peek{}, envelope{}, false
}

func holdsAll(line []byte, hints [][]byte) bool {
	for _, h := range hints {
		if !bytes.Contains(line, h) {
			return false
		}
	}
	return true
}

// LastCommitEntry returns the newest record in the end of dir's active
// history file (its last 256 KiB) that carries a committed manifest
// (Record.Commit), as stored; ok is false when there is none there. It
// reads only the tail, for readers that want to know whether a manifest
// file is the one a Logist transaction committed.
func LastCommitEntry(dir string) (e *Entry, ok bool) {
	return lastEntry(dir, isCommit)
}

func isCommit(p *peek) bool { return p.Commit != nil }

// CommitSeal is what says a manifest file is the one a transaction committed:
// the newest commit's manifest_sha256, and its record's bytes (Body) with
// the envelope's hash, signature and key (LastCommitEntry's, without the
// rest of the record decoded).
type CommitSeal struct {
	Sum            string
	Hash, Sig, Key string
	Body           []byte
}

// LastCommitSeal is LastCommitEntry for `logist status`'s trust in the manifest
// file (which it checks against the signature): the record is not decoded
// beyond the commit's sum. A legacy line's CommitSeal has no Body and no key.
func LastCommitSeal(dir string) (CommitSeal, bool) {
	_, p, env, ok := lastLine(dir, isCommit)
	if !ok {
		return CommitSeal{}, false
	}
	return CommitSeal{Sum: p.Commit.Sum, Hash: env.Hash, Sig: env.Sig, Key: env.Key, Body: []byte(env.Rec)}, true
}

// LastResponse returns the newest response record (an agent's answer and
// how it was judged) in the end of dir's active history file (its last
// 256 KiB); ok is false when there is none there (none yet, or the history
// has just rotated).
func LastResponse(dir string) (r *Record, ok bool) {
	return lastResponse(dir, func([]string) bool { return true })
}

// LastWarned is LastResponse for the newest answer that was accepted with
// warnings (a missing evidence file, ...).
func LastWarned(dir string) (r *Record, ok bool) {
	return lastResponse(dir, func(warnings []string) bool { return len(warnings) > 0 }, []byte(`"warnings":[`))
}

func lastResponse(dir string, match func(warnings []string) bool, hints ...[]byte) (*Record, bool) {
	// A record's JSON holds its fields as the encoder writes them; agent
	// text cannot forge them (quotes in strings are escaped).
	hints = append(hints, []byte(`"type":"response"`))
	e, ok := lastEntry(dir, func(p *peek) bool {
		return p.Type == TypeResponse && p.Response != nil && match(p.Response.Warnings)
	}, hints...)
	if !ok {
		return nil, false
	}
	return &e.Record, true
}

// ReadLast reads the end of the history in dir: the records of its calls
// newest interactions and what followed them (calls > 0; 0 or less: all),
// archives only if the active file does not hold that many; whole says
// they are the entire history. A page starts at the first intent of its
// oldest interaction (page.intent), so an interrupted call's records
// (AGENT_INTERRUPTED) are on the page of the call they interrupted. Its
// cost is that of the records it returns, not of the history, so `logist
// history` shows its last page at once at any size. A torn final line or
// an unfinished unit is left out, as ReadAll does.
func ReadLast(dir string, calls int) (recs []Record, whole bool, err error) {
	if calls <= 0 {
		recs, err = ReadAll(dir)
		return recs, true, err
	}
	f, err := openOwn(Path(dir), os.O_RDONLY)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	if err == nil {
		defer f.Close() //nolint:errcheck // read-only
		es, done, atStart, err := lastCalls(f, calls)
		if err != nil {
			return nil, false, err
		}
		if done {
			out := make([]Record, len(es))
			for i := range es {
				out[i] = es[i].Record
			}
			// A page from the active file's first record is the whole
			// history unless older records are stored apart. Asked after
			// the file was read: a rotation since leaves archives, so the
			// answer errs only towards "not whole".
			if !atStart {
				return out, false, nil
			}
			older, err := hasArchives(dir)
			return out, !older, err
		}
	}
	// The active file holds fewer calls: the whole history.
	all, err := ReadAll(dir)
	if err != nil {
		return nil, false, err
	}
	p, start := newPage(calls), -1
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Type != TypeIntent {
			continue
		}
		in, stop := p.intent(&all[i])
		if in {
			start = i
		}
		if stop {
			break
		}
	}
	if !p.full() {
		return all, true, nil
	}
	return all[start:], start == 0, nil
}

// page tells, reading a history's intents from the newest back, where the
// page of its calls newest interactions starts: at the first intent of
// the oldest (an interrupted call is asked again under the same
// interaction number, attempt 2 and on, after the records of its cut).
type page struct {
	calls, n int          // interactions wanted, and seen
	seen     map[int]bool // the interactions seen (an intent without a number is one of its own)
}

func newPage(calls int) *page { return &page{calls: calls, seen: map[int]bool{}} }

func (p *page) full() bool { return p.n >= p.calls }

// intent is what intent r, the next older one, is to the page: in it (the
// page starts at r or before), and whether no older record is in it. Once
// the page holds its calls interactions, reading goes on only past an
// intent of attempt 2 or more (a call asked again; or the first after
// failed ones, numbered on), as far as its interaction's first attempt
// or an intent of another interaction: at most one call's records more.
func (p *page) intent(r *Record) (in, stop bool) {
	if r.Interaction == nil || !p.seen[*r.Interaction] {
		if p.full() {
			return false, true
		}
		p.n++
		if r.Interaction != nil {
			p.seen[*r.Interaction] = true
		}
	}
	return true, p.full() && r.Attempt <= 1
}

// hasArchives reports whether the history in dir has records older than
// its active file's: archives in its index, or a plain one a rotation has
// not sealed yet.
func hasArchives(dir string) (bool, error) {
	idx, err := readIndex(dir)
	if err != nil {
		return false, err
	}
	return len(idx.Archives) > 0 || rotating(dir), nil
}

// lastCalls reads f backwards in blocks until it holds the page of calls
// interactions (page); done false if it reached the start of the file
// first. atStart says the page begins with the file's first record (no
// older record is in the file). Lines are parsed from the newest back,
// each once, and no further than the page's first intent (or the intent
// before it, when the page starts with a re-attempt): its cost is that of
// the page, not of the blocks read.
func lastCalls(f *os.File, calls int) (es []Entry, done, atStart bool, err error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, false, false, err
	}
	off := fi.Size()
	var rest []byte   // the bytes from off not yet parsed: the start of a line
	var rev []Entry   // entries parsed, newest first
	trimmed := false  // the bytes after the last newline (a torn line) are dropped
	unitDone := false // past the newest unit's last record (an unfinished unit is not history)
	// The page's interactions, and its first intent's index in rev; cut
	// is the page: rev up to that intent, oldest first.
	p, first := newPage(calls), -1
	cut := func() []Entry {
		rev = rev[:first+1]
		slices.Reverse(rev)
		return rev
	}
	block := int64(64 << 10)
	for off > 0 {
		n := min(block, off)
		off -= n
		buf := make([]byte, n, n+int64(len(rest)))
		if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return nil, false, false, fmt.Errorf("read history: %w", err)
		}
		buf = append(buf, rest...)
		block = min(block*2, 8<<20)
		if !trimmed {
			i := bytes.LastIndexByte(buf, '\n')
			if i < 0 {
				rest = buf
				continue
			}
			buf, trimmed = buf[:i+1], true
		}
		// buf ends with a newline; its first line is whole only at the
		// file's start.
		for len(buf) > 0 {
			start := bytes.LastIndexByte(buf[:len(buf)-1], '\n') + 1
			if start == 0 && off > 0 {
				break
			}
			e, err := ParseLine(buf[start : len(buf)-1])
			if err != nil {
				return nil, false, false, fmt.Errorf("history record at byte %d is corrupt: %w", off+int64(start), err)
			}
			buf = buf[:start]
			if !unitDone && e.More {
				continue
			}
			unitDone = true
			rev = append(rev, e)
			if e.Type == TypeIntent {
				in, stop := p.intent(&e.Record)
				if in {
					first = len(rev) - 1
				}
				if stop {
					// The page's first intent is the file's first line
					// when it is this one and nothing is left before it.
					return cut(), true, in && off == 0 && start == 0, nil
				}
			}
		}
		rest = buf
	}
	if p.full() {
		// The file starts within the page's oldest interaction's attempts.
		whole := first == len(rev)-1
		return cut(), true, whole, nil
	}
	return nil, false, false, nil
}
