package sandbox

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
)

// Paths inside a bwrap sandbox that the host does not have.
const (
	helperInside = "/run/logist/sandbox-helper" // the helper binary (Local.self), read-only
)

// File descriptors the launcher hands the sandbox.
const (
	statusFD     = 3 // the in-sandbox helper reports a failure to start here
	bwrapInfoFD  = 4 // bwrap's --json-status-fd: the sandbox init's pid, the exit code
	listenerFD   = 5 // the in-sandbox helper hands the launcher the proxy's listener here (listener.go)
	spareFD      = 6 // a spare's helper says it is ready here, then reads its program (spare.go)
	landlockMin  = 1 // ABI with file system rules
	landlockNet  = 4 // ABI with TCP rules
	landlockScop = 6 // ABI with signal and abstract-socket scoping
	landlockUnix = 9 // ABI with pathname unix socket rules
)

// plan is everything the launcher does for one call, decided on the
// daemon's side. It reaches the launcher through a pipe (it holds the
// call's environment, which may carry secrets, so it is never written to
// disk).
type plan struct {
	// Protocol is planProtocol: a launcher runs only its own.
	Protocol string `json:"protocol"`
	CallDir  string `json:"call_dir"`
	// Spare: the launcher starts the sandbox now, with no call and no
	// program (Argv, Env and Stdin are empty, CallDir too), and waits
	// for the call's own plan (spare.go).
	Spare bool     `json:"spare,omitempty"`
	Layer string   `json:"layer"` // effective, for the result
	Bwrap string   `json:"bwrap,omitempty"`
	BArgs []string `json:"bwrap_args,omitempty"` // bwrap's options, without the command
	// Self is this binary as the launcher runs it (the helper outside a
	// bwrap sandbox); Helper is the helper's path as the sandbox sees it.
	Self   string      `json:"self"`
	Helper string      `json:"helper,omitempty"`
	Exec   *execConfig `json:"exec,omitempty"` // nil: no helper (layer none)
	Argv   []string    `json:"argv"`
	Env    []string    `json:"env"`
	Dir    string      `json:"dir"`
	Stdin  []byte      `json:"stdin,omitempty"`
	// HasStdin: Stdin is fed even when empty (nil means /dev/null).
	HasStdin bool  `json:"has_stdin,omitempty"`
	Limit    int64 `json:"limit"`
	// Forward: the proxy's socket, to which the launcher forwards the
	// call's connections. It listens on a loopback port itself (Landlock
	// alone, none); under bwrap the in-sandbox helper makes the listener
	// in the sandbox's network namespace (Exec.Listen) and hands it out.
	Forward string `json:"forward,omitempty"`
	// PrivateTmp: the launcher makes a private folder for the call's
	// temporary files (TMPDIR, and HOME when HomeTmp), writable by the
	// program, and removes it when the call ends (Landlock alone).
	PrivateTmp bool `json:"private_tmp,omitempty"`
	HomeTmp    bool `json:"home_tmp,omitempty"`
	// Fill: files in which the launcher replaces ProxyAddr (Spec.Fill).
	Fill []string `json:"fill,omitempty"`
}

// execConfig is what the in-sandbox helper applies to itself before it
// executes the program.
type execConfig struct {
	Limits Limits `json:"limits"`
	// NprocShared: RLIMIT_NPROC counts every process of the user on the
	// host (no user namespace), so the helper adds the ones running now.
	NprocShared bool `json:"nproc_shared,omitempty"`
	// Landlock: restrict the program to RO, RW and Dev.
	Landlock bool        `json:"landlock"`
	RO       []pathGrant `json:"ro,omitempty"`
	RW       []pathGrant `json:"rw,omitempty"`
	Dev      []string    `json:"dev,omitempty"`
	// Net: restrict TCP to ConnectPorts (Landlock ABI 4).
	Net          bool  `json:"net,omitempty"`
	ConnectPorts []int `json:"connect_ports,omitempty"`
	// SeccompInet: refuse every Internet socket but plain TCP;
	// SeccompUnix: refuse new unix sockets (Landlock alone, which does not
	// see UDP or Multipath TCP, nor pathname unix sockets before ABI 9).
	SeccompInet bool `json:"seccomp_inet,omitempty"`
	SeccompUnix bool `json:"seccomp_unix,omitempty"`
	// Listen: make a listener on 127.0.0.1:Listen and hand it to the
	// launcher before the program starts (bwrap with the proxy).
	Listen int `json:"listen,omitempty"`
	// Spare: the helper prepares what does not depend on the program
	// (the listener, Landlock's ruleset), says so on spareFD and waits
	// there for the program (spareProgram) before it contains itself
	// and executes it (spare.go).
	Spare bool `json:"spare,omitempty"`
}

