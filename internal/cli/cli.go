// Package cli is logist, the steward's command line. Every command reads
// the jobs folder directly (so read commands work whether or not logistd
// runs) and changes jobs only through internal/steward.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/config"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/suggest"
)

// Exit codes (seed 001), shared with the console's API (internal/jobview).
const (
	ExitOK         = jobview.ExitOK
	ExitUsage      = jobview.ExitUsage      // invalid arguments or invalid input
	ExitOutOfOrder = jobview.ExitOutOfOrder // not allowed in the job's current state
	ExitPermission = jobview.ExitPermission
	ExitNotFound   = jobview.ExitNotFound
)

// Version is set at build time.
var Version = "dev"

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// ExitCode maps an error to its exit code (jobview.ExitCode, the one
// mapping, which the console's API uses too; cluster mode's store errors
// first: cluster.go).
func ExitCode(err error) int {
	if code, ok := clusterExit(err); ok {
		return code
	}
	return jobview.ExitCode(err)
}

// env is what commands share.
type env struct {
	ctx    context.Context
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	format string
	store  *jobstore.Store
	fs     *pflag.FlagSet
	// keyDir, if set, is the folder of the steward's signing key (cluster
	// mode: the jobs folder, while store is a temporary one); cluster says
	// the store is the cluster's job in folder form (clustersteer.go).
	keyDir  string
	cluster bool
	// argv is the command line, for a message that says how to run it
	// again (as the jobs folder's owner).
	argv []string
}

type command struct {
	name    string
	args    string
	summary string
	example string
	flags   func(fs *pflag.FlagSet)
	run     func(e *env, args []string) (*Result, error)
	// steers marks commands that change jobs (steward.Commands, counted
	// in the daemon's steward metrics).
	steers bool
	// hidden commands (for shell completion) are left out of the help.
	hidden bool
	// cluster, if set, is the command's form in cluster mode (cluster.go).
	cluster func(e *env, s clusterstore.Store, args []string) (*Result, error)
}

// outcomeName names an exit code: the code of a JSON error, the result
// of a steward command in the daemon's metrics.
func outcomeName(code int) string { return jobview.OutcomeName(code) }

// eventResult classifies a steward command's outcome for metrics by its
// exit code's name, as the console does (metrics.StewardResults).
func eventResult(err error) string { return outcomeName(ExitCode(err)) }

var commands []*command

func init() {
	commands = []*command{
		cmdSubmit, cmdList, cmdStatus, cmdHistory, cmdResume, cmdHalt, cmdActivate, cmdReply, cmdPlay, cmdPM, cmdSet, cmdValidate, cmdVerify, cmdRollback, cmdDiscarded, cmdResult, cmdDiff, cmdSchedules, cmdWatch, cmdLogs, cmdCompletion, cmdJobs, cmdCheckpoints, cmdExport,
	}
	for _, c := range commands {
		c.steers = slices.Contains(steward.Commands, c.name)
	}
}

func find(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// Main runs logist with args and returns the exit code.
func Main(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	name, rest := splitCommand(args[1:])
	switch name {
	case "", "help", "-h", "--help":
		if name == "help" && len(rest) > 0 {
			if rest[0] == "codes" {
				fmt.Fprint(stdout, codes.Text())
				return ExitOK
			}
			if c := find(rest[0]); c != nil {
				fmt.Fprint(stdout, commandHelp(c))
				return ExitOK
			}
			fmt.Fprintf(stderr, "logist: %s\n", unknownCommand(rest[0]))
			return ExitUsage
		}
		fmt.Fprint(stdout, mainHelp())
		if name == "" {
			return ExitUsage
		}
		return ExitOK
	case "version", "--version":
		fmt.Fprintf(stdout, "logist %s\n", Version)
		return ExitOK
	}
	c := find(name)
	if c == nil {
		fmt.Fprintf(stderr, "logist: %s\n", unknownCommand(name))
		return ExitUsage
	}
	fs := pflag.NewFlagSet("logist "+c.name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	jobsDir := fs.String("jobs-dir", config.JobsDir(getenv), "jobs folder (env LOGIST_JOBS_DIR, else logistd's config file jobs_dir, else ./jobs)")
	format := fs.String("format", "text", "output format: text, json or markdown")
	databaseURL := databaseURLFlag(fs, config.DatabaseURL(getenv))
	help := fs.BoolP("help", "h", false, "show help")
	if c.flags != nil {
		c.flags(fs)
	}
	if c.steers || c == cmdSchedules {
		addIdempotencyFlag(fs)
	}
	e := &env{ctx: ctx, getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr, fs: fs, argv: args}
	// The daemon's prices, where logist can know them: what validate,
	// submit, set and status say of an unpriced model is what the run does.
	if p := config.PricesFile(getenv); p != "" {
		if prices, err := agent.LoadPrices(p); err == nil {
			agent.SetPriceOverrides(prices)
		}
	}
	if err := fs.Parse(rest); err != nil {
		renderError(stdout, stderr, "text", usagef("%s\n%s", suggest.FlagError(fs, err), commandHelp(c)))
		return ExitUsage
	}
	if *help {
		fmt.Fprint(stdout, commandHelp(c))
		return ExitOK
	}
	switch *format {
	case "text", "json", "markdown":
	default:
		renderError(stdout, stderr, "text", usagef("--format %q: use text, json or markdown", *format))
		return ExitUsage
	}
	e.format = *format
	e.store = jobstore.New(*jobsDir)
	e.store.Committed = committedBySignature(e.store.Dir)
	if *databaseURL == "" && c != cmdValidate && c != cmdCompletion {
		// A jobs folder that is a file, a named pipe or a device: reading
		// it as a folder waited for ever on a pipe, and a job "in" a file
		// showed as INVALID with exit 0. One that is missing is each
		// command's to report (exit 4).
		if fi, err := os.Stat(e.store.Dir); err == nil && !fi.IsDir() {
			renderError(stdout, stderr, e.format, fmt.Errorf("jobs folder %s is not a folder; pass another --jobs-dir DIR or set LOGIST_JOBS_DIR", e.store.Dir))
			return ExitUsage
		}
	}
	if c.steers && *databaseURL == "" {
		// Refused before anything is written, the command's event too.
		if err := e.checkWriter(); err != nil {
			err = helpful(e, c, err)
			renderError(stdout, stderr, e.format, err)
			return ExitCode(err)
		}
	}
	var res *Result
	var err error
	if *databaseURL != "" {
		res, err = runCluster(e, c, *databaseURL, fs.Args())
	} else {
		res, err = c.run(e, fs.Args())
	}
	if c.steers && *databaseURL == "" {
		steward.RecordEvent(e.store.Dir, c.name, eventResult(err))
	}
	var pr *printed
	if errors.As(err, &pr) {
		return ExitCode(pr.err)
	}
	var fw *failedWith
	if errors.As(err, &fw) {
		render(stdout, e.format, fw.res, fw.err) // the details say what failed
		return ExitCode(fw.err)
	}
	if err != nil {
		err = helpful(e, c, err)
		renderError(stdout, stderr, e.format, err)
		return ExitCode(err)
	}
	if res != nil { // nil: the command printed its output as it went (watch, logs)
		render(stdout, e.format, res, nil)
	}
	return ExitOK
}

// splitCommand finds the command word, which may come after global flags.
func splitCommand(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return a, append(append([]string{}, args[:i]...), args[i+1:]...)
		}
		if (a == "--jobs-dir" || a == "--format" || a == "--database-url") && i+1 < len(args) {
			i++
		}
		if a == "-h" || a == "--help" || a == "--version" {
			return a, nil
		}
	}
	return "", nil
}

