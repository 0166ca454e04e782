package sandbox

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Layer is how a call is contained.
type Layer string

const (
	// LayerAuto is the strongest layer this host supports: bwrap (with
	// Landlock inside where the kernel has it), else Landlock alone; an
	// error when neither works.
	LayerAuto Layer = "auto"
	// LayerBwrap is bubblewrap's namespaces, with Landlock as a second
	// layer inside where the kernel supports it.
	LayerBwrap Layer = "bwrap"
	// LayerLandlock is Landlock, rlimits and no_new_privs without
	// namespaces: for hosts without user namespaces (docs/security.md says
	// what it cannot hide).
	LayerLandlock Layer = "landlock"
	// LayerNone runs the program uncontained: only ever an explicit
	// opt-out by a steward, never a fallback.
	LayerNone Layer = "none"
)

// ParseLayer reads a layer name ("" is auto).
func ParseLayer(s string) (Layer, error) {
	switch l := Layer(s); l {
	case "":
		return LayerAuto, nil
	case LayerAuto, LayerBwrap, LayerLandlock, LayerNone:
		return l, nil
	}
	return "", fmt.Errorf("sandbox %q: use auto, bwrap, landlock or none", s)
}

// NetMode is what network a call reaches.
type NetMode string

const (
	// NetNone: no network at all (the default). With bwrap, a network
	// namespace with only loopback; with Landlock alone, no TCP connect or
	// bind (UDP needs Landlock ABI 10: see docs/security.md).
	NetNone NetMode = "none"
	// NetProxy: only the metering proxy, which listens on a unix socket on
	// the host (Network.Socket) and appears to the call as a TCP listener
	// on 127.0.0.1 (the address is in LOGIST_PROXY_ADDR and replaces
	// ProxyAddr in Argv, Env values and the Fill files).
	NetProxy NetMode = "proxy"
	// NetHost shares the host's network: what a job's network allowlist
	// option runs under. Weaker: the call reaches every address the host
	// reaches, the daemon's --listen port and host loopback services
	// included; nothing here filters by host name.
	NetHost NetMode = "host"
)

// ProxyAddr stands for the metering proxy's address as the call reaches
// it ("127.0.0.1:PORT") where that is known only when the call starts
// (Landlock alone: the launcher picks the port per call). The launcher
// replaces it in Argv, the Env values and the Spec's Fill files before the
// program starts: the one place the address is filled in.
const ProxyAddr = "{proxy_addr}"

// DefaultProxyPort is the port the proxy appears on inside a bwrap
// sandbox when Network.Port is 0 (with Landlock alone the port is picked
// per call, since the call shares the host's loopback).
const DefaultProxyPort = 8788

// Network is a call's network policy.
type Network struct {
	Mode   NetMode
	Socket string // NetProxy: the proxy's unix socket on the host
	Port   int    // NetProxy under bwrap: the port inside (DefaultProxyPort if 0)
	// Ports, with NetHost: the only TCP ports the call may connect to (a
	// job's network allowlist). Landlock (ABI 4) enforces it, by port
	// only: nothing here filters by host. A layer without Landlock's
	// network rules refuses the call (ErrUnavailable), never runs it
	// unfiltered. Empty: every port.
	Ports []int
}

// Limits are the call's resource limits, set as rlimits on the agent
// process (each process of the call gets them: they are per process, not
// per sandbox, except Processes under bwrap, which counts the sandbox's
// user namespace). Zero fields take DefaultLimits' value; Unlimited lifts
// a limit.
type Limits struct {
	MemoryBytes uint64 // RLIMIT_DATA: heap and private writable mappings
	CPUSeconds  uint64 // RLIMIT_CPU
	OpenFiles   uint64 // RLIMIT_NOFILE
	Processes   uint64 // RLIMIT_NPROC (threads count)
	FileBytes   uint64 // RLIMIT_FSIZE: the largest file the call may write
	TmpBytes    uint64 // size of the private /tmp (bwrap: a tmpfs)
}

// Unlimited lifts one limit.
const Unlimited = math.MaxUint64

