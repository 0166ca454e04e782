// Package history is a job's durable, append-only record: every request
// (written before the agent is called), response, transition, steward
// command and recovery point, one line each in history.jsonl, fsync'd before
// anything that depends on it is acknowledged. Each line is an envelope
// holding the record's exact bytes, their SHA-256, and an Ed25519 signature;
// each record names its predecessor's hash, so the lines form a chain that
// `logist verify` checks. Past a size limit the file is rotated into gzip
// archives listed in an index. jobHistory.json, the seed's format, is
// materialised from the records. The package owns these files: others
// locate, list, test for and follow them only through it (files.go,
// follow.go), so a change of layout is made here alone.
package history

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/logist/logist/internal/atomicfile"
)

// DefaultMaxBytes is the size past which the active file is rotated.
const DefaultMaxBytes = 100 << 20

// Signer signs record hashes (internal/signing's Key).
type Signer interface {
	ID() string
	Sign(msg []byte) []byte
}

// Options tune a Log.
type Options struct {
	// Signer signs each appended record; nil appends unsigned records
	// (tests), which verify reports.
	Signer Signer
	// MaxBytes rotates the active file once it reaches this size;
	// 0 means DefaultMaxBytes, a negative value never rotates.
	MaxBytes int64
	// Write, if set, replaces an append's write to the file. Tests only:
	// it injects short writes and errors such as ENOSPC.
	Write func(f *os.File, line []byte) (int, error)
	// Observe, if set, hears each durable append: bytes written and how
	// long the fsync took (metrics).
	Observe func(bytes int, fsync time.Duration)
	// Commit, if set, is the store a unit is committed through: it gets
	// the unit's sealed lines and the log's own write of them (Unit.Write:
	// one write and one fsync), and the unit is stored when it returns nil
	// having called Write once. An error, or a unit it did not write,
	// refuses the append. The store decides and keeps its record: file
	// mode's (clusterstore.FolderStore on the jobs folder) writes the unit
	// with Write itself; cluster mode's stores the lines in the system of
	// record under the lease's fence first, then Write keeps the node's
	// folder (a node whose lease was fenced off writes nothing more).
	Commit func(u Unit) error
}

// Unit is a unit the log is appending, as Options.Commit gets it.
type Unit struct {
	// Dir is the job's folder; Lines the unit's envelopes, in order,
	// Links their links as the log sealed them (Links[i] is Lines[i]'s)
	// and Records what they hold (read only).
	Dir     string
	Lines   [][]byte
	Links   []Link
	Records []*Record
	// Write writes Lines to the history durably (the log's own append,
	// which nothing else may do for it); it may be called once.
	Write func() error
}

// Log appends to one job's history. Callers hold the job's lock while they
// use it, so a Log may be shared by processes taking turns: Refresh picks up
// what others appended since.
type Log struct {
	dir string
	// settleParent: the folder's entry in its parent is not known
	// durable (this Log created the history in a folder this process
	// did not make, or has not fsync'd the parent of since): the first
	// unit fsyncs the parent too.
	settleParent bool
	path         string
	f            *os.File
	// fi is f's fstat as taken once (nil: not yet): a descriptor's inode
	// never changes, so Refresh compares the path's against it without
	// an fstat per transaction.
	fi       os.FileInfo
	size     int64
	state    State
	lastHash string
	opts     Options
	now      func() time.Time
	// recs is every record of a short history, in order, while recsOK:
	// the engine materialises jobHistory.json from it without reading
	// and parsing the file again. Past recsMax records or recsMaxBytes
	// of their lines (recsBytes so far), or once the history has
	// archives, it is dropped, to bound memory.
	recs      []Record
	recsOK    bool
	recsBytes int64
	// head is the signed head as read at open (nil: none); headF and
	// headLen are the head file as this Log writes it (head.go).
	head    *Head
	headF   *os.File
	headLen int
	// The scan mark (mark.go): the number of archives, where the last
	// whole line of the active file begins and its hash ("" for a legacy
	// line), and the offset the mark on disk covers.
	archives      int
	lastLineStart int64
	lastLineHash  string
	markOff       int64
	// scanFrom is where the open's scan began (tests).
	scanFrom int64
}

