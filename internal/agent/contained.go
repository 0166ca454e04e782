package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/egress"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/sandbox"
)

// Containment turns a job's sandbox setting into the executor its agent
// processes run under: the one rule for which layer a job gets. The
// daemon makes one from its --sandbox flag and the host probe.
type Containment struct {
	// Exec starts the sandboxed calls (a *sandbox.Local on this host).
	Exec sandbox.Executor
	// Status is which layers work on this host (sandbox.Probe).
	Status *sandbox.Status
	// Default is the layer of a job that names none (the daemon's
	// --sandbox; auto when empty).
	Default sandbox.Layer
	// Network is what network the calls reach (none unless the metering
	// proxy is bound in).
	Network sandbox.Network
	// ProxyPort is the metering proxy's loopback port on the host, which
	// a job on the host network reaches it at (0: none).
	ProxyPort int
	// Egress is the network allowlist's proxy (nil: none, and a job with
	// an allowlist does not start).
	Egress Egress
	// OutputCeiling is the most any run may print per stream, whatever
	// its job asks (ProcSpec.Ceiling; 0: none): every executor For
	// gives, contained or not, holds its runs to it.
	OutputCeiling int64

	// nexts are the files made for the jobs' predicted next runs
	// (spare.go).
	nexts nextFiles
}

// Egress is the network allowlist's proxy (internal/egress), which the
// daemon hands over. It is reached the way the metering proxy is (the
// same listener): a call of a job with an allowlist gets a token of its
// own in the proxy URL (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY), and reaches
// only the listed hosts through it.
type Egress interface {
	Open(job, call string, allow []egress.Entry) (token string, err error)
	// Close ends the token and returns what the call was refused (the
	// proxy keeps it bounded, and has logged it).
	Close(token string) egress.Refused
}

// EgressLog gathers what the egress proxy refused one call's runs (its
// program's, a tool's), for the call's record in the job's history: the
// engine gives each call of a job with an allowlist a log of its own
// (WithEgressLog) and records what it holds with the call's response.
// It is carried by ctx, not by Result, because a call ends in many ways
// that make no Result (a timeout, a kill, a crash) and refusals are
// often why. Safe for concurrent use.
type EgressLog struct {
	mu      sync.Mutex
	refused egress.Refused
}

type egressKey struct{}

// WithEgressLog returns ctx whose contained runs add their refusals to a
// log of the call's own, and that log. When ctx's executor gives the
// runs no egress proxy (no allowlist, or not contained) it returns ctx
// as it is and nil: a call without one costs nothing more.
func WithEgressLog(ctx context.Context) (context.Context, *EgressLog) {
	if c, ok := ExecutorFrom(ctx).(*Contained); !ok || len(c.Allow) == 0 {
		return ctx, nil
	}
	l := &EgressLog{}
	return context.WithValue(ctx, egressKey{}, l), l
}

