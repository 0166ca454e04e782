package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/textsafe"
)

var cmdLogs = &command{
	name: "logs", args: "JOB [-f] [--exit-on-finish]",
	summary: "print a job's history as readable lines, #N the record number (requests, answers with their warnings, transitions, steward commands, errors); -f follows it as it is written",
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
		dir, err := e.jobDir(id)
		if err != nil {
			return nil, err
		}
		p := &recordPrinter{w: e.stdout, json: e.format == "json", reveal: e.revealer(id)}
		fl := history.NewFollower(dir)
		if !follow {
			if err := fl.PollSettled(p.print); err != nil {
				return nil, err
			}
			if !fl.Seen() && e.format == "text" {
				fmt.Fprintf(e.stderr, "logist: job %s has no history yet (logistd writes it once the job starts; logist logs %s -f waits for it)\n", id, id)
			}
			return nil, nil
		}
		if e.store.DaemonPID() == 0 && !e.cluster {
			// Following works without a daemon, but nothing is written.
			fmt.Fprintf(e.stderr, "logist: %s; following anyway: records appear once one runs the job\n", noDaemon(e.store.Dir))
		}
		ctx, stop := signalContext(e.ctx)
		defer stop()
		return nil, followLogs(ctx, e.store, id, fl, p.print, exitOnFinish)
	},
}

// finished reports a status after which nothing happens without a steward:
// final (SUCCESS, CANCELED) or waiting (INTERVENTION_REQUIRED, HALTED_*).
func finished(s lifecycle.Status) bool { return s.Terminal() || s.Waiting() }

// followLogs prints the job's records, then each record appended after
// (history.Follower.Follow, woken also by job.json replacements), until
// ctx ends or, with exitOnFinish, the job has finished.
func followLogs(ctx context.Context, store *jobstore.Store, id string, fl *history.Follower, emit func(history.Entry) error, exitOnFinish bool) error {
	o := history.FollowOptions{Wake: []string{jobstore.ManifestFile}}
	if exitOnFinish {
		// The manifest, not the history: the history is written first,
		// so once the manifest shows a finished job every record up to
		// that point is already there to read.
		o.Done = func() bool {
			m, err := store.Load(id)
			return err == nil && finished(m.Status)
		}
	}
	err := fl.Follow(ctx, emit, o)
	switch {
	case errors.Is(err, context.Canceled):
		return nil
	case errors.Is(err, history.ErrFolderGone):
		return fmt.Errorf("job %s was removed while following it: %w", id, jobstore.ErrNotFound)
	}
	return err
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
		_, err = fmt.Fprintf(p.w, "%s\n", textsafe.EscapeJSON(b))
		return err
	}
	_, err := io.WriteString(p.w, recordText(&rec))
	return err
}

// recordText is one history record as one line, plus, indented below it,
// an answer's warnings and the first lines of an agent's standard error.
// Every line is neutralised (textsafe): what agents wrote reaches the
// terminal as visible escapes.
func recordText(r *history.Record) string {
	var out strings.Builder
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
	var stdout, stderr string
	var warnings []string
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
			fmt.Fprintf(&b, " %s %.2fs", usd(rs.CostUSD), rs.ExecutionTimeSeconds)
			if rs.ErrorCode != "" {
				fmt.Fprintf(&b, " %s: %s", rs.ErrorCode, oneLine(rs.Error, 160))
			}
			if rs.Summary != "" {
				b.WriteString(" " + quoted(oneLine(rs.Summary, 160)))
			}
			if rs.Outcome != "" {
				// What the phase's effect made of the answer (the
				// transition after it says why).
				b.WriteString(" outcome " + rs.Outcome)
				if rs.SentBack {
					b.WriteString(" (sent back)")
				}
			}
			if rs.NewStatus != "" {
				b.WriteString(" → " + rs.NewStatus)
			}
			stdout, stderr, warnings = rs.Stdout, rs.Stderr, rs.Warnings
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
				fmt.Fprintf(&b, ": %s", oneLine(t.Reason, 160))
			}
		}
	case history.TypeSteward:
		if s := r.Steward; s != nil {
			b.WriteString(" " + s.Command)
			if s.User != "" {
				b.WriteString(" by " + s.User)
			}
			if s.Guidance != "" {
				b.WriteString(" guidance " + quoted(oneLine(s.Guidance, 160)))
			}
			if s.Reason != "" {
				b.WriteString(" reason " + quoted(oneLine(s.Reason, 160)))
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
				fmt.Fprintf(&b, ": %s", oneLine(cp.Description, 120))
			}
		}
	case history.TypeError:
		if e := r.Error; e != nil {
			fmt.Fprintf(&b, " %s: %s", e.Code, oneLine(e.Message, 160))
		}
	}
	out.WriteString(textsafe.Line(b.String()) + "\n")
	// Warnings: the answer was accepted, something in it is not right
	// (an evidence file that is missing): not an error.
	for _, w := range warnings {
		out.WriteString("    warning: " + oneLine(w, 200) + "\n")
	}
	stream(&out, "stdout", stdout, r.Seq)
	stream(&out, "stderr", stderr, r.Seq)
	return out.String()
}

// stream writes the first lines of what an agent printed on a stream
// (stdout: an agent that answers in a file; stderr), escaped, under its
// record's line.
func stream(out *strings.Builder, name, text string, seq int64) {
	if text = strings.TrimRight(text, "\n"); text == "" {
		return
	}
	lines := strings.Split(text, "\n")
	more := 0
	if len(lines) > 3 {
		lines, more = lines[:3], len(lines)-3
	}
	for _, l := range lines {
		out.WriteString("    " + name + ": " + oneLine(l, 200) + "\n")
	}
	if more > 0 {
		fmt.Fprintf(out, "    %s: … %d more lines (logist history JOB --record %d)\n", name, more, seq)
	}
}
