package daemon

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/config"
	"github.com/logist/logist/internal/console"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/sandbox"
	"github.com/logist/logist/internal/schedule"
	"github.com/logist/logist/internal/suggest"
	"github.com/logist/logist/internal/textsafe"
)

// Set at build time (-ldflags -X).
var (
	Version  = "dev"
	Revision = "unknown"
)

// Options are logistd's settings.
type Options struct {
	JobsDir     string
	Once        bool
	MaxParallel int
	Listen      string
	LogFormat   string
	LogLevel    string
	Grace       time.Duration
	// HistoryMaxBytes rotates a job's history file past this size.
	HistoryMaxBytes int64
	// Retention deletes finished jobs this long after they finished
	// (hourly maintenance); 0 keeps them.
	Retention time.Duration
	// Pprof serves net/http/pprof under /debug/pprof/ on the Listen address.
	Pprof bool
	// DatabaseURL selects cluster mode (cluster.go): jobs come from this
	// PostgreSQL database, JobsDir is the node's working folder.
	DatabaseURL string
	// NodeID names this node in the cluster; Lease is its leases' time.
	NodeID string
	Lease  time.Duration
	// Sandbox is the containment of jobs that name none (auto, bwrap,
	// landlock, or none: every such job's processes uncontained).
	Sandbox string
	// OutputCeiling is the most any agent or tool process may print per
	// stream, whatever its job's max_output_bytes or
	// max_tool_output_bytes asks: the daemon holds that output in memory
	// (agent.Containment.OutputCeiling). 0: DefaultOutputCeiling.
	OutputCeiling int64
	// Console: the steward console on the Listen address (internal/console).
	Console ConsoleOptions
	// Budgets are the default budgets of jobs whose manifest sets none
	// (manifest.Budgets): every job runs under finite ones.
	Budgets manifest.Budgets
	// Getenv is the daemon's environment (LOGIST_CONTENT_KEY_FILE: where
	// the content key of encrypted histories is kept); nil: the process's.
	Getenv func(string) string

	// cronClock is the schedules' clock (nil: real time), for tests.
	cronClock schedule.Clock
	// pollTicks are the polled job folders' looks (nil: one every
	// unwatchedPoll), for tests, which may also look themselves (pollOnce).
	pollTicks <-chan time.Time
}

// ConsoleOptions are the console's flags.
type ConsoleOptions struct {
	TokenFile, ViewerTokenFile string
	TLSCert, TLSKey            string
	InsecureListen             bool
	Disable                    []string
}

