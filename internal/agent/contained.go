package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/logist/logist/internal/codes"
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
		return Direct{}, nil
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
	net, err := c.network(m)
	if err != nil {
		return nil, err
	}
	return &Contained{Exec: c.Exec, Mode: layer, Name: c.Status.Effective(layer), Network: net}, nil
}

// network is the job's network policy: the daemon's (the metering proxy),
// or with sandbox_network host the host's, narrowed by
// sandbox_network_allow to the ports it lists and the proxy's.
func (c *Containment) network(m *manifest.Manifest) (sandbox.Network, error) {
	if m.SandboxNetwork != string(sandbox.NetHost) {
		if len(m.SandboxNetworkAllow) > 0 {
			return sandbox.Network{}, &Error{Code: codes.AgentConfig, Msg: `sandbox_network_allow needs "sandbox_network": "host" (the allowlist opts into the host's network, narrowed to its ports)`}
		}
		return c.Network, nil
	}
	net := sandbox.Network{Mode: sandbox.NetHost}
	if len(m.SandboxNetworkAllow) == 0 {
		return net, nil
	}
	ports, err := AllowedPorts(m.SandboxNetworkAllow)
	if err != nil {
		return sandbox.Network{}, &Error{Code: codes.AgentConfig, Msg: err.Error()}
	}
	if c.ProxyPort > 0 {
		ports = append(ports, c.ProxyPort)
	}
	slices.Sort(ports)
	net.Ports = slices.Compact(ports)
	return net, nil
}

// AllowedPorts are the TCP ports of a network allowlist's entries: "host"
// (port 443) or "host:port".
func AllowedPorts(allow []string) ([]int, error) {
	var ports []int
	for _, a := range allow {
		port := 443
		if i := strings.LastIndex(a, ":"); i >= 0 && !strings.HasSuffix(a, "]") {
			n, err := strconv.Atoi(a[i+1:])
			if err != nil || n < 1 || n > 65535 {
				return nil, fmt.Errorf("sandbox_network_allow %q: the port must be 1 to 65535", a)
			}
			port = n
		}
		ports = append(ports, port)
	}
	return ports, nil
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
		call, err = c.Exec.Start(c.spec(spec, callDir))
		if errors.Is(err, sandbox.ErrUnavailable) {
			return nil, &Error{Code: codes.SandboxUnavailable, Msg: err.Error()}
		}
		if err != nil {
			return nil, &Error{Code: codes.AgentStart, Msg: fmt.Sprintf("start %s: %v", spec.Argv[0], err)}
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
		code := r.ExitCode
		if r.Signal != "" {
			code = -1 // as a direct run reports a program a signal ended
		}
		return &ProcResult{Stdout: r.Stdout, Stderr: r.Stderr, ExitCode: code}, nil
	case sandbox.OutcomeOutputLimit:
		return nil, &Error{Code: codes.AgentOutputLimit, Msg: fmt.Sprintf("agent printed more than %d bytes; killed", spec.limit()), Partial: r.Stdout, Stderr: string(r.Stderr)}
	case sandbox.OutcomeKilled:
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{Code: codes.AgentExit, Transient: true, Msg: fmt.Sprintf("%s was killed (%s)", spec.Argv[0], r.Signal), Partial: r.Stdout, Stderr: string(r.Stderr)}
	}
	return nil, &Error{Code: codes.AgentStart, Msg: fmt.Sprintf("start %s: %s", spec.Argv[0], strings.TrimSpace(r.Error)), Stderr: string(r.Stderr)}
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
	return sandbox.Spec{Argv: s.Argv, Dir: s.Dir, Env: s.Env, Stdin: s.Stdin, Limit: s.limit(), Home: s.Home,
		ReadOnly: s.ReadOnly, ReadWrite: s.ReadWrite, Fill: s.Fill, Network: c.network(s), Limits: c.Limits,
		CallDir: callDir, Layer: c.Mode}
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