// Refused is what the call's runs were refused so far (nothing for a nil
// log).
func (l *EgressLog) Refused() egress.Refused {
	if l == nil {
		return egress.Refused{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return egress.Refused{Kept: slices.Clone(l.refused.Kept), Total: l.refused.Total}
}

// add adds one run's refusals to ctx's log, if it carries one.
func addRefused(ctx context.Context, r egress.Refused) {
	l, _ := ctx.Value(egressKey{}).(*EgressLog)
	if l == nil || r.Total == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refused.Merge(r)
}

// For resolves a job's sandbox setting ("" takes the default) to its
// executor, or an *Error SANDBOX_UNAVAILABLE naming what the host lacks: a
// job never runs less contained than it asked for (fail closed). "none"
// is an explicit opt-out and gives Direct.
func (c *Containment) For(m *manifest.Manifest) (Executor, error) {
	setting := m.Sandbox
	want := c.Default
	if setting != "" {
		l, err := sandbox.ParseLayer(setting)
		if err != nil {
			return nil, &Error{Code: codes.AgentConfig, Msg: err.Error()}
		}
		want = l
	}
	if want == "" {
		want = sandbox.LayerAuto
	}
	if want == sandbox.LayerNone {
		return Direct{Ceiling: c.OutputCeiling}, nil
	}
	layer, err := c.Status.Resolve(want)
	if err != nil {
		return nil, &Error{Code: codes.SandboxUnavailable, Msg: err.Error()}
	}
	if r, ok := c.Exec.(interface{ Ready() error }); ok {
		if err := r.Ready(); err != nil {
			return nil, &Error{Code: codes.SandboxUnavailable, Msg: err.Error()}
		}
	}
	net, allow, err := c.network(m)
	if err != nil {
		return nil, err
	}
	return &Contained{Exec: c.Exec, Mode: layer, Name: c.Status.Effective(layer), Network: net,
		Job: m.JobID, Allow: allow, Egress: c.Egress, Ceiling: c.OutputCeiling, nexts: &c.nexts}, nil
}

// network is the job's network policy, the one rule: the daemon's (the
// metering proxy only); with sandbox_network_allow the same plus the
// egress proxy, which lets the calls reach the listed hosts and nothing
// else; with sandbox_network host (and no allowlist) the host's network.
func (c *Containment) network(m *manifest.Manifest) (sandbox.Network, []egress.Entry, error) {
	if len(m.SandboxNetworkAllow) > 0 {
		allow, err := egress.ParseAllow(m.SandboxNetworkAllow)
		if err != nil {
			return sandbox.Network{}, nil, &Error{Code: codes.AgentConfig, Msg: err.Error()}
		}
		if c.Egress == nil || c.Network.Mode != sandbox.NetProxy {
			return sandbox.Network{}, nil, &Error{Code: codes.SandboxUnavailable, Msg: "sandbox_network_allow needs the daemon's egress proxy, which this daemon does not run"}
		}
		return c.Network, allow, nil
	}
	if m.SandboxNetwork == string(sandbox.NetHost) {
		return sandbox.Network{Mode: sandbox.NetHost}, nil, nil
	}
	return c.Network, nil, nil
}

// Contained runs each program in a sandbox of one layer: the workspace,
// its HOME and the paths the spec lists, the system read-only, a private
// /tmp, nothing else of the host (docs/security.md).
type Contained struct {
	Exec sandbox.Executor
	// Mode is the concrete layer (bwrap, landlock); Name the containment
	// it gives on this host ("bwrap+landlock").
	Mode    sandbox.Layer
	Name    string
	Network sandbox.Network
	Limits  sandbox.Limits
	// Job, Allow and Egress: the job's network allowlist and the proxy
	// that enforces it (Allow empty: no egress beyond the metering proxy).
	Job    string
	Allow  []egress.Entry
	Egress Egress
	// Ceiling holds every run to the operator's output ceiling
	// (ProcSpec.Ceiling; 0: none).
	Ceiling int64
	// nexts: the Containment's record of the files made for predicted
	// runs (nil: no spare sandboxes).
	nexts *nextFiles
}

// Layer implements Executor.
func (c *Contained) Layer() string { return c.Name }

// Run implements Executor. A spec whose CallDir holds a call adopts it: a
// finished one gives its kept result (never asked again), a running one
// is waited for. A halt or deadline (ctx) kills the whole sandbox.
func (c *Contained) Run(ctx context.Context, spec ProcSpec) (*ProcResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	spec = spec.ceiled(c.Ceiling)
	callDir := spec.CallDir
	if callDir == "" {
		tmp, err := os.MkdirTemp("", "logist-call-")
		if err != nil {
			return nil, &Error{Code: codes.AgentStart, Msg: err.Error()}
		}
		defer os.RemoveAll(tmp) //nolint:errcheck // a throw-away call directory in the temp folder
		callDir = filepath.Join(tmp, "call")
	}
	call, err := c.Exec.Adopt(callDir)
	switch {
	case err == nil:
	case errors.Is(err, sandbox.ErrNoCall):
	case errors.Is(err, sandbox.ErrLost):
		// Nothing of it runs any more: it is asked again in a clean folder.
		if ferr := sandbox.Forget(callDir); ferr != nil {
			return nil, &Error{Code: codes.AgentStart, Msg: ferr.Error()}
		}
	default:
		return nil, &Error{Code: codes.AgentStart, Msg: err.Error()}
	}
	if call == nil {
		if len(c.Allow) > 0 {
			tok, err := c.Egress.Open(c.Job, fmt.Sprintf("%06d", spec.Interaction), c.Allow)
			if err != nil {
				return nil, &Error{Code: codes.AgentStart, Msg: "egress proxy: " + err.Error()}
			}
			// What the run was refused goes to the call's record. A call
			// adopted from a previous daemon (call != nil) reports none:
			// its token, and what it was refused, ended with that daemon.
			defer func() { addRefused(ctx, c.Egress.Close(tok)) }()
			spec.Env = egressEnv(spec.Env, egress.ProxyURL(c.ProxyRoot(), tok))
		}
		call, err = c.Exec.Start(c.spec(spec, callDir))
		if errors.Is(err, sandbox.ErrUnavailable) {
			return nil, &Error{Code: codes.SandboxUnavailable, Msg: err.Error()}
		}
		if err != nil {
			return nil, &Error{Code: codes.AgentStart, Msg: fmt.Sprintf("start %s: %v", spec.Argv[0], err)}
		}
		if c.nexts.started(c.Job) {
			c.spareNext(spec)
		} else {
			// The run's first call is its pickup: its spare waits for the
			// program's head start (spareHeadStart) or its end, so that
			// the spare's sandbox does not take the CPU its program is
			// starting on (spare.go). Registered before Run returns, so
			// the next call finds it.
			ended, spared := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(spared)
				t := time.NewTimer(spareHeadStart)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ended:
				}
				c.spareNext(spec)
			}()
			defer func() { close(ended); <-spared }()
		}
	}
	r, err := call.Wait(ctx)
	if err != nil && ctx.Err() != nil {
		_ = call.Kill() // returns once the launcher and its sandbox are gone
		return nil, ctx.Err()
	}
	if errors.Is(err, sandbox.ErrLost) {
		return nil, &Error{Code: codes.SandboxLost, Transient: true, Msg: err.Error()}
	}
	if err != nil {
		return nil, &Error{Code: codes.AgentStart, Msg: err.Error()}
	}
	switch r.Outcome {
	case sandbox.OutcomeExited:
		pr := &ProcResult{Stdout: r.Stdout, Stderr: r.Stderr, ExitCode: r.ExitCode, Signal: r.Signal, Limit: spec.limit()}
		if r.SandboxSignal != "" {
			pr.Signal, pr.Sandbox = r.SandboxSignal, true
		}
		if pr.Signal != "" {
			pr.ExitCode = -1 // as a direct run reports a program a signal ended
		}
		return pr, nil
	case sandbox.OutcomeOutputLimit:
		return nil, spec.overLimit(r.Stdout, string(r.Stderr))
	case sandbox.OutcomeKilled:
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{Code: codes.AgentExit, Transient: true, Msg: fmt.Sprintf("%s was killed (%s)", spec.Argv[0], r.Signal), Partial: r.Stdout, Stderr: string(r.Stderr)}
	}
	return nil, &Error{Code: codes.AgentStart, Msg: fmt.Sprintf("start %s: %s", spec.Argv[0], strings.TrimSpace(r.Error)), Stderr: string(r.Stderr)}
}

