package cli

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/verify"
)

// verifyFailed is a verification that found problems; the report is
// printed. unread counts the jobs --all could not read.
type verifyFailed struct{ n, unread int }

func (v *verifyFailed) Error() string {
	s := fmt.Sprintf("%d job(s) failed verification", v.n)
	if v.unread > 0 {
		s += fmt.Sprintf(", %d could not be read", v.unread)
	}
	return s
}

var cmdVerify = &command{
	name: "verify", args: "JOB... | --all [--key FILE]",
	summary: "check a job's history offline (--all: every job's): hash chain, signatures, and a replay of every answer and transition; exit 0 only when intact",
	example: "  logist verify fix-login\n  logist verify fix-login --key /secure/copy/signing.pub --format json\n  logist verify --all     # one line per job, then how many are intact, failed, unreadable\n",
	flags: func(fs *pflag.FlagSet) {
		fs.String("key", "", "trusted public key (default: <jobs>/.logist/signing.pub; keep a copy elsewhere to detect a replaced key)")
		fs.Bool("all", false, "verify every job in the jobs folder (the jobs logist list shows), one line each as it goes, and a count")
	},
	run: func(e *env, args []string) (*Result, error) {
		all, _ := e.fs.GetBool("all")
		switch {
		case all && len(args) > 0:
			return nil, usagef("name jobs or give --all, not both")
		case all && e.format == "markdown":
			return nil, usagef("--all prints text or json: markdown opens with the outcome, which a walk of every job knows only at its end")
		case len(args) == 0 && !all:
			return nil, usagef("expected at least one JOB, or --all")
		}
		keys, err := verifyKeys(e)
		if err != nil {
			if all && noJobsYet(e, err) {
				// A jobs folder logistd has not run over yet: no key, and
				// nothing it should have signed. A check set up before the
				// daemon's first start reports 0 jobs, not a missing key.
				return nil, verifyAll(e, nil)
			}
			return nil, err
		}
		if all {
			return nil, verifyAll(e, keys)
		}
		for _, id := range args {
			if _, err := oneJob([]string{id}); err != nil {
				return nil, err // a mistyped id: nothing verified
			}
		}
		r := &Result{Columns: []string{"JOB", "RECORDS", "RESULT"}}
		var reports []*verify.Report
		var unread []error
		bad := 0
		for _, id := range args {
			rep, err := verifyNamed(e, keys, id)
			if err != nil {
				if len(args) == 1 {
					return nil, err // the command's error, as for any one job
				}
				// As verify --all does: the job's line, and on to the
				// next; its error joins the command's exit code.
				err = jobHint(e, err)
				unread = append(unread, err)
				res := "UNREADABLE: "
				if ExitCode(err) == ExitNotFound {
					res = "NOT FOUND: "
				}
				r.Rows = append(r.Rows, []string{id, "-", res + err.Error()})
				continue
			}
			reports = append(reports, rep)
			res := "intact: " + intactText(rep)
			if !rep.OK() {
				bad++
				var parts []string
				for _, p := range rep.Problems {
					parts = append(parts, p.String())
				}
				res = "FAILED: " + rep.FirstBad()
				if len(parts) > 1 {
					res += fmt.Sprintf(" (%d problems in all: %s)", len(parts), strings.Join(parts[1:], "; "))
				}
			}
			r.Rows = append(r.Rows, []string{id, fmt.Sprint(rep.Records), res})
		}
		r.Items = reports
		switch {
		case bad > 0:
			// A history that failed its checks is what verify is for: it
			// decides the exit code (1) over jobs that could not be read,
			// which the message counts, as verify --all does.
			return nil, &failedWith{r, &verifyFailed{n: bad, unread: len(unread)}}
		case len(unread) > 0:
			// None failed: ExitCode's of the jobs' errors joined (its
			// order: permission denied, then not found).
			return nil, &failedWith{r, errors.Join(append([]error{&verifyFailed{unread: len(unread)}}, unread...)...)}
		}
		return r, nil
	},
}

// verifyNamed verifies job id, named on the command line: its report, or
// why it could not be read (not found, permission denied, unreadable
// files); a report of checks that failed is not an error.
func verifyNamed(e *env, keys []ed25519.PublicKey, id string) (*verify.Report, error) {
	dir, err := e.jobDir(id)
	if err != nil {
		return nil, err
	}
	// An invalid manifest replays with the default workflow; one this
	// user may not read is a job it cannot verify (exit 3).
	m, err := e.store.Load(id)
	if errors.Is(err, fs.ErrPermission) {
		return nil, err
	}
	rep, err := verify.Job(id, dir, verifyOptions(keys, m, e.revealer(id)))
	if err != nil {
		return nil, err
	}
	if rep.Unreadable() && errors.Is(rep.ReadErr, fs.ErrPermission) {
		// Not a history that fails its checks: one this user may not
		// read (verify --all's UNREADABLE).
		return nil, rep.ReadErr
	}
	return rep, nil
}

// verifyKeys is the keyring verify trusts: --key, else the jobs folder's
// (several: an export of a cluster's job).
func verifyKeys(e *env) ([]ed25519.PublicKey, error) {
	keyFile, _ := e.fs.GetString("key")
	if keyFile == "" {
		keyFile = filepath.Join(e.store.Dir, signing.Dir, signing.PublicFile)
	}
	keys, err := signing.LoadKeyring(keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w (pass --key FILE)", err)
	}
	return keys, nil
}

// noJobsYet says whether err, the default trusted key's load, failed
// only because the jobs folder has no key yet, and the folder holds no
// job for one to have signed. A key named by --key must be there.
func noJobsYet(e *env, err error) bool {
	if key, _ := e.fs.GetString("key"); key != "" || !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	errFound := errors.New("a job")
	return e.store.EachJob(func(*jobstore.Entry) error { return errFound }) == nil
}

// verifyOptions verifies with keys, replaying with manifest m (nil: the
// default workflow) and opening sealed content with reveal (nil: none).
func verifyOptions(keys []ed25519.PublicKey, m *manifest.Manifest, reveal func(*history.Record)) verify.Options {
	return verify.Options{Public: keys[0], Keyring: keys[1:], Manifest: m, Reveal: reveal}
}

// intactText says what an intact report checked.
func intactText(rep *verify.Report) string {
	s := fmt.Sprintf("chain, signatures (key %s) and replay of %d answers, %d transitions", rep.KeyID, rep.Responses, rep.Transitions)
	if rep.Encrypted > 0 {
		s += fmt.Sprintf("; %d encrypted answers not re-validated (no readable content key)", rep.Encrypted)
	}
	if rep.Legacy > 0 {
		s += fmt.Sprintf("; %d version 1 records before the chain are unprotected", rep.Legacy)
	}
	return s
}

// revealer decrypts a job's encrypted history content for someone who can
// read the content key; without it, content stays encrypted (nil).
func (e *env) revealer(id string) func(*history.Record) {
	return e.opener().Reveal(id)
}