// Main parses args and runs the daemon until ctx ends (SIGTERM/SIGINT) or,
// with --once, until no job is runnable. It returns the exit code.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("logistd", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	fs.StringVar(&o.JobsDir, "jobs-dir", "./jobs", "jobs folder to serve (env LOGIST_JOBS_DIR)")
	fs.BoolVar(&o.Once, "once", false, "run every runnable job, then exit 0 when none is runnable")
	fs.IntVar(&o.MaxParallel, "max-parallel", 4, "jobs run at the same time")
	fs.StringVar(&o.Listen, "listen", "", "address for /metrics, /healthz and /readyz (e.g. 127.0.0.1:9464); empty: off")
	fs.BoolVar(&o.Pprof, "pprof", false, "also serve Go profiling (net/http/pprof) under /debug/pprof/ on --listen, to the console's steward token only")
	fs.StringVar(&o.Console.TokenFile, "console-token-file", "", "file holding the console's steward token (may act); with neither token file, logistd makes JOBS/.logist/console-token")
	fs.StringVar(&o.Console.ViewerTokenFile, "console-viewer-token-file", "", "file holding the console's viewer token (read-only)")
	fs.StringVar(&o.Console.TLSCert, "tls-cert", "", "TLS certificate (PEM) for --listen; with --tls-key, the server speaks HTTPS")
	fs.StringVar(&o.Console.TLSKey, "tls-key", "", "TLS private key (PEM) for --listen")
	fs.BoolVar(&o.Console.InsecureListen, "insecure-listen", false, "allow a non-loopback --listen without TLS (a TLS proxy in front)")
	fs.StringSliceVar(&o.Console.Disable, "console-disable", nil, "console actions to refuse whoever asks (e.g. rollback); comma-separated")
	fs.StringVar(&o.LogFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&o.Grace, "grace", 30*time.Second, "on SIGTERM, how long calls in flight may finish before they are killed")
	fs.Int64Var(&o.HistoryMaxBytes, "history-max-bytes", history.DefaultMaxBytes, "rotate a job's active history file into a gzip archive past this size (0: the default; a negative value: never)")
	fs.DurationVar(&o.Retention, "retention", 0, "delete finished jobs (SUCCESS, CANCELED) this long after they finished, checked hourly; 0 keeps them (e.g. 720h)")
	fs.StringVar(&o.DatabaseURL, "database-url", "", "cluster mode: run the jobs of this PostgreSQL database (postgres://…) with the other nodes sharing it; --jobs-dir is then this node's working folder (docs/cluster.md)")
	fs.StringVar(&o.NodeID, "node-id", "", "cluster mode: this node's name (default: the host name)")
	fs.DurationVar(&o.Lease, "lease", 10*time.Second, "cluster mode: a job's lease, at least 1s; a node that stops renewing it (every third of it) loses the job to another after this long")
	fs.Int64Var(&o.OutputCeiling, "output-ceiling-bytes", DefaultOutputCeiling, "the most an agent or tool process may print to stdout, and to stderr, whatever its job's max_output_bytes or max_tool_output_bytes asks (bytes, at least 1024; 0: the default): logistd holds that output in memory until the process ends")
	fs.StringVar(&o.Sandbox, "sandbox", "auto", "containment of the processes of jobs whose manifest sets no sandbox: auto (bwrap, else Landlock; a job refuses to start when neither works), bwrap, landlock, or none (an explicit opt-out, recorded in each job's history)")
	o.Budgets = manifest.DefaultBudgets()
	o.Getenv = getenv
	fs.Float64Var(o.Budgets.CostThreshold, "default-cost-threshold", *o.Budgets.CostThreshold, "cost budget in cents of jobs whose manifest sets no cost_threshold (binds jobs whose calls are priced)")
	fs.Float64Var(o.Budgets.TimeThresholdMinutes, "default-time-threshold-minutes", *o.Budgets.TimeThresholdMinutes, "time budget, in minutes of agent execution, of jobs whose manifest sets no time_threshold_minutes")
	fs.IntVar(o.Budgets.MaxAgentCalls, "default-max-agent-calls", *o.Budgets.MaxAgentCalls, "calls budget of jobs whose manifest sets no limits.max_agent_calls: the job stops for a steward (CALL_BUDGET) when it has made this many agent calls")
	prices := fs.String("prices", "", "JSON price table (model -> input_per_mtok, output_per_mtok, cached_input_per_mtok) overriding and extending the built-in one, for agents that report tokens but no cost")
	version := fs.Bool("version", false, "print the version and exit")
	configFile := fs.String("config", "", "JSON config file (default $LOGISTD_CONFIG, else "+config.DefaultFile+" if it exists); flags win over environment (LOGISTD_<FLAG>), environment over the file")
	printConfig := fs.Bool("print-config", false, "print the effective configuration and where each value came from, then exit")
	checkSandbox := fs.Bool("check-sandbox", false, "print which sandbox layers (bwrap, landlock) work on this host and why not, run a call under each, then exit (1 if none works)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: logistd [flags]\n\nlogistd supervises the AI-agent jobs in a jobs folder.\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		// pflag says nothing itself when it continues on an error.
		fmt.Fprintf(stderr, "logistd: %s\nRun 'logistd --help' for the flags.\n", suggest.FlagError(fs, err))
		return 1
	}
	if *version {
		fmt.Fprintf(stdout, "logistd %s (%s)\n", Version, Revision)
		return 0
	}
	if *checkSandbox {
		return sandbox.CheckHost(stdout)
	}
	file := config.Path(*configFile, getenv)
	if *printConfig {
		// Which file was read, on stderr: stdout is the settings' JSON.
		if file == "" {
			fmt.Fprintf(stderr, "logistd: no config file (none given by --config or $LOGISTD_CONFIG, and no %s)\n", config.DefaultFile)
		} else {
			fmt.Fprintf(stderr, "logistd: config file %s\n", file)
		}
	}
	sources, err := config.Apply(fs, file, getenv, "config", "print-config", "version", "check-sandbox", "help")
	if err != nil {
		fmt.Fprintf(stderr, "logistd: %v\n", err)
		return 1
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "logistd: unexpected argument %q\n", fs.Arg(0))
		return 1
	}
	logger, priceTable, err := o.settle(sources, stderr, *prices)
	if err != nil {
		fmt.Fprintf(stderr, "logistd: %v\n", err)
		return 1
	}
	if *printConfig {
		b, _ := json.MarshalIndent(config.Redacted(sources), "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	if priceTable != nil {
		agent.SetPriceOverrides(priceTable)
	}
	run := Run
	if o.DatabaseURL != "" {
		run = RunCluster
	}
	if err := run(ctx, o, logger); err != nil {
		joblog.Log(logger, err.Error(), joblog.Problem{Code: codes.Daemon})
		fmt.Fprintf(stderr, "logistd: %v\n", err)
		return 1
	}
	return 0
}