// egressEnv points a run's HTTP clients at the egress proxy (upper and
// lower case: curl reads only http_proxy), the metering proxy on loopback
// excepted.
func egressEnv(env []string, proxyURL string) []string {
	set := map[string]string{"HTTPS_PROXY": proxyURL, "HTTP_PROXY": proxyURL, "ALL_PROXY": proxyURL,
		"NO_PROXY": "127.0.0.1"}
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		_, ok := set[strings.ToUpper(k)]
		return ok
	})
	for _, k := range slices.Sorted(maps.Keys(set)) {
		out = append(out, k+"="+set[k], strings.ToLower(k)+"="+set[k])
	}
	return out
}

// ProxyRoot is where the runs reach the metering proxy when their
// network is the proxy: the forwarder's loopback port in a bwrap sandbox,
// or the address the launcher picks with Landlock alone (the launcher
// replaces sandbox.ProxyAddr in the run's arguments, environment and
// ProcSpec.Fill files). "" when the runs share the host's network.
func (c *Contained) ProxyRoot() string {
	if c.Network.Mode != sandbox.NetProxy {
		return ""
	}
	if c.Mode == sandbox.LayerBwrap {
		port := c.Network.Port
		if port == 0 {
			port = sandbox.DefaultProxyPort
		}
		return fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	return "http://" + sandbox.ProxyAddr
}

// spec is the sandbox's view of a run.
func (c *Contained) spec(s ProcSpec, callDir string) sandbox.Spec {
	s = s.ceiled(c.Ceiling) // a predicted run's too (spareNext)
	return sandbox.Spec{Argv: s.Argv, Dir: s.Dir, Env: s.Env, Stdin: s.Stdin, Limit: s.limit(), Home: s.Home,
		ReadOnly: s.ReadOnly, ReadWrite: s.ReadWrite, Fill: s.Fill, Network: c.network(s), Limits: c.Limits,
		CallDir: callDir, Layer: c.Mode, Owner: c.Job}
}

// network is the run's network: the job's, or the host's for a run that
// must reach a model API the proxy does not meter yet (ProcSpec.ModelAPI).
func (c *Contained) network(s ProcSpec) sandbox.Network {
	if s.ModelAPI && c.Network.Mode != sandbox.NetProxy {
		return sandbox.Network{Mode: sandbox.NetHost}
	}
	return c.Network
}

// CallDir is where the contained run of call n of the job in jobDir keeps
// its output and status: requests/NNNNNN.call, beside the request, never
// inside what the run sees.
func CallDir(jobDir string, n int) string {
	return filepath.Join(jobDir, "requests", fmt.Sprintf("%06d.call", n))
}

// Adopts says whether job jobDir's call n outlived the daemon that made it
// and will be adopted, not asked again: a contained call still running
// under its launcher, or one whose answer its launcher kept (Contained.Run
// decides the same from the same files).
func Adopts(jobDir string, n int) bool {
	return sandbox.Adoptable(CallDir(jobDir, n))
}

// ForgetCall removes call n's kept output once its outcome is in the
// job's history: a later run of the same call number starts afresh.
func ForgetCall(jobDir string, n int) error {
	d := CallDir(jobDir, n)
	if _, err := os.Lstat(d); err != nil {
		return nil
	}
	return sandbox.Forget(d)
}

// heldCall reports whether callDir holds a call a previous daemon started
// (a run with it adopts that call instead of starting one).
func heldCall(callDir string) bool {
	return callDir != "" && sandbox.Holds(callDir)
}

// StopCall kills what is left of a run a previous daemon started, and
// forgets it: the contained call in callDir (its launcher, and with it
// the whole sandbox: every process of the run, detached ones included)
// and the process groups pidLog records for run n (an uncontained run;
// "" if none). A daemon killed mid-run leaves both running: the launcher
// outlives it by design (adoption), so a run that is not to be adopted
// must be stopped here. Stopping a run that already ended is a no-op.
func StopCall(callDir, pidLog string, n int) error {
	if pidLog != "" {
		killGroups(pidLog, n)
		if err := os.Remove(pidLog); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if heldCall(callDir) {
		// ErrLost: Adopt itself killed what the call's records name.
		if call, err := (&sandbox.Local{}).Adopt(callDir); err == nil {
			_ = call.Kill() // returns once the launcher and its sandbox are gone
		}
	}
	if _, err := os.Lstat(callDir); err != nil {
		return nil
	}
	return sandbox.Forget(callDir)
}
