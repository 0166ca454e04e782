package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
)

var cmdLogs = &command{
	name: "logs", args: "JOB [-f] [--exit-on-finish]",
	summary: "print a job's history as readable lines (requests, answers, transitions, steward commands, errors); -f follows it as it is written",
	example: "  logist logs fix-login                      # everything so far\n" +
		"  logist logs fix-login -f                   # and then follow, until Ctrl-C\n" +
		"  logist logs fix-login -f --exit-on-finish  # follow until the job stops (CI)\n" +
		"  logist logs fix-login --format json        # one history record per line\n",
	flags: func(fs *pflag.FlagSet) {
		fs.BoolP("follow", "f", false, "keep printing records as they are appended, until interrupted")
		fs.Bool("exit-on-finish", false, "with -f: exit once the job has stopped (SUCCESS, CANCELED, or waiting for a steward: INTERVENTION_REQUIRED, HALTED_*)")
	},
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		follow, _ := e.fs.GetBool("follow")
		exitOnFinish, _ := e.fs.GetBool("exit-on-finish")
		dir := e.store.JobDir(id)
		if _, err := os.Stat(filepath.Join(dir, jobstore.ManifestFile)); err != nil {
			return nil, fmt.Errorf("job %s: %w", id, jobstore.ErrNotFound)
		}
		p := &recordPrinter{w: e.stdout, json: e.format == "json", reveal: e.revealer(id)}
		fl := &follower{dir: dir}
		if !follow {
			err := fl.poll(p.print)
			// Caught in the middle of a rotation: let it finish (a few
			// milliseconds) so the output ends where the history does.
			for tries := 0; err == nil && fl.waiting && tries < 200; tries++ {
				time.Sleep(5 * time.Millisecond)
				err = fl.poll(p.print)
			}
			if err != nil {
				return nil, err
			}
			if !fl.seen && e.format == "text" {
				fmt.Fprintf(e.stderr, "logist: job %s has no history yet (logistd writes it once the job starts; logist logs %s -f waits for it)\n", id, id)
			}
			return nil, nil
		}
		ctx, stop := signalContext(e.ctx)
		defer stop()
		return nil, followLogs(ctx, e.store, id, fl, p.print, exitOnFinish)
	},
}

// finished reports a status after which nothing happens without a steward:
// final (SUCCESS, CANCELED) or waiting (INTERVENTION_REQUIRED, HALTED_*).
func finished(s lifecycle.Status) bool { return s.Terminal() || s.Waiting() }

// followLogs prints the job's records, then each record appended after,
// woken by fsnotify on the job folder (history.jsonl writes, rotations,
// job.json replacements), until ctx ends or, with exitOnFinish, the job has
// finished.
func followLogs(ctx context.Context, store *jobstore.Store, id string, fl *follower, emit func(history.Entry) error, exitOnFinish bool) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch job %s: %w", id, err)
	}
	defer w.Close()
	// The watch is in place before the first read: a record appended in
	// between is read twice (and printed once), never missed.
	if err := w.Add(fl.dir); err != nil {
		return fmt.Errorf("watch job %s: %w", id, err)
	}
	// done checks the manifest before the history: the history is written
	// first, so once the manifest shows a finished job every record up to
	// that point is already there to read.
	done := func() bool {
		if !exitOnFinish {
			return false
		}
		m, err := store.Load(id)
		return err == nil && finished(m.Status)
	}
	for {
		fin := done()
		if err := fl.poll(emit); err != nil {
			return err
		}
		if fin && !fl.waiting {
			return nil
		}
		if _, err := os.Stat(fl.dir); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("job %s was removed while following it: %w", id, jobstore.ErrNotFound)
		}
		if err := waitFolderEvent(ctx, w, fl.dir); err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
	}
}

