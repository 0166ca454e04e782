package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/verify"
)

// verifyFailed is a verification that found problems; the report is printed.
type verifyFailed struct{ n int }

func (v *verifyFailed) Error() string { return fmt.Sprintf("%d job(s) failed verification", v.n) }

var cmdVerify = &command{
	name: "verify", args: "JOB... [--key FILE]",
	summary: "check a job's history offline: hash chain, signatures, and a replay of every answer and transition; exit 0 only when intact",
	example: "  logist verify fix-login\n  logist verify fix-login --key /secure/copy/signing.pub --format json\n",
	flags: func(fs *pflag.FlagSet) {
		fs.String("key", "", "trusted public key (default: <jobs>/.logist/signing.pub; keep a copy elsewhere to detect a replaced key)")
	},
	run: func(e *env, args []string) (*Result, error) {
		if len(args) == 0 {
			return nil, usagef("expected at least one JOB")
		}
		keyFile, _ := e.fs.GetString("key")
		if keyFile == "" {
			keyFile = filepath.Join(e.store.Dir, signing.Dir, signing.PublicFile)
		}
		keys, err := signing.LoadKeyring(keyFile) // several: an export of a cluster's job
		if err != nil {
			return nil, fmt.Errorf("%w (pass --key FILE)", err)
		}
		r := &Result{Columns: []string{"JOB", "RECORDS", "RESULT"}}
		var reports []*verify.Report
		bad := 0
		for _, id := range args {
			if _, err := oneJob([]string{id}); err != nil {
				return nil, err
			}
			dir := e.store.JobDir(id)
			if _, err := os.Stat(filepath.Join(dir, jobstore.ManifestFile)); err != nil {
				return nil, fmt.Errorf("job %s: %w", id, jobstore.ErrNotFound)
			}
			m, _ := e.store.Load(id) // an invalid manifest replays with the default workflow
			rep, err := verify.Job(id, dir, verify.Options{Public: keys[0], Keyring: keys[1:], Manifest: m, Reveal: e.revealer(id)})
			if err != nil {
				return nil, err
			}
			reports = append(reports, rep)
			res := fmt.Sprintf("intact: chain, signatures (key %s) and replay of %d answers, %d transitions", rep.KeyID, rep.Responses, rep.Transitions)
			if rep.Encrypted > 0 {
				res += fmt.Sprintf("; %d encrypted answers not re-validated (no readable content key)", rep.Encrypted)
			}
			if rep.Legacy > 0 {
				res += fmt.Sprintf("; %d version 1 records before the chain are unprotected", rep.Legacy)
			}
			if !rep.OK() {
				bad++
				var parts []string
				for _, p := range rep.Problems {
					parts = append(parts, p.String())
				}
				res = "FAILED: first bad " + rep.First().String() // "record N: CLASS: ..."
				if len(parts) > 1 {
					res += fmt.Sprintf(" (%d problems in all: %s)", len(parts), strings.Join(parts[1:], "; "))
				}
			}
			r.Rows = append(r.Rows, []string{id, fmt.Sprint(rep.Records), res})
		}
		r.Items = reports
		if bad > 0 {
			return nil, &failedWith{r, &verifyFailed{bad}}
		}
		return r, nil
	},
}

// revealer decrypts a job's encrypted history content for someone who can
// read the content key; without it, content stays encrypted (nil).
func (e *env) revealer(id string) func(*history.Record) {
	return e.opener().Reveal(id)
}
