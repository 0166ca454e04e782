package cli

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/cluster"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/regfile"
	"github.com/logist/logist/internal/signing"
)

// Steering commands in cluster mode: the command's file form runs, as it
// is, on the job written in folder form from the database
// (cluster.Steer), signed with the steward's key (the jobs folder's,
// --jobs-dir, registered in the database as a steward's so verify knows
// it), and what it recorded goes back in one transaction under an
// idempotency key. The key is --idempotency-key, or one made up and
// printed: the same command with the same key gives the same outcome and
// changes nothing more; another command with it is refused
// (clusterstore.ErrIdempotency, exit 2).

// idempotencyFlag is the flag of every steering command.
const idempotencyFlag = "idempotency-key"

func addIdempotencyFlag(fs *pflag.FlagSet) {
	fs.String(idempotencyFlag, "", "cluster mode: the command's idempotency key (default: a new one, printed); the same command with the same key changes nothing more, another command with it is refused")
}

// clusterSteer is the cluster form of a steering command whose file form
// is run and whose job is named by jobOf(args).
func clusterSteer(run func(*env, []string) (*Result, error), jobOf func([]string) (string, error)) func(*env, clusterstore.Store, []string) (*Result, error) {
	return clusterSteerRestoring(run, jobOf, nil)
}

// clusterSteerRestoring is clusterSteer for a command that reads the
// snapshot of the checkpoint restore names (rollback --to) besides the
// job's current one.
func clusterSteerRestoring(run func(*env, []string) (*Result, error), jobOf func([]string) (string, error), restore func(*env) string) func(*env, clusterstore.Store, []string) (*Result, error) {
	return func(e *env, s clusterstore.Store, args []string) (*Result, error) {
		id, err := jobOf(args)
		if err != nil {
			return nil, err
		}
		if _, err := oneJob([]string{id}); err != nil {
			return nil, err
		}
		stdin, err := bufferStdin(e)
		if err != nil {
			return nil, err
		}
		command, err := commandWords(e, args, stdin)
		if err != nil {
			return nil, err
		}
		key, _ := e.fs.GetString(idempotencyFlag)
		if key == "" {
			b := make([]byte, 16)
			_, _ = rand.Read(b)
			key = hex.EncodeToString(b)
		}
		keyDir := e.store.Dir
		sk, err := signing.LoadOrCreate(keyDir)
		if err != nil {
			return nil, fmt.Errorf("steward's signing key in %s: %w", keyDir, err)
		}
		if err := s.RegisterSteward(e.ctx, "steward-"+signing.KeyID(sk.Public()), sk.Public()); err != nil {
			return nil, err
		}
		var res *Result
		var point string
		if restore != nil {
			point = restore(e)
		}
		out, err := cluster.Steer(e.ctx, s, cluster.Steering{Job: id, Key: key, Command: command, Restore: point,
			Apply: func(jobsDir string) error {
				ce := *e
				ce.store, ce.keyDir, ce.cluster = jobstore.New(jobsDir), keyDir, true
				ce.stdin = bytes.NewReader(stdin)
				var rerr error
				res, rerr = run(&ce, args)
				return rerr
			}})
		if err != nil {
			return nil, err
		}
		if out.Repeat {
			res = &Result{Message: fmt.Sprintf("Already done: this command ran with idempotency key %s; job %s is %s", key, id, out.Status),
				Fields: []Field{{"job_id", "Job", id}, {"status", "Status", string(out.Status)}},
				Data:   map[string]any{"job": map[string]any{"job_id": id, "status": out.Status, "epoch": out.Epoch}, "repeat": true}}
		}
		res.Fields = append(res.Fields, Field{"idempotency_key", "Idempotency key", key})
		if res.Data == nil {
			res.Data = map[string]any{}
		}
		res.Data["idempotency_key"] = key
		return res, nil
	}
}

// bufferStdin reads standard input once when a flag says "-" (a reply's
// answer), so that a recomputed command reads it again.
func bufferStdin(e *env) ([]byte, error) {
	if f := e.fs.Lookup("file"); f == nil || f.Value.String() != "-" {
		return nil, nil
	}
	return io.ReadAll(io.LimitReader(e.stdin, 4<<20))
}

// commandWords is what an idempotency key is bound to: the command, its
// arguments and the flags given (a file's content by its hash).
func commandWords(e *env, args []string, stdin []byte) (string, error) {
	var w []string
	w = append(w, e.fs.Name())
	for _, a := range args {
		w = append(w, shortWord(a))
	}
	var flags []string
	var ferr error
	e.fs.Visit(func(f *pflag.Flag) {
		switch f.Name {
		case idempotencyFlag, "database-url", "jobs-dir", "format", "help":
			return
		case "file":
			b := stdin
			if v := f.Value.String(); v != "-" {
				var err error
				if b, err = regfile.ReadFile(v); err != nil {
					ferr = err
				}
			}
			sum := sha256.Sum256(b)
			flags = append(flags, "--file=sha256:"+hex.EncodeToString(sum[:]))
			return
		}
		flags = append(flags, "--"+f.Name+"="+shortWord(f.Value.String()))
	})
	slices.Sort(flags)
	return strings.Join(append(w, flags...), " "), ferr
}

// shortWord is a word of a command as its key is bound to it: quoted, or
// by its hash when long (an answer).
func shortWord(s string) string {
	if len(s) <= 64 {
		return fmt.Sprintf("%q", s)
	}
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func firstArg(args []string) (string, error) {
	if len(args) == 0 {
		return "", usagef("expected a JOB argument")
	}
	return args[0], nil
}

func init() {
	for _, c := range []*command{cmdResume, cmdReply, cmdPM, cmdSet, cmdActivate} {
		c.cluster = clusterSteer(c.run, firstArg)
	}
	// A schedule's halt lists its unfinished runs from the database (the
	// folder the command runs on holds the template only).
	haltSteer := clusterSteer(cmdHalt.run, firstArg)
	cmdHalt.cluster = func(e *env, s clusterstore.Store, args []string) (*Result, error) {
		res, err := haltSteer(e, s, args)
		if err != nil || res.Data["unfinished_runs"] == nil {
			return res, err
		}
		js, err := s.Jobs(e.ctx)
		if err != nil {
			return nil, err
		}
		unfinished := []string{}
		for _, j := range js {
			if m, err := manifest.Decode(j.ID, j.Manifest); err == nil && m.ScheduledFrom == args[0] && !j.Status.Terminal() {
				unfinished = append(unfinished, j.ID)
			}
		}
		haltedSchedule(res, args[0], unfinished)
		return res, nil
	}
	// A rollback runs on the job in folder form with the snapshot of the
	// point it returns to; the node that runs the job next restores its
	// workspace from the rollback's record (the job's current
	// checkpoint).
	cmdRollback.cluster = clusterSteerRestoring(cmdRollback.run, firstArg, func(e *env) string {
		to, _ := e.fs.GetString("to")
		return to
	})
	// play: without a move, a read of the party's view; with one, a
	// steering like reply.
	playSteer := clusterSteer(cmdPlay.run, firstArg)
	playRead := clusterRead(cmdPlay.run, oneID, nil)
	cmdPlay.cluster = func(e *env, s clusterstore.Store, args []string) (*Result, error) {
		if _, action, err := playAction(e.fs); err != nil || action != "" {
			return playSteer(e, s, args)
		}
		return playRead(e, s, args)
	}
}