// waitFolderEvent waits for a relevant event in the job folder dir (or to
// it, or a lost event: overflow) and then drains what else is queued.
func waitFolderEvent(ctx context.Context, w *fsnotify.Watcher, dir string) error {
	relevant := func(ev fsnotify.Event) bool {
		if filepath.Clean(ev.Name) == filepath.Clean(dir) {
			return true // the folder itself: removed or moved away
		}
		switch filepath.Base(ev.Name) {
		case history.FileName, history.IndexFile, jobstore.ManifestFile:
			return true
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

// follower reads a history incrementally: it remembers the last sequence
// number it passed on, and the active file's identity and the offset it
// has read to. Records come out in order, each once. A rotation (the
// active file renamed into an archive and a new one started) or a gap in
// the sequence sends it back to history.ReadEntries, which reads archives
// and active file consistently; records it has already passed on are
// skipped by sequence number.
type follower struct {
	dir   string
	seen  bool  // a record has been passed on
	last  int64 // its sequence number
	file  os.FileInfo
	off   int64
	index string // the archive index as last read ("" if none)
	// waiting: the last poll stopped at records a rotation is moving.
	waiting bool
}

// readIndexFile returns the archive index's content ("" if there is none):
// a rotation always rewrites it.
func (f *follower) readIndexFile() (string, error) {
	b, err := os.ReadFile(filepath.Join(f.dir, history.IndexFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read history index: %w", err)
	}
	return string(b), nil
}

// poll passes on every record appended since the last poll. A history
// that keeps changing while it is read (rotations in a row) is left for
// the next poll: the change that stops it wakes the follower again.
func (f *follower) poll(emit func(history.Entry) error) error {
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

// tail reads the active file from the offset. It returns false when the
// file is not the one it was reading (rotated, replaced, truncated) or a
// record is missing, and resync must run first.
func (f *follower) tail(emit func(history.Entry) error) (bool, error) {
	idx, err := f.readIndexFile()
	if err != nil {
		return false, err
	}
	if idx != f.index {
		return false, nil // rotated: the records may be in a new archive
	}
	file, err := os.Open(filepath.Join(f.dir, history.FileName))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil // in the middle of a rotation
		}
		return false, fmt.Errorf("read history: %w", err)
	}
	defer file.Close()
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
		en, err := history.ParseLine(data[:i])
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
func (f *follower) resync(emit func(history.Entry) error) (waiting bool, err error) {
	// Identify the index and the active file first: a rotation after this
	// is noticed by the next tail, and whatever ReadEntries reads of this
	// active file is skipped by sequence number when tailing it from 0.
	idx, err := f.readIndexFile()
	if err != nil {
		return false, err
	}
	fi, statErr := os.Stat(filepath.Join(f.dir, history.FileName))
	es, readErr := history.ReadEntries(f.dir)
	after, err := f.readIndexFile()
	if err != nil {
		return false, err
	}
	// ReadEntries gives up re-reading after a few rotations in a row; and
	// a rotation moves records into an archive before the index lists it.
	settled := after == idx && !f.rotating()
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
			return f.rotating(), nil
		}
		return false, fmt.Errorf("read history: %w", statErr)
	}
	f.file, f.off, f.index = fi, 0, idx
	return false, nil
}

// rotating reports a rotation under way: an archive renamed from the
// active file but not yet compressed and indexed.
func (f *follower) rotating() bool {
	m, _ := filepath.Glob(filepath.Join(f.dir, "history-[0-9][0-9][0-9][0-9][0-9][0-9].jsonl"))
	return len(m) > 0
}

// recordPrinter prints history records as readable lines, or as JSON.
type recordPrinter struct {
	w      io.Writer
	json   bool
	reveal func(*history.Record)
}

func (p *recordPrinter) print(en history.Entry) error {
	rec := en.Record
	if p.reveal != nil {
		rec = rec.Clone()
		p.reveal(&rec)
	}
	if p.json {
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	_, err := io.WriteString(p.w, recordText(&rec))
	return err
}

// recordText is one history record as one line (plus, for an agent's
// standard error, its first lines indented below).
func recordText(r *history.Record) string {
	var b strings.Builder
	ts := r.Time
	if t, err := time.Parse(time.RFC3339Nano, r.Time); err == nil {
		ts = t.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	fmt.Fprintf(&b, "%s #%d %-14s", ts, r.Seq, r.Type)
	who := r.Role
	if r.Phase != "" {
		if who != "" {
			who += "/"
		}
		who += r.Phase
	}
	if who != "" && r.Type != history.TypeTransition {
		b.WriteString(" " + who)
	}
	var stderr string
	switch r.Type {
	case history.TypeIntent:
		b.WriteString(" asked")
		if r.Interaction != nil {
			fmt.Fprintf(&b, " (interaction %d", *r.Interaction)
			if r.Attempt > 0 {
				fmt.Fprintf(&b, ", attempt %d", r.Attempt)
			}
			b.WriteString(")")
		}
	case history.TypeResponse:
		if rs := r.Response; rs != nil {
			b.WriteString(" " + rs.Status)
			if rs.Action != "" {
				b.WriteString(" " + rs.Action)
			}
			fmt.Fprintf(&b, " $%.4f %.2fs", rs.CostUSD, rs.ExecutionTimeSeconds)
			if rs.ErrorCode != "" {
				fmt.Fprintf(&b, " %s: %s", rs.ErrorCode, firstLine(rs.Error, 160))
			}
			if rs.Summary != "" {
				fmt.Fprintf(&b, " %q", firstLine(rs.Summary, 160))
			}
			if rs.NewStatus != "" {
				b.WriteString(" → " + rs.NewStatus)
			}
			stderr = rs.Stderr
		}
	case history.TypeTransition:
		if t := r.Transition; t != nil {
			fmt.Fprintf(&b, " %s→%s", t.From, t.To)
			if t.FromPhase != t.ToPhase {
				fmt.Fprintf(&b, " phase %s→%s", orDash(t.FromPhase), orDash(t.ToPhase))
			} else if t.ToPhase != "" {
				fmt.Fprintf(&b, " in phase %s", t.ToPhase)
			}
			fmt.Fprintf(&b, " %s by %s", t.Event, t.Actor)
			if t.CheckpointID != "" {
				b.WriteString(" at " + t.CheckpointID)
			}
			if t.Reason != "" {
				fmt.Fprintf(&b, ": %s", firstLine(t.Reason, 160))
			}
		}
	case history.TypeSteward:
		if s := r.Steward; s != nil {
			b.WriteString(" " + s.Command)
			if s.User != "" {
				b.WriteString(" by " + s.User)
			}
			if s.Guidance != "" {
				fmt.Fprintf(&b, " guidance %q", firstLine(s.Guidance, 160))
			}
			if s.Reason != "" {
				fmt.Fprintf(&b, " reason %q", firstLine(s.Reason, 160))
			}
			if len(s.Changes) > 0 {
				c, _ := json.Marshal(s.Changes)
				b.WriteString(" changes " + string(c))
			}
		}
	case history.TypeRecoveryPoint:
		if cp := r.RecoveryPoint; cp != nil {
			fmt.Fprintf(&b, " checkpoint %s (resume at %s)", cp.CheckpointID, orDash(cp.ResumePhase))
			if cp.Snapshot != nil {
				fmt.Fprintf(&b, " %d files", cp.Snapshot.Files)
			}
			if cp.Description != "" {
				fmt.Fprintf(&b, ": %s", firstLine(cp.Description, 120))
			}
		}
	case history.TypeError:
		if e := r.Error; e != nil {
			fmt.Fprintf(&b, " %s: %s", e.Code, firstLine(e.Message, 160))
		}
	}
	b.WriteString("\n")
	if stderr = strings.TrimRight(stderr, "\n"); stderr != "" {
		lines := strings.Split(stderr, "\n")
		more := 0
		if len(lines) > 3 {
			lines, more = lines[:3], len(lines)-3
		}
		for _, l := range lines {
			b.WriteString("    stderr: " + firstLine(l, 200) + "\n")
		}
		if more > 0 {
			fmt.Fprintf(&b, "    stderr: … %d more lines (logist history JOB --seq %d)\n", more, r.Seq)
		}
	}
	return b.String()
}