// settle checks every setting a start needs and makes what they make
// (the logger, the price table of --prices: nil for none): the one check,
// so --print-config refuses what a start would, with the same message.
func (o *Options) settle(sources map[string]config.Source, stderr io.Writer, prices string) (*slog.Logger, map[string]manifest.Price, error) {
	logger, err := newLogger(stderr, o.LogFormat, o.LogLevel)
	if err != nil {
		return nil, nil, err
	}
	if err := o.check(sources); err != nil {
		return nil, nil, err
	}
	if _, err := sandbox.ParseLayer(o.Sandbox); err != nil {
		return nil, nil, fmt.Errorf("--%v", err)
	}
	if err := o.checkListen(); err != nil {
		return nil, nil, err
	}
	if prices == "" {
		return logger, nil, nil
	}
	p, err := agent.LoadPrices(prices)
	if err != nil {
		return nil, nil, err
	}
	return logger, p, nil
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	// Log lines carry agent text (reasons, messages). The text handler
	// quotes every value holding a rune that is not printable (strconv's
	// escapes: controls, bidi runes); JSON escapes C0 itself, and
	// textsafe.JSONWriter the runes it would leave raw (C1, bidi), the
	// values unchanged. A terminal tailing either log is safe.
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(textsafe.JSONWriter(w), opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use json or text", format)
}

// DefaultOutputCeiling is --output-ceiling-bytes' default: 16 times a
// job's default max_output_bytes (agent.DefaultMaxOutput).
const DefaultOutputCeiling = 64 << 20

// outputCeiling is --output-ceiling-bytes, its default for 0.
func (o *Options) outputCeiling() int64 {
	if o.OutputCeiling == 0 {
		return DefaultOutputCeiling
	}
	return o.OutputCeiling
}

// minOutputCeiling is the least --output-ceiling-bytes: the schema's
// minimum of the limits it caps.
const minOutputCeiling = 1024

// minLease is the shortest --lease: a node renews its leases every third
// of it, and a renewal is a database round trip that must fit.
const minLease = time.Second

// budgetFlags are the flags of the default budgets, by manifest key.
var budgetFlags = map[string]string{
	"cost_threshold":         "default-cost-threshold",
	"time_threshold_minutes": "default-time-threshold-minutes",
	"limits.max_agent_calls": "default-max-agent-calls",
}

// check is the one rule for logistd's settings that pflag's types do not
// hold: each refused value is named with where it came from (sources:
// a flag, the environment or the config file) and why.
func (o *Options) check(sources map[string]config.Source) error {
	bad := func(flag, why string) error {
		src := sources[flag]
		from := ""
		if src.Origin != "" && !strings.HasPrefix(src.Origin, "flag ") {
			from = " (" + src.Origin + ")"
		}
		return fmt.Errorf("--%s %s%s: %s", flag, src.Value, from, why)
	}
	var errs []error
	if o.MaxParallel < 1 {
		errs = append(errs, bad("max-parallel", "must be at least 1"))
	}
	if o.Grace < 0 {
		errs = append(errs, bad("grace", "must not be negative"))
	}
	if o.Retention < 0 {
		errs = append(errs, bad("retention", "must not be negative (0 keeps finished jobs)"))
	}
	if o.OutputCeiling < 0 || o.OutputCeiling > 0 && o.OutputCeiling < minOutputCeiling {
		errs = append(errs, bad("output-ceiling-bytes", fmt.Sprintf("must be at least %d (bytes; 0: the default)", minOutputCeiling)))
	}
	if o.DatabaseURL != "" && o.Lease < minLease {
		errs = append(errs, bad("lease", "must be at least "+minLease.String()))
	}
	var budget *manifest.DefaultError
	if err := o.Budgets.Check(); errors.As(err, &budget) {
		errs = append(errs, bad(budgetFlags[budget.Key], budget.Why))
	} else if err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkListen is the one check of --listen's console settings, made by
// settle (so --print-config refuses what a start would) and by the
// server itself: TLS's certificate and key together and readable, a
// loopback address unless TLS or --insecure-listen, --console-disable
// naming console actions, and the token files given readable and fit.
// A cluster node serves no TLS and leaves its console out on another
// address instead of refusing to start (clusterConsole); a console it
// serves is checked for the rest.
func (o *Options) checkListen() error {
	if o.Listen == "" {
		return nil
	}
	co := o.Console
	if o.DatabaseURL != "" {
		if console.CheckListen(o.Listen, false, co.InsecureListen) != nil {
			return nil // no console served: nothing more to check
		}
	} else {
		useTLS := co.TLSCert != "" || co.TLSKey != ""
		if useTLS {
			if co.TLSCert == "" || co.TLSKey == "" {
				return errors.New("--tls-cert and --tls-key go together")
			}
			if _, err := tls.LoadX509KeyPair(co.TLSCert, co.TLSKey); err != nil {
				return fmt.Errorf("--tls-cert/--tls-key: %w", err)
			}
		}
		if err := console.CheckListen(o.Listen, useTLS, co.InsecureListen); err != nil {
			return err
		}
	}
	if err := console.CheckDisabled(co.Disable); err != nil {
		return err
	}
	if co.TokenFile == "" && co.ViewerTokenFile == "" {
		return nil // the server makes JOBS/.logist/console-token
	}
	_, _, err := console.LoadTokens(o.JobsDir, co.TokenFile, co.ViewerTokenFile)
	return err
}