// DefaultLimits are generous for an agent CLI (Node runtimes, compilers,
// test suites) and small enough that a runaway call does not take the
// host down.
var DefaultLimits = Limits{
	MemoryBytes: 8 << 30,
	CPUSeconds:  4 * 3600,
	OpenFiles:   4096,
	Processes:   1024,
	FileBytes:   1 << 30,
	TmpBytes:    1 << 30,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	pick := func(v, def uint64) uint64 {
		if v == 0 {
			return def
		}
		return v
	}
	return Limits{
		MemoryBytes: pick(l.MemoryBytes, d.MemoryBytes),
		CPUSeconds:  pick(l.CPUSeconds, d.CPUSeconds),
		OpenFiles:   pick(l.OpenFiles, d.OpenFiles),
		Processes:   pick(l.Processes, d.Processes),
		FileBytes:   pick(l.FileBytes, d.FileBytes),
		TmpBytes:    pick(l.TmpBytes, d.TmpBytes),
	}
}

// Spec is one contained program run. Paths are absolute; every path the
// call sees keeps the name it has on the host.
type Spec struct {
	Argv []string
	// Dir is the workspace: read-write and the working directory.
	Dir string
	// Env is the program's whole environment, already scrubbed by the
	// caller (nothing of the daemon's is added). HOME is set to Home.
	Env []string
	// Stdin is fed to the program; nil means /dev/null.
	Stdin []byte
	// Limit caps each of stdout and stderr (DefaultOutputLimit if 0); a
	// call that prints more is killed (OutcomeOutputLimit).
	Limit int64
	// Home is the program's HOME, read-write: a fresh folder the caller
	// provides (a preset's config home). Empty: HOME is the private /tmp.
	Home string
	// ReadOnly are extra paths (files or folders) the program may read,
	// such as a preset's CLI installation or a request file. The program
	// itself (Argv[0], if absolute) is always readable.
	ReadOnly []string
	// ReadWrite are extra paths the program may write, such as a call's
	// scratch folder.
	ReadWrite []string
	// Fill are files the caller wrote for the call (a preset's config
	// file in Home) that may hold ProxyAddr: the launcher fills the
	// address in before the program starts, as in Argv and Env. Each is
	// a regular file under Home or a ReadWrite path (a symlink is
	// refused).
	Fill    []string
	Network Network
	Limits  Limits
	// CallDir is where the launcher keeps the call's stdout, stderr,
	// exit status and timing: in the job's folder, never visible to the
	// call. It is created if missing and must not hold another call.
	CallDir string
	Layer   Layer
	// Owner is who makes the call (a job): Local keeps at most one
	// spare sandbox per owner (Local.Spare), which only a call of the
	// same owner may use. "": none.
	Owner string
	// NestedNamespaces lets the program create user namespaces of its own
	// inside a bwrap sandbox (an agent CLI that sandboxes its tools with
	// bwrap itself); off by default.
	NestedNamespaces bool
}

// DefaultOutputLimit caps what a program may print, per stream.
const DefaultOutputLimit = 4 << 20

func (s *Spec) limit() int64 {
	if s.Limit <= 0 {
		return DefaultOutputLimit
	}
	return s.Limit
}

// Outcome is how a call ended.
type Outcome string

const (
	OutcomeExited      Outcome = "exited"       // the program ended by itself (ExitCode)
	OutcomeOutputLimit Outcome = "output_limit" // it printed more than the limit and was killed
	OutcomeKilled      Outcome = "killed"       // killed on request (halt, deadline, Kill)
	OutcomeStartFailed Outcome = "start_failed" // the sandbox or the program could not start (Error)
)

