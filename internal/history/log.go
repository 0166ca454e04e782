// Package history is a job's durable, append-only record: every request
// (written before the agent is called), response, transition, steward
// command and recovery point, one JSON line each in history.jsonl, fsync'd
// before anything that depends on it is acknowledged. jobHistory.json, the
// seed's format, is materialised from it.
package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/logist/logist/internal/atomicfile"
)

// FileName is the append-only log inside the job folder.
const FileName = "history.jsonl"

// MaxRecord bounds one record line; longer lines are corrupt.
const MaxRecord = 64 << 20

// Log appends to one job's history. Callers hold the job's lock while they
// use it, so a Log may be shared by processes taking turns: Refresh picks up
// what others appended since.
type Log struct {
	path  string
	f     *os.File
	size  int64
	state State
	now   func() time.Time
}

// State is what the runner needs to know from the history without reading
// it again: counters and the open intent, if any.
type State struct {
	NextSeq         int64
	NextInteraction int
	// OpenIntent is the last intent with no response after it: a call that
	// was in flight when the process stopped.
	OpenIntent *Record
	// Responses counts responses per role (the scripted agent's cursor).
	Responses map[string]int
	// LastCheckpoint is the newest recovery point id.
	LastCheckpoint string
}

// TornTail reports bytes cut off a history because they were an incomplete
// last record.
type TornTail struct {
	Path   string
	Offset int64
	Bytes  int64
}

// Open opens (creating if needed) the history in dir, cuts off a torn last
// record, and reads the state. The torn tail, if any, is returned so the
// caller can log and count it.
func Open(dir string) (*Log, *TornTail, error) {
	p := filepath.Join(dir, FileName)
	_, statErr := os.Stat(p)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open history: %w", err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		if err := atomicfile.SyncDir(dir); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	l := &Log{path: p, f: f, now: time.Now, state: State{Responses: map[string]int{}}}
	torn, err := l.scan(0, true)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return l, torn, nil
}

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }

// State returns the current counters.
func (l *Log) State() State { return l.state }

// Path is the log's file.
func (l *Log) Path() string { return l.path }

// Refresh reads records appended by another process since the last read.
func (l *Log) Refresh() error {
	fi, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("stat history: %w", err)
	}
	switch {
	case fi.Size() == l.size:
		return nil
	case fi.Size() < l.size:
		l.state = State{Responses: map[string]int{}}
		l.size = 0
		_, err = l.scan(0, true)
	default:
		_, err = l.scan(l.size, true)
	}
	return err
}

// scan reads records from off to the end, updating state. With repair, an
// incomplete or unparseable final line is truncated away.
func (l *Log) scan(off int64, repair bool) (*TornTail, error) {
	if _, err := l.f.Seek(off, io.SeekStart); err != nil {
		return nil, fmt.Errorf("seek history: %w", err)
	}
	r := bufio.NewReaderSize(l.f, 64<<10)
	pos := off
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && err == nil {
			var rec Record
			if jerr := json.Unmarshal(line, &rec); jerr != nil {
				// A bad line followed by more data is corruption, not a
				// torn write: refuse rather than guess.
				if _, perr := r.Peek(1); perr == nil {
					return nil, fmt.Errorf("history %s: record at byte %d is corrupt: %v", l.path, pos, jerr)
				}
				return l.cut(pos, int64(len(line)), repair)
			}
			if rec.V > RecordVersion {
				return nil, fmt.Errorf("history %s: record %d has version %d, newer than this logist supports (%d)", l.path, rec.Seq, rec.V, RecordVersion)
			}
			l.state.apply(&rec)
			pos += int64(len(line))
			continue
		}
		if err == io.EOF {
			if len(line) > 0 {
				return l.cut(pos, int64(len(line)), repair)
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

func (s *State) apply(r *Record) {
	if r.Seq >= s.NextSeq {
		s.NextSeq = r.Seq + 1
	}
	if r.Interaction != nil && *r.Interaction >= s.NextInteraction {
		s.NextInteraction = *r.Interaction + 1
	}
	switch r.Type {
	case TypeIntent:
		rc := *r
		s.OpenIntent = &rc
	case TypeResponse:
		s.OpenIntent = nil
		if s.Responses == nil {
			s.Responses = map[string]int{}
		}
		s.Responses[r.Role]++
	case TypeRecoveryPoint:
		if r.RecoveryPoint != nil {
			s.LastCheckpoint = r.RecoveryPoint.CheckpointID
		}
	case TypeSteward:
		// A steward command (halt, rollback) settles an open intent: the
		// call it belonged to will not be resumed.
		if r.Steward != nil && (r.Steward.Command == "halt" || r.Steward.Command == "rollback") {
			s.OpenIntent = nil
		}
	}
}

// Append assigns the record its sequence number and time, writes it as one
// line and fsyncs before returning.
func (l *Log) Append(rec *Record) error {
	rec.V = RecordVersion
	rec.Seq = l.state.NextSeq
	if rec.Time == "" {
		rec.Time = l.now().UTC().Format(time.RFC3339Nano)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode history record: %w", err)
	}
	b = append(b, '\n')
	n, err := l.f.Write(b)
	if err != nil {
		// Cut off whatever part reached the file so the log stays whole.
		if n > 0 {
			_ = l.f.Truncate(l.size)
		}
		return fmt.Errorf("append history: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("fsync history: %w", err)
	}
	l.size += int64(n)
	l.state.apply(rec)
	return nil
}

// NewInteraction reserves the next interaction number.
func (l *Log) NewInteraction() int { return l.state.NextInteraction }

// ReadAll reads every record of the history in dir. A torn final line is
// skipped (not repaired: readers never write).
func ReadAll(dir string) ([]Record, error) {
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	var out []Record
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // torn tail: in flight or cut by a crash
		}
		var rec Record
		if err := json.Unmarshal(data[:i], &rec); err != nil {
			return out, fmt.Errorf("history record %d is corrupt: %w", len(out), err)
		}
		if rec.V > RecordVersion {
			return out, fmt.Errorf("history record %d has version %d, newer than this logist supports (%d)", rec.Seq, rec.V, RecordVersion)
		}
		out = append(out, rec)
		data = data[i+1:]
	}
	return out, nil
}