// tools are the outside programs and facts a plan needs.
type tools struct {
	self  string
	bwrap string
	abi   int // Landlock ABI (0: none)
}

// makePlan turns a checked spec and a concrete layer into the launcher's
// plan: the one place that decides what a call can reach.
func makePlan(s *Spec, layer Layer, t tools, v *hostView) (*plan, error) {
	p := &plan{Protocol: planProtocol(), CallDir: s.CallDir, Self: t.self, Argv: s.Argv, Dir: s.Dir, Limit: s.limit(),
		Stdin: s.Stdin, HasStdin: s.Stdin != nil, Fill: s.Fill}
	home := s.Home
	net := s.Network.Mode
	if net == "" {
		net = NetNone
	}
	lim := s.Limits.withDefaults()
	useLandlock := t.abi >= landlockMin && layer != LayerNone
	allowlist := net == NetHost && len(s.Network.Ports) > 0
	if allowlist && layer != LayerNone && t.abi < landlockNet {
		return nil, fmt.Errorf("%w: a network allowlist needs Landlock ABI %d to limit TCP ports (this host has ABI %d)", ErrUnavailable, landlockNet, t.abi)
	}
	switch layer {
	case LayerNone:
		p.Layer = "none"
		if home == "" {
			home = s.Dir
		}
		if net == NetProxy {
			p.Forward = s.Network.Socket
		}
	case LayerBwrap:
		p.Layer = "bwrap"
		if useLandlock {
			p.Layer = "bwrap+landlock"
		}
		p.Bwrap = t.bwrap
		p.Helper = helperInside
		if home == "" {
			home = "/tmp"
		}
	case LayerLandlock:
		if t.abi < landlockMin {
			return nil, fmt.Errorf("%w: landlock not supported by this kernel", ErrUnavailable)
		}
		if net != NetHost && t.abi < landlockNet {
			return nil, fmt.Errorf("%w: landlock ABI %d cannot restrict the network (needs ABI %d); use bwrap or network host", ErrUnavailable, t.abi, landlockNet)
		}
		if seccompArch == 0 {
			return nil, fmt.Errorf("%w: landlock alone needs a seccomp filter this build has none of for its architecture; use bwrap", ErrUnavailable)
		}
		p.Layer = "landlock"
		p.Helper = t.self
		p.PrivateTmp = true
		p.HomeTmp = home == ""
		if net == NetProxy {
			p.Forward = s.Network.Socket
		}
	default:
		return nil, fmt.Errorf("sandbox: no plan for layer %q", layer)
	}
	p.Env = s.Env
	if home != "" {
		p.Env = setEnv(p.Env, "HOME", home)
	}
	if layer == LayerNone {
		return p, nil
	}

	// What the program may read and write, under either layer.
	ro := map[string]bool{}
	for _, x := range s.ReadOnly {
		ro[x] = true
	}
	prog := ""
	if filepath.IsAbs(s.Argv[0]) && !underSystem(s.Argv[0]) {
		if real, err := filepath.EvalSymlinks(s.Argv[0]); err == nil {
			prog = real
			ro[real] = true
		}
	}
	rw := map[string]bool{s.Dir: true}
	if s.Home != "" {
		rw[s.Home] = true
	}
	for _, x := range s.ReadWrite {
		rw[x] = true
	}

	x := &execConfig{Limits: lim, Landlock: useLandlock, Net: net != NetHost && t.abi >= landlockNet}
	if allowlist {
		x.Net, x.ConnectPorts = true, slices.Clone(s.Network.Ports)
	}
	p.Exec = x
	if useLandlock {
		for _, e := range v.System {
			if e.Link == "" && e.Path != "/etc" {
				x.RO = append(x.RO, pathGrant{Path: e.Path, Dir: true})
			}
		}
		x.RO = append(x.RO, v.EtcGrants...)
		x.RO = append(x.RO, pathGrant{Path: "/proc", Dir: true})
		if net == NetHost && v.Resolv != "" {
			x.RO = append(x.RO, pathGrant{Path: v.Resolv})
		}
		for _, q := range slices.Sorted(maps.Keys(ro)) {
			if g, ok := grantOf(q); ok {
				x.RO = append(x.RO, g)
			}
		}
		for _, q := range slices.Sorted(maps.Keys(rw)) {
			if g, ok := grantOf(q); ok {
				x.RW = append(x.RW, g)
			}
		}
		x.Dev = devices
	}

	if layer == LayerLandlock {
		x.NprocShared = true
		x.SeccompInet = net != NetHost
		x.SeccompUnix = t.abi < landlockUnix
		return p, nil
	}

	// bwrap: namespaces, and a root that holds only what is listed.
	a := nsArgs(net, s.NestedNamespaces)
	a = append(a, "--json-status-fd", strconv.Itoa(bwrapInfoFD))
	a = append(a, systemArgs(v)...)
	if lim.TmpBytes != Unlimited {
		a = append(a, "--size", strconv.FormatUint(lim.TmpBytes, 10))
	}
	a = append(a, "--tmpfs", "/tmp", "--dir", "/run/logist")
	if net == NetHost && v.Resolv != "" {
		a = append(a, "--ro-bind", v.Resolv, v.Resolv)
	}
	type bind struct {
		path string
		opt  string
	}
	var binds []bind
	for q := range rw {
		binds = append(binds, bind{q, "--bind"})
	}
	for q := range ro {
		if !rw[q] {
			binds = append(binds, bind{q, "--ro-bind"})
		}
	}
	// A folder before what lies in it, so that a read-only path inside the
	// workspace stays read-only and nothing is hidden by a later mount.
	sort.Slice(binds, func(i, j int) bool {
		if di, dj := depth(binds[i].path), depth(binds[j].path); di != dj {
			return di < dj
		}
		return binds[i].path < binds[j].path
	})
	for _, b := range binds {
		a = append(a, b.opt, b.path, b.path)
	}
	if prog != "" && prog != s.Argv[0] && !covered(s.Argv[0], ro, rw) {
		// The name the program is run by, when no bound folder has it.
		a = append(a, "--symlink", prog, s.Argv[0])
	}
	a = append(a, "--ro-bind", t.self, helperInside)
	if net == NetProxy {
		// Nothing of the proxy is bound in: the launcher, outside,
		// forwards what reaches the listener (listener.go).
		p.Forward = s.Network.Socket
		x.Listen = s.Network.Port
		if x.Listen == 0 {
			x.Listen = DefaultProxyPort
		}
		x.ConnectPorts = []int{x.Listen}
	}
	a = append(a, "--chdir", s.Dir)
	if useLandlock {
		x.RW = append(x.RW, pathGrant{Path: "/tmp", Dir: true}, pathGrant{Path: "/dev/shm", Dir: true})
	}
	p.BArgs = a
	return p, nil
}