// A job of a few hundred calls keeps its records to its end, when its
// jobHistory.json is built from them: reading and parsing the history
// again then cost about as much as a tenth of the job's transactions.
const (
	recsMax      = 1024
	recsMaxBytes = 2 << 20
)

// keep keeps a unit's records, whose lines took n bytes.
func (l *Log) keep(unit []*Record, n int64) {
	if !l.recsOK {
		return
	}
	if len(l.recs)+len(unit) > recsMax || l.recsBytes+n > recsMaxBytes {
		l.recs, l.recsOK, l.recsBytes = nil, false, 0
		return
	}
	for _, r := range unit {
		c := *r
		// The manifest a commit holds is the bulk of a unit and not
		// part of jobHistory.json (Materialise).
		c.Commit = nil
		l.recs = append(l.recs, c)
	}
	l.recsBytes += n
}

// Records returns every record of the history, if it is short enough to
// be kept in memory (ok false otherwise: read it with ReadAll).
func (l *Log) Records() (recs []Record, ok bool) {
	if !l.recsOK {
		return nil, false
	}
	return l.recs, true
}

// State is what the runner needs to know from the history without reading
// it again: counters and the open intent, if any.
type State struct {
	NextSeq         int64 `json:"next_seq"`
	NextInteraction int   `json:"next_interaction"`
	// OpenIntent is the last intent with no response after it: a call that
	// was in flight when the process stopped.
	OpenIntent *Record `json:"open_intent,omitempty"`
	// Responses counts responses per role (the scripted agent's cursor).
	Responses map[string]int `json:"responses"`
	// LastCheckpoint is the job's current checkpoint: the newest
	// recovery point, or the one a later rollback returned to
	// (Record.Checkpoint). Logs, transitions and error records name it.
	LastCheckpoint string `json:"last_checkpoint,omitempty"`
	// CheckpointSnapshot is the current checkpoint's workspace snapshot
	// (nil if it has none or it is not known).
	CheckpointSnapshot *SnapshotRef `json:"checkpoint_snapshot,omitempty"`
	// Sessions is the last agent session id per "phase/role", so a later
	// call of the same phase can continue it. A rollback forgets them (the
	// sessions remember work that was undone).
	Sessions map[string]string `json:"sessions,omitempty"`
	// LastCommit is the newest manifest change (Record.Commit).
	LastCommit *Commit `json:"last_commit,omitempty"`
}

// SessionKey keys State.Sessions.
func SessionKey(phase, role string) string { return phase + "/" + role }

// TornTail reports bytes cut off a history because they were an incomplete
// last record.
type TornTail struct {
	Path   string
	Offset int64
	Bytes  int64
}

// Open opens the history in dir without signing; see OpenWith.
func Open(dir string) (*Log, *TornTail, error) { return OpenWith(dir, Options{}) }

