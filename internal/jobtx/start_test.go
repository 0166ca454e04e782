package jobtx

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/signing"
)

// newJob makes a jobs folder with job "j", new (no history), and returns
// its transactions' Env.
func newJob(t testing.TB) *Env {
	t.Helper()
	jobs := t.TempDir()
	key, err := signing.LoadOrCreate(jobs)
	if err != nil {
		t.Fatal(err)
	}
	env := &Env{Store: jobstore.New(jobs), Logger: slog.New(slog.DiscardHandler), History: history.Options{Signer: key}}
	if err := os.Mkdir(env.Store.JobDir("j"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(env.Store.JobDir("j"), jobstore.ManifestFile), []byte(testManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	return env
}

// costs is what the store spent on manifests since before.
func costs(env *Env, before jobstore.Counts) jobstore.Counts {
	now := env.Store.Counts()
	return jobstore.Counts{Reads: now.Reads - before.Reads, Decodes: now.Decodes - before.Decodes, Checks: now.Checks - before.Checks}
}

// The first transaction of a run starts from the manifest the intake read
// and checked (Kept.Start): job.json is not read, decoded or checked
// again, and the intake's manifest is not the one the transaction changes.
func TestFirstBeginTakesTheIntakesRead(t *testing.T) {
	env := newJob(t)
	before := env.Store.Counts()
	l, err := env.Store.LoadFile("j")
	if err != nil {
		t.Fatal(err)
	}
	if got := costs(env, before); got != (jobstore.Counts{Reads: 1, Decodes: 1, Checks: 1}) {
		t.Fatalf("the intake's load cost %+v, want one read, decode and check", got)
	}
	before = env.Store.Counts()
	status := l.M.Status
	var keep Kept
	defer keep.Close()
	keep.Start(l)
	tx, err := Begin(env, "j", &keep)
	if err != nil {
		t.Fatal(err)
	}
	if got := costs(env, before); got != (jobstore.Counts{}) {
		t.Fatalf("the first Begin read the manifest again: %+v", got)
	}
	if tx.M == l.M || tx.M.TaskDescription != "t" || tx.M.JobID != "j" {
		t.Fatalf("the transaction's manifest: %p (the intake's %p), %+v", tx.M, l.M, tx.M)
	}
	if err := tx.Transition(lifecycle.EvStart, lifecycle.Running, "work", "SYSTEM", ""); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	if l.M.Status != status {
		t.Fatalf("the intake's manifest was changed by the transaction: %s, was %s", l.M.Status, status)
	}
	// The next Begin goes on from the transaction's own save, as before.
	before = env.Store.Counts()
	tx, err = Begin(env, "j", &keep)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if got := costs(env, before); got != (jobstore.Counts{}) {
		t.Fatalf("the second Begin read the manifest: %+v", got)
	}
	if tx.M.Status != lifecycle.Running {
		t.Fatalf("status %s, want RUNNING", tx.M.Status)
	}
}

// A change to job.json between the intake's read and the first
// transaction (a steward's new file, a write in place of another size or
// of the same size) is read, decoded and checked again, exactly as with
// nothing handed on; a change that makes it invalid is refused, naming
// the file, the field and the reason.
func TestFirstBeginSeesAChangeSinceTheIntake(t *testing.T) {
	changed := strings.Replace(testManifest, `"task_description": "t"`, `"task_description": "changed"`, 1)
	sameSize := strings.Replace(testManifest, `"task_description": "t"`, `"task_description": "u"`, 1)
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, env *Env, p string)
		task   string // what the transaction must see, or
		bad    string // the field an invalid change is refused for
	}{
		{name: "steward's new file", task: "changed", change: func(t *testing.T, env *Env, p string) {
			// Another process's store: its save is nothing this one knows.
			if err := jobstore.New(env.Store.Dir).WriteManifest("j", []byte(changed)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "in place, another size", task: "changed", change: func(t *testing.T, env *Env, p string) {
			writeInPlace(t, p, changed)
		}},
		{name: "in place, the same size", task: "u", change: func(t *testing.T, env *Env, p string) {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			writeInPlace(t, p, sameSize)
			// A write a moment later, whatever the clock's grain here.
			later := fi.ModTime().Add(time.Second)
			if err := os.Chtimes(p, later, later); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "made invalid", bad: "/status", change: func(t *testing.T, env *Env, p string) {
			bad := strings.Replace(testManifest, `{"task_description"`, `{"status": "BOGUS", "task_description"`, 1)
			if err := jobstore.New(env.Store.Dir).WriteManifest("j", []byte(bad)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newJob(t)
			p := filepath.Join(env.Store.JobDir("j"), jobstore.ManifestFile)
			l, err := env.Store.LoadFile("j")
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, env, p)
			before := env.Store.Counts()
			var keep Kept
			defer keep.Close()
			keep.Start(l)
			tx, err := Begin(env, "j", &keep)
			if tc.bad != "" {
				var me manifest.Errors
				var one *manifest.Error
				if err == nil {
					tx.Close()
					t.Fatal("an invalid manifest was taken")
				}
				if !errors.As(err, &me) && !errors.As(err, &one) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("error %q does not name %s and %s", err, p, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Close()
			if got := costs(env, before); got != (jobstore.Counts{Reads: 1, Decodes: 1, Checks: 1}) {
				t.Fatalf("the changed manifest cost %+v, want it read, decoded and checked once", got)
			}
			if tx.M.TaskDescription != tc.task {
				t.Fatalf("the transaction sees task %q, want %q", tx.M.TaskDescription, tc.task)
			}
		})
	}
}

// writeInPlace overwrites p in place (same inode), as a hand edit may.
func writeInPlace(t *testing.T, p, body string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(body); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