// covered reports whether p lies in a path bound into the sandbox other
// than p itself (the program's link is then there already).
func covered(p string, sets ...map[string]bool) bool {
	for _, set := range sets {
		for q := range set {
			if q != p && within(p, q) {
				return true
			}
		}
	}
	return false
}

// nsArgs are the namespaces and process settings of every bwrap sandbox.
func nsArgs(net NetMode, nested bool) []string {
	a := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup"}
	if net != NetHost {
		a = append(a, "--unshare-net")
	}
	if !nested {
		a = append(a, "--disable-userns")
	}
	// Not a child of the daemon: --die-with-parent ties the sandbox to its
	// launcher, which outlives a daemon restart; a killed launcher takes
	// the sandbox with it.
	return append(a, "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--hostname", "logist")
}

// systemArgs mount the system read-only, /etc without its secrets, and a
// /proc and /dev of the sandbox's own.
func systemArgs(v *hostView) []string {
	var a []string
	for _, e := range v.System {
		if e.Link != "" {
			a = append(a, "--symlink", e.Link, e.Path)
		} else {
			a = append(a, "--ro-bind", e.Path, e.Path)
		}
	}
	for _, s := range v.Secrets {
		if s.Dir {
			a = append(a, "--tmpfs", s.Path, "--remount-ro", s.Path)
		} else {
			a = append(a, "--ro-bind", "/dev/null", s.Path)
		}
	}
	return append(a, "--proc", "/proc", "--dev", "/dev")
}

// getEnv and setEnv read and replace one variable of an environment list.
func getEnv(env []string, k string) string {
	for _, kv := range env {
		if len(kv) > len(k) && kv[:len(k)] == k && kv[len(k)] == '=' {
			return kv[len(k)+1:]
		}
	}
	return ""
}

func setEnv(env []string, k, v string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if len(kv) > len(k) && kv[:len(k)] == k && kv[len(k)] == '=' {
			continue
		}
		out = append(out, kv)
	}
	return append(out, k+"="+v)
}