// OpenWith opens (creating if needed) the history in dir, finishes a
// rotation a crash interrupted, cuts off a torn last record, and reads the
// state. The torn tail, if any, is returned so the caller can log and count
// it.
func OpenWith(dir string, opts Options) (*Log, *TornTail, error) {
	if opts.MaxBytes == 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	l := &Log{dir: dir, path: Path(dir), opts: opts, now: time.Now}
	idx, err := readIndex(dir)
	if err != nil {
		return nil, nil, err
	}
	if rotationLeft(dir, len(idx.Archives)) {
		if err := l.recoverRotation(); err != nil {
			return nil, nil, err
		}
		if idx, err = readIndex(dir); err != nil {
			return nil, nil, err
		}
	}
	l.state = idx.State.clone()
	l.lastHash = idx.LastHash
	l.recsOK = len(idx.Archives) == 0
	if l.head, err = ReadHead(dir); err != nil {
		return nil, nil, err
	}
	fi0, statErr := os.Stat(l.path)
	f, err := openOwn(l.path, os.O_RDWR|os.O_CREATE|os.O_APPEND)
	if err != nil {
		return nil, nil, fmt.Errorf("open history: %w", err)
	}
	if errors.Is(statErr, os.ErrNotExist) || (statErr == nil && fi0.Size() == 0 && len(idx.Archives) == 0) {
		// The new file's entry is made durable before the first record is
		// (Append), in one folder fsync with the job's other new entries;
		// so is the folder's own entry in its parent, which whoever made
		// the folder may not have fsync'd yet (a placement, or a process
		// that died before its first record), unless this process made
		// the folder and has fsync'd its parent since (jobs placed while
		// others run share the jobs folder's fsyncs).
		//
		// An empty file found here is settled as a new one: no record
		// depends on it yet, so nobody need have fsync'd its entry (a
		// preparation, Prepare, or a process that died before its first
		// record) — unless this process prepared it and fsync'd the
		// folder since (EntryDurable), as it fsync'd the folder's entry
		// in its parent: the start then makes no folder fsync.
		if !atomicfile.EntryDurable(l.path) {
			atomicfile.MarkDirty(dir)
		}
		if !atomicfile.EntryDurable(dir) {
			atomicfile.MarkDirty(filepath.Dir(dir))
			l.settleParent = true
		}
	}
	l.f = f
	l.archives = len(idx.Archives)
	from := int64(0)
	fi, err := f.Stat()
	if err == nil {
		l.fi = fi
	}
	if err == nil && fi.Size() >= markEvery {
		if mk, ok := readMark(dir, f, fi.Size(), l.archives); ok {
			l.state, l.lastHash, l.recsOK = mk.State, mk.LastHash, false
			l.lastLineStart, l.lastLineHash, l.markOff = mk.LineStart, mk.LastHash, mk.Off
			from = mk.Off
		}
	}
	l.scanFrom = from
	torn, err := l.scan(from, true)
	if err == nil {
		err = CheckHead(l.path, l.head, l.state.NextSeq-1, l.lastHash)
	}
	if err != nil {
		_ = f.Close() // nothing written; the error is the scan's
		return nil, nil, err
	}
	l.saveMark()
	return l, torn, nil
}

// Close closes the file.
func (l *Log) Close() error {
	if l.headF != nil {
		_ = l.headF.Close() // written in place, never fsync'd (head.go)
	}
	return l.f.Close()
}

// State returns the current counters.
func (l *Log) State() State { return l.state }

// LastHash is the hash of the newest chained record (genesis if none).
func (l *Log) LastHash() string {
	if l.lastHash == "" {
		return GenesisHash
	}
	return l.lastHash
}

// Intact reports whether the active file ends where the log's last
// durable record does (a failed append cut what it had written).
func (l *Log) Intact() bool {
	fi, err := os.Stat(l.path)
	return err == nil && fi.Size() == l.size
}

// Size is the active file's length as far as this Log has read or written
// it: unchanged after Refresh means nobody appended since.
func (l *Log) Size() int64 { return l.size }

// Path is the active file.
func (l *Log) Path() string { return l.path }

// fstat is (*os.File).Stat; tests count its calls.
var fstat = (*os.File).Stat