// steward returns the steward for commands that change jobs. Their
// history records are signed with the folder's key, so only someone who may
// read it (the daemon's user) can steer jobs. Their transactions log
// nothing here: what they change, and any error they meet, is recorded in
// the job's history, which the daemon logs (internal/daemon's relay), and
// the command's outcome is what logist prints.
func (e *env) steward() (*steward.Steward, error) {
	keyDir := e.store.Dir
	if e.keyDir != "" {
		keyDir = e.keyDir
	} else if err := e.checkWriter(); err != nil {
		// A jobs folder that is not there has nothing to steer, and
		// its key (made below if missing) would make the whole path:
		// a mistyped --jobs-dir becomes a folder no logistd serves.
		return nil, err
	}
	key, err := signing.LoadOrCreate(keyDir)
	if err != nil {
		return nil, fmt.Errorf("history signing key (steering needs the daemon's user): %w", err)
	}
	opts := history.Options{Signer: key}
	if e.cluster {
		opts.MaxBytes = -1 // one file, as the cluster stores it
	}
	return steward.New(&jobtx.Env{Store: e.store, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		History: opts}, builtins.Effects()), nil
}

// checkWriter refuses a command that would write into the jobs folder
// when this user does not own it (jobstore.CheckWriter, the one rule),
// saying how to run it as the owner.
func (e *env) checkWriter() error {
	err := e.store.CheckWriter()
	var no *jobstore.NotOwnerError
	if errors.As(err, &no) {
		no.Command = shellWords(append([]string{"logist"}, e.argv[1:]...))
	}
	return err
}

// shellWords joins words into a command line a shell reads back as them.
func shellWords(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@%+") == "" {
			out[i] = w
			continue
		}
		out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

func mainHelp() string {
	var b strings.Builder
	b.WriteString("logist — steer the AI-agent jobs that logistd supervises.\n\nUsage: logist COMMAND [flags] [args]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for _, c := range commands {
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		c := find(n)
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, c.summary)
	}
	b.WriteString(`  help       show help for a command: logist help COMMAND; the error codes: logist help codes
  version    print the version

Global flags (any command):
  --jobs-dir DIR         jobs folder (else $LOGIST_JOBS_DIR, else ./jobs)
  --database-url URL     cluster mode: a logistd cluster's PostgreSQL database
                         (else $LOGISTD_DATABASE_URL, else the config file's
                         database_url)
  --format F             text, json or markdown. JSON is one object:
                         {"ok": true, ...} or
                         {"ok": false, "error": {"code", "exit_code", "message"}};
                         a job is under "job" (.job.status), a listing under "items"

Agent text (summaries, reasons, stderr) is shown with control and bidi
characters as visible escapes (\x1b, \u202e); JSON keeps it exact.

Exit codes: 0 success, 1 invalid arguments or input, 2 out of order (not allowed
in the job's current status), 3 permission denied, 4 not found.
`)
	return b.String()
}

func commandHelp(c *command) string {
	fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
	fs.String("jobs-dir", "./jobs", "jobs folder (env LOGIST_JOBS_DIR)")
	fs.String("format", "text", "output format: text, json or markdown")
	databaseURLFlag(fs, "") // a global flag, as Main takes it
	if c.flags != nil {
		c.flags(fs)
	}
	if c.steers || c == cmdSchedules {
		addIdempotencyFlag(fs)
	}
	s := fmt.Sprintf("Usage: logist %s %s\n\n%s\n\nFlags:\n%s", c.name, c.args, c.summary, fs.FlagUsages())
	if c.example != "" {
		s += "\nExamples:\n" + c.example
	}
	return s
}