// Result is what a call left in its call directory.
type Result struct {
	Outcome Outcome `json:"outcome"`
	// ExitCode is the program's exit status; 128+N when signal N ended it.
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	// SandboxSignal is the signal that ended bwrap itself (not the
	// program: bwrap reports that one as ExitCode 128+N). Nothing of the
	// call's own kills bwrap before the program has exited, so a signal
	// here came from outside the call: it is reported as such.
	SandboxSignal string `json:"sandbox_signal,omitempty"`
	Error         string `json:"error,omitempty"`
	// Layer is the containment the call ran under, e.g. "bwrap+landlock".
	Layer   string    `json:"layer"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	// StdoutBytes and StderrBytes are what the files hold (at most the
	// limit each).
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	// StdoutSHA256 and StderrSHA256 are the hashes of what the launcher
	// wrote: reading the result back checks them, so output changed in
	// the call directory afterwards is an error, not an answer.
	StdoutSHA256 string `json:"stdout_sha256"`
	StderrSHA256 string `json:"stderr_sha256"`
	// Synced says the launcher made the result durable itself: no daemon
	// waited for it (see daemonWaits). A daemon that waits records the
	// answer in the job's history with its own fsync instead.
	Synced bool `json:"synced,omitempty"`

	Stdout []byte `json:"-"`
	Stderr []byte `json:"-"`
}

// Errors a caller tells apart.
var (
	// ErrUnavailable: the layer asked for does not work on this host
	// (the message names what is missing).
	ErrUnavailable = errors.New("sandbox unavailable")
	// ErrNoCall: the call directory holds no call.
	ErrNoCall = errors.New("no sandboxed call")
	// ErrCallExists: Start was given a call directory that holds a call.
	ErrCallExists = errors.New("call directory already holds a call")
	// ErrLost: the launcher ended without leaving a result (it was killed,
	// or the machine restarted); nothing of the call still runs.
	ErrLost = errors.New("sandboxed call lost: its launcher ended without a result")
)

// check is the one rule for what a spec may expose: absolute clean paths,
// a workspace that exists, and a call directory that the call can neither
// see nor reach through any path it is given.
func (s *Spec) check() error {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return errors.New("sandbox: empty argv")
	}
	if _, err := ParseLayer(string(s.Layer)); err != nil {
		return err
	}
	abs := func(what, p string) error {
		if p == "" || !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return fmt.Errorf("sandbox: %s %q is not an absolute clean path", what, p)
		}
		if p == "/" {
			return fmt.Errorf("sandbox: %s may not be /", what)
		}
		return nil
	}
	if err := abs("workspace", s.Dir); err != nil {
		return err
	}
	if fi, err := os.Stat(s.Dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("sandbox: workspace %q is not a folder", s.Dir)
	}
	if err := abs("call directory", s.CallDir); err != nil {
		return err
	}
	exposed := map[string]string{s.Dir: "workspace"}
	if s.Home != "" {
		if err := abs("home", s.Home); err != nil {
			return err
		}
		exposed[s.Home] = "home"
	}
	for _, p := range s.ReadOnly {
		if err := abs("read-only path", p); err != nil {
			return err
		}
		exposed[p] = "read-only path"
	}
	for _, p := range s.ReadWrite {
		if err := abs("read-write path", p); err != nil {
			return err
		}
		exposed[p] = "read-write path"
	}
	for _, f := range s.Fill {
		if err := abs("file to fill", f); err != nil {
			return err
		}
		if !slices.ContainsFunc(append([]string{s.Home}, s.ReadWrite...), func(d string) bool { return d != "" && within(f, d) && f != d }) {
			return fmt.Errorf("sandbox: file to fill %q is not under the call's home or a read-write path", f)
		}
	}
	for _, port := range s.Network.Ports {
		if s.Network.Mode != NetHost || port < 1 || port > 65535 {
			return fmt.Errorf("sandbox: allowed port %d: ports are 1 to 65535, with network host", port)
		}
	}
	switch s.Network.Mode {
	case "", NetNone, NetHost:
	case NetProxy:
		if err := abs("proxy socket", s.Network.Socket); err != nil {
			return err
		}
		if fi, err := os.Stat(s.Network.Socket); err != nil || fi.Mode().Type() != os.ModeSocket {
			return fmt.Errorf("sandbox: proxy socket %q is not a unix socket", s.Network.Socket)
		}
		if s.Network.Port < 0 || s.Network.Port > 65535 {
			return fmt.Errorf("sandbox: proxy port %d out of range", s.Network.Port)
		}
	default:
		return fmt.Errorf("sandbox: network %q: use none, proxy or host", s.Network.Mode)
	}
	for p, what := range exposed {
		if within(s.CallDir, p) || within(p, s.CallDir) {
			return fmt.Errorf("sandbox: %s %q overlaps the call directory %q, which the call must not reach", what, p, s.CallDir)
		}
	}
	return nil
}

// within reports whether p is dir or beneath it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}