// Refresh reads records appended by another process since the last read,
// including a rotation it made, or opens the history again if its file
// was replaced (another inode at the path) or cut.
func (l *Log) Refresh() error {
	cur, err := os.Stat(l.path)
	if err != nil {
		return fmt.Errorf("stat history: %w", err)
	}
	mine := l.fi
	if mine == nil {
		if mine, err = fstat(l.f); err != nil {
			return fmt.Errorf("stat history: %w", err)
		}
		l.fi = mine
	}
	if !os.SameFile(cur, mine) || cur.Size() < l.size {
		// Rotated or replaced under us: start again from the index.
		nl, _, err := OpenWith(l.dir, l.opts)
		if err != nil {
			return err
		}
		_ = l.f.Close() // the old file: each record was fsync'd as appended
		if l.headF != nil {
			_ = l.headF.Close() // the new Log opens its own
		}
		*l = *nl
		return nil
	}
	if cur.Size() == l.size {
		return nil
	}
	_, err = l.scan(l.size, true)
	l.saveMark()
	return err
}

// scanReaders lends scan its 64 KiB read buffer. Every job's pickup opens
// its history, most often a new, empty file, and a buffer made for each
// open was the largest allocation of a job (a fifth of logistd's bytes
// allocated over scenario 3's workload), zeroed for nothing.
var scanReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// scan reads records from off to the end, updating state. With repair, an
// incomplete or unparseable final line is truncated away, and so is a
// final unit whose last record is missing (Record.More): AppendBatch
// writes a unit at once, so only a crash leaves part of one.
func (l *Log) scan(off int64, repair bool) (*TornTail, error) {
	if _, err := l.f.Seek(off, io.SeekStart); err != nil {
		return nil, fmt.Errorf("seek history: %w", err)
	}
	r := scanReaders.Get().(*bufio.Reader)
	r.Reset(l.f)
	defer func() {
		r.Reset(nil) // hold no file in the pool
		scanReaders.Put(r)
	}()
	pos := off
	// unit holds the records of a unit not yet complete, from byte start.
	var unit []Entry
	start := off
	var lineStart int64
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && err == nil {
			e, perr := ParseLine(line)
			if perr != nil {
				// A bad line followed by more data is corruption, not a
				// torn write: refuse rather than guess.
				if _, peekErr := r.Peek(1); peekErr == nil {
					return nil, fmt.Errorf("history %s: record at byte %d is corrupt: %v", l.path, pos, perr)
				}
				var tooNew *VersionError
				if errors.As(perr, &tooNew) {
					return nil, fmt.Errorf("history %s: %w", l.path, perr)
				}
				return l.cut(start, pos+int64(len(line))-start, repair)
			}
			lineStart = pos
			pos += int64(len(line))
			unit = append(unit, e)
			if e.More {
				continue
			}
			l.lastLineStart, l.lastLineHash = lineStart, e.Hash
			kept := make([]*Record, len(unit))
			for i := range unit {
				l.state.apply(&unit[i].Record)
				kept[i] = &unit[i].Record
				if !unit[i].Legacy {
					l.lastHash = unit[i].Hash
				}
			}
			l.keep(kept, pos-start)
			unit, start = unit[:0], pos
			continue
		}
		if err == io.EOF {
			if len(line) > 0 || len(unit) > 0 {
				return l.cut(start, pos+int64(len(line))-start, repair)
			}
			l.size = pos
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read history: %w", err)
		}
	}
}

func (l *Log) cut(pos, n int64, repair bool) (*TornTail, error) {
	if l.head != nil && l.head.Seq >= l.state.NextSeq {
		// Not torn by a crash: the head says these records were
		// committed. Refused, and the file left as it is.
		return nil, &MissingError{Path: l.path, Head: *l.head, LastSeq: l.state.NextSeq - 1, LastHash: l.lastHash}
	}
	if !repair {
		return nil, fmt.Errorf("history %s: incomplete record at byte %d", l.path, pos)
	}
	if err := l.f.Truncate(pos); err != nil {
		return nil, fmt.Errorf("truncate torn history tail: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return nil, fmt.Errorf("fsync history: %w", err)
	}
	l.size = pos
	return &TornTail{Path: l.path, Offset: pos, Bytes: n}, nil
}

// With is s as it will be once recs are written after it (records a
// transaction holds for its commit: their interactions, a response that
// closes the open intent, sessions, checkpoints). s is not changed.
func (s State) With(recs ...*Record) State {
	if len(recs) == 0 {
		return s
	}
	c := s.clone()
	for _, r := range recs {
		c.apply(r)
	}
	return c
}

func (s State) clone() State {
	c := s
	c.Responses = map[string]int{}
	for k, v := range s.Responses {
		c.Responses[k] = v
	}
	if s.Sessions != nil {
		c.Sessions = make(map[string]string, len(s.Sessions))
		for k, v := range s.Sessions {
			c.Sessions[k] = v
		}
	}
	if s.OpenIntent != nil {
		oi := *s.OpenIntent
		c.OpenIntent = &oi
	}
	return c
}

func (s *State) apply(r *Record) {
	if r.Seq >= s.NextSeq {
		s.NextSeq = r.Seq + 1
	}
	if r.Interaction != nil && *r.Interaction >= s.NextInteraction {
		s.NextInteraction = *r.Interaction + 1
	}
	if r.Commit != nil {
		s.LastCommit = r.Commit
	}
	switch r.Type {
	case TypeIntent:
		rc := *r
		rc.Commit = nil
		s.OpenIntent = &rc
	case TypeResponse:
		s.OpenIntent = nil
		if s.Responses == nil {
			s.Responses = map[string]int{}
		}
		s.Responses[r.Role]++
		if r.Response != nil && r.Response.SessionID != "" {
			if s.Sessions == nil {
				s.Sessions = map[string]string{}
			}
			s.Sessions[SessionKey(r.Phase, r.Role)] = r.Response.SessionID
		}
	case TypeSteward:
		// A steward command (halt, rollback) settles an open intent: the
		// call it belonged to will not be resumed.
		if r.Steward != nil && (r.Steward.Command == CommandHalt || r.Steward.Command == CommandRollback) {
			s.OpenIntent = nil
		}
		if r.Steward != nil && r.Steward.Command == CommandRollback {
			s.Sessions = nil
		}
	}
	if id, snap, ok := r.Checkpoint(); ok {
		s.LastCheckpoint, s.CheckpointSnapshot = id, snap
	}
}

// Append assigns the record its sequence number, time and predecessor's
// hash, writes it as one line (envelope with hash and signature) and fsyncs
// before returning. The write costs the size of the record, not of the
// history.
func (l *Log) Append(rec *Record) error {
	rec.More = false // a unit of one
	return l.appendUnit([]*Record{rec})
}

// AppendBatch appends recs in order as Append would, as one unit: one
// write and one fsync for all of them, and all or none of them survive a
// crash (every record but the last is marked More; the next open cuts a
// unit without its last record). On error none of them is stored.
func (l *Log) AppendBatch(recs []*Record) error {
	if len(recs) == 0 {
		return nil
	}
	for i, rec := range recs {
		rec.More = i < len(recs)-1
	}
	return l.appendUnit(recs)
}

// unitRoom is the room a unit's buffer starts with per record: most
// records are smaller (an intent with its prompts about 3 KB).
const unitRoom = 1536

func (l *Log) appendUnit(recs []*Record) error {
	st := l.state.clone()
	seq, last := l.state.NextSeq, l.LastHash()
	var links []Link
	if l.opts.Commit != nil {
		links = make([]Link, 0, len(recs))
	}
	// The unit's one write: its lines encoded one after the other into
	// one buffer (appendLine).
	buf := make([]byte, 0, unitRoom*len(recs))
	ends := make([]int, len(recs))
	for i, rec := range recs {
		rec.normalize(true)
		rec.V, rec.Seq, rec.PrevHash = RecordVersion, seq, last
		if rec.Time == "" {
			rec.Time = l.now().UTC().Format(time.RFC3339Nano)
		}
		var hash string
		var err error
		if buf, hash, err = appendLine(buf, rec, l.opts.Signer); err != nil {
			return err
		}
		ends[i] = len(buf)
		if l.opts.Commit != nil {
			links = append(links, linkOf(rec, hash))
		}
		last = hash
		st.apply(rec)
		seq++
	}
	lastLen := len(buf)
	if len(ends) > 1 {
		lastLen -= ends[len(ends)-2]
	}
	if l.opts.Commit == nil {
		return l.writeUnit(buf, recs, st, seq, last, lastLen)
	}
	lines := make([][]byte, len(recs))
	from := 0
	for i, end := range ends {
		lines[i], from = buf[from:end:end], end
	}
	written := false
	var werr error
	err := l.opts.Commit(Unit{Dir: l.dir, Lines: lines, Links: links, Records: recs, Write: func() error {
		if written {
			return errors.New("append history: a unit is written once")
		}
		written = true
		werr = l.writeUnit(buf, recs, st, seq, last, lastLen)
		return werr
	}})
	switch {
	case err == nil && !written:
		return errors.New("append history: the store did not write the unit")
	case err == nil:
		return werr // a store that ignored its write's error does not store the unit
	case err != nil && (werr == nil || !errors.Is(err, werr)):
		return fmt.Errorf("append history: %w", err)
	}
	return err
}

// AppendSealed appends lines, envelopes sealed elsewhere (Seal's output,
// signed by whoever sealed them), as one unit, through the very write
// Append and AppendBatch use (one write, one fsync, the head, the mark,
// rotation): the file-mode implementation of cluster mode's storage seam
// (clusterstore) stores records this way. The lines must continue this
// history (sequence, predecessor, the hash of each body) and the unit
// must end with a record that is not More; else nothing is written. No
// Commit is called: the lines come from the system of record.
func (l *Log) AppendSealed(lines [][]byte) error {
	if len(lines) == 0 {
		return nil
	}
	st := l.state.clone()
	seq, last := l.state.NextSeq, l.LastHash()
	var buf []byte
	lastLen := 0
	recs := make([]*Record, 0, len(lines))
	for i, line := range lines {
		if len(line) == 0 || line[len(line)-1] != '\n' {
			line = append(line[:len(line):len(line)], '\n')
		}
		e, err := ParseLine(line[:len(line)-1])
		if err != nil {
			return fmt.Errorf("append history: record %d: %w", seq, err)
		}
		sum := sha256.Sum256(e.Body)
		if e.Legacy || hex.EncodeToString(sum[:]) != e.Hash {
			return fmt.Errorf("append history: record %d is not a sealed envelope", seq)
		}
		if e.Seq != seq || e.PrevHash != last {
			return fmt.Errorf("append history: record %d (after %.12s) does not follow record %d (%.12s)", e.Seq, e.PrevHash, seq-1, last)
		}
		if !bytes.Equal(line, e.Line()) {
			return fmt.Errorf("append history: record %d is not an envelope as Logist writes it", e.Seq)
		}
		if e.More != (i < len(lines)-1) {
			return fmt.Errorf("append history: record %d: a unit's records but its last are More", e.Seq)
		}
		rec := e.Record
		recs = append(recs, &rec)
		buf = append(buf, line...)
		lastLen = len(line)
		st.apply(&rec)
		last = e.Hash
		seq++
	}
	return l.writeUnit(buf, recs, st, seq, last, lastLen)
}

// writeUnit writes a unit's encoded lines buf (recs decoded, st the
// state after them, seq the next sequence, last the last hash, lastLen
// the last line's length) durably, or cuts off whatever part of it
// reached the file.
func (l *Log) writeUnit(buf []byte, recs []*Record, st State, seq int64, last string, lastLen int) error {
	// Entries created in the job folder (this file, the workspace, the
	// snapshots folder) and the folder's own entry in its parent (a job
	// just placed) are durable before the records that depend on them are
	// acknowledged. A new history's first unit is not findable until they
	// are (its own entry is among them), so their fsyncs run beside the
	// file's own. Once the history holds records, a unit that depends on
	// a new entry (a job's first snapshots folder) would be durable and
	// findable before it: they are settled first. Usually nothing is
	// left to wait for then: the engine starts those fsyncs when it makes
	// the entry (SettleStart), beside the rest of the transaction.
	settled := l.SettleStart()
	if l.size > 0 {
		if err := settled(); err != nil {
			return fmt.Errorf("append history: %w", err)
		}
		settled = func() error { return nil }
	}
	write := l.f.Write
	if l.opts.Write != nil {
		write = func(p []byte) (int, error) { return l.opts.Write(l.f, p) }
	}
	n, err := write(buf)
	if err == nil && n < len(buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		// Cut off whatever part reached the file so the log stays whole.
		if n > 0 {
			_ = l.f.Truncate(l.size)
		}
		return fmt.Errorf("append history: %w", err)
	}
	syncStart := time.Now()
	if err := l.f.Sync(); err != nil {
		_ = l.f.Truncate(l.size)
		return fmt.Errorf("fsync history: %w", err)
	}
	if err := settled(); err != nil {
		// Not acknowledged: the records go, as on a failed fsync.
		_ = l.f.Truncate(l.size)
		return fmt.Errorf("append history: %w", err)
	}
	l.settleParent = false
	if l.opts.Observe != nil {
		l.opts.Observe(n, time.Since(syncStart))
	}
	l.size += int64(n)
	l.lastHash = last
	l.lastLineStart, l.lastLineHash = l.size-int64(lastLen), last
	l.state = st
	l.writeHead(seq-1, last)
	l.keep(recs, int64(n))
	if l.opts.MaxBytes > 0 && l.size >= l.opts.MaxBytes {
		if err := l.rotate(); err != nil {
			// The records are durable; a failed rotation is retried at
			// the next append or open.
			return fmt.Errorf("rotate history (records %d-%d are stored): %w", recs[0].Seq, recs[len(recs)-1].Seq, err)
		}
	}
	l.saveMark()
	return nil
}

// SettleStart starts the fsyncs of the folders the next unit's records
// depend on, where they have changes to settle: the history's own folder,
// and its entry in its parent while that is not known durable (a new
// history; not merely because other jobs changed the parent). It returns
// a wait for them. The engine starts them once a new job's folder has
// every entry its first unit needs, so that they run beside the work
// before that unit rather than beside its fsync; the unit's append waits
// for them all the same (an fsync in flight that covers a folder's
// changes is joined), so nothing is acknowledged earlier.
func (l *Log) SettleStart() (wait func() error) {
	if l.settleParent {
		return atomicfile.SyncDirtyStart(l.dir, filepath.Dir(l.dir))
	}
	return atomicfile.SyncDirtyStart(l.dir)
}

// Warm encodes and signs a throwaway record of each kind the engine writes
// at a job's start, so that the first real one does not pay for building
// the JSON encoders of these types and the signer's first use.
func Warm(signer Signer) {
	n := 0
	for _, rec := range []*Record{
		{Type: TypeIntent, Interaction: &n, Request: &Request{Metadata: map[string]any{"attempt": 1}}},
		{Type: TypeResponse, Interaction: &n, Response: &Response{}},
		{Type: TypeRecoveryPoint, RecoveryPoint: &RecoveryPoint{}, Commit: &Commit{}},
	} {
		_, _, _ = encodeLine(rec, signer) // a warm-up: the result is not wanted
	}
}

// Line is the entry as its history stores it (newline included); nil for
// a legacy line.
func (e *Entry) Line() []byte {
	if e.Legacy {
		return nil
	}
	return envelopeLine(e.Body, e.Hash, e.Key, e.Sig)
}

// Entry is a record as stored, with what protects it.
type Entry struct {
	Record
	Hash string
	Sig  string
	Key  string
	// Body is the exact bytes the hash covers (nil for legacy lines).
	Body []byte
	// Legacy marks a version 1 line: migrated, unprotected.
	Legacy bool
}

// VersionError is a record from a newer Logist.
type VersionError struct{ V int }

func (e *VersionError) Error() string {
	return fmt.Sprintf("record version %d is newer than this logist supports (%d); upgrade logist", e.V, RecordVersion)
}

type envelope struct {
	Hash string          `json:"hash"`
	Key  string          `json:"key"`
	Sig  string          `json:"sig"`
	Rec  json.RawMessage `json:"rec"`
}

// ParseLine decodes one stored line (with or without its newline): a
// version 2 envelope, or a version 1 bare record (migrated).
func ParseLine(line []byte) (Entry, error) {
	line = bytes.TrimRight(line, "\n")
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil {
		return Entry{}, err
	}
	if env.Rec == nil {
		// Version 1: the record itself.
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			return Entry{}, err
		}
		if rec.V > RecordVersion {
			return Entry{}, &VersionError{rec.V}
		}
		if rec.V != 1 || rec.Type == "" {
			return Entry{}, fmt.Errorf("not a history record")
		}
		rec.normalize(false)
		return Entry{Record: rec, Legacy: true}, nil
	}
	var rec Record
	if err := json.Unmarshal(env.Rec, &rec); err != nil {
		return Entry{}, err
	}
	if rec.V > RecordVersion {
		return Entry{}, &VersionError{rec.V}
	}
	if rec.V < 2 || rec.Type == "" {
		return Entry{}, fmt.Errorf("not a history record")
	}
	rec.normalize(false)
	return Entry{Record: rec, Hash: env.Hash, Sig: env.Sig, Key: env.Key, Body: []byte(env.Rec)}, nil
}

// NewInteraction reserves the next interaction number.
func (l *Log) NewInteraction() int { return l.state.NextInteraction }

// ReadAll reads every record of the history in dir, archives included. A
// torn final line is skipped (not repaired: readers never write).
func ReadAll(dir string) ([]Record, error) {
	es, err := ReadEntries(dir)
	if len(es) == 0 {
		return nil, err
	}
	out := make([]Record, len(es))
	for i := range es {
		out[i] = es[i].Record
	}
	return out, err
}

// ErrBusy says a history kept rotating while it was read.
var ErrBusy = errors.New("history kept rotating while it was read; try again")

// ReadEntries reads every stored entry, archives first, then the active
// file. It is safe against a concurrent rotation: if the index changes while
// reading, it reads again, and rather than return a history with a gap it
// fails with ErrBusy after a few seconds of continuous rotation.
func ReadEntries(dir string) ([]Entry, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		before, err := readIndex(dir)
		if err != nil {
			return nil, err
		}
		var out []Entry
		for _, a := range before.Archives {
			es, err := readArchive(dir, a)
			if err != nil {
				return out, err
			}
			out = append(out, es...)
		}
		data, err := readOwn(Path(dir), -1)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return out, fmt.Errorf("read history: %w", err)
		}
		es, perr := parseLines(data, len(out))
		out = append(out, es...)
		after, err := readIndex(dir)
		if err != nil {
			return nil, err
		}
		if len(after.Archives) == len(before.Archives) {
			return out, perr
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: %w", dir, ErrBusy)
		}
	}
}

func parseLines(data []byte, base int) ([]Entry, error) {
	var out []Entry
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // torn tail: in flight or cut by a crash
		}
		e, err := ParseLine(data[:i])
		if err != nil {
			return out, fmt.Errorf("history record %d is corrupt: %w", base+len(out), err)
		}
		out = append(out, e)
		data = data[i+1:]
	}
	// A unit without its last record is being written, or was cut short
	// by a crash (the writer's next open removes it): not yet history.
	for len(out) > 0 && out[len(out)-1].More {
		out = out[:len(out)-1]
	}
	return out, nil
}
