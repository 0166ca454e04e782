package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFailClosed: with no layer working, a call that asks for a sandbox
// (explicitly or by default) does not run, and the error names what is
// missing; only an explicit "none" runs uncontained.
func TestFailClosed(t *testing.T) {
	ex := &Local{Status: &Status{
		Bwrap:    Check{Why: "user namespaces disabled: /proc/sys/user/max_user_namespaces = 0"},
		Landlock: Check{Why: "landlock not supported by kernel"},
	}}
	for _, l := range []Layer{"", LayerAuto, LayerBwrap, LayerLandlock} {
		spec := shSpec(t, "echo ran > ran")
		spec.Layer = l
		_, err := ex.Start(spec)
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("layer %q: %v, want ErrUnavailable", l, err)
		}
		if l != LayerLandlock && !strings.Contains(err.Error(), "max_user_namespaces = 0") {
			t.Errorf("layer %q: error does not say what is missing: %v", l, err)
		}
		if _, err := os.Stat(filepath.Join(spec.Dir, "ran")); err == nil {
			t.Fatalf("layer %q: the program ran", l)
		}
	}
	spec := shSpec(t, "echo ran")
	spec.Layer = LayerNone
	r, err := Run(context.Background(), ex, spec)
	if err != nil || string(r.Stdout) != "ran\n" || r.Layer != "none" {
		t.Fatalf("explicit none: %+v %v", r, err)
	}
}

// TestResolve: Resolve never turns a request for a sandbox
// into "none".
func TestResolve(t *testing.T) {
	both := &Status{Bwrap: Check{OK: true}, Landlock: Check{OK: true}}
	onlyLL := &Status{Bwrap: Check{Why: "bwrap not installed"}, Landlock: Check{OK: true}}
	for _, c := range []struct {
		st   *Status
		want Layer
		got  Layer
	}{
		{both, LayerAuto, LayerBwrap}, {both, LayerLandlock, LayerLandlock}, {onlyLL, LayerAuto, LayerLandlock},
		{onlyLL, LayerNone, LayerNone},
	} {
		if l, err := c.st.Resolve(c.want); err != nil || l != c.got {
			t.Errorf("Resolve(%s) = %s, %v; want %s", c.want, l, err, c.got)
		}
	}
	if _, err := onlyLL.Resolve(LayerBwrap); err == nil || !strings.Contains(err.Error(), "bwrap not installed") {
		t.Errorf("bwrap without bwrap: %v", err)
	}
}

// TestOutputLimit: a program that prints more than the limit is killed;
// what it printed up to the limit is kept.
func TestOutputLimit(t *testing.T) {
	for _, layer := range append(layers(t), LayerNone) {
		spec := shSpec(t, "head -c 100000 /dev/zero; sleep 30")
		spec.Layer, spec.Limit = layer, 1000
		r, err := Run(context.Background(), &Local{}, spec)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != OutcomeOutputLimit || len(r.Stdout) != 1000 {
			t.Errorf("%s: outcome %s with %d bytes", layer, r.Outcome, len(r.Stdout))
		}
	}
}

// TestStartFailure: a program that cannot start is a start failure with
// a reason, not an exit status.
func TestStartFailure(t *testing.T) {
	for _, layer := range append(layers(t), LayerNone) {
		spec := shSpec(t, "")
		spec.Argv, spec.Layer = []string{"no-such-program-xyz"}, layer
		r, err := Run(context.Background(), &Local{}, spec)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != OutcomeStartFailed || !strings.Contains(r.Error, "no-such-program-xyz") {
			t.Errorf("%s: %+v", layer, r)
		}
	}
}

// TestUnrecordedSandboxDoesNotRun: a sandbox whose pid file cannot be
// written (a daemon could not find it again to kill it) is stopped at
// once, and the call is a start failure.
func TestUnrecordedSandboxDoesNotRun(t *testing.T) {
	for _, layer := range append(layers(t), LayerNone) {
		spec := shSpec(t, "sleep 30")
		spec.Layer = layer
		// A folder with something in it where the pid file goes.
		if err := os.MkdirAll(filepath.Join(spec.CallDir, fileSandbox, "x"), 0o700); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		r, err := Run(ctx, &Local{}, spec)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", layer, err)
		}
		if r.Outcome != OutcomeStartFailed || !strings.Contains(r.Error, "record the sandbox's pid") {
			t.Errorf("%s: %+v", layer, r)
		}
	}
}

// TestDeadlineKills: Run kills the call when ctx ends and returns
// ctx.Err(); the result says killed.
func TestDeadlineKills(t *testing.T) {
	for _, layer := range layers(t) {
		spec := shSpec(t, "echo started; sleep 30")
		spec.Layer = layer
		ctx, cancel := context.WithCancel(context.Background())
		c, err := (&Local{}).Start(spec)
		if err != nil {
			t.Fatal(err)
		}
		waitFile(t, filepath.Join(spec.CallDir, fileStdout), "started", 20e9)
		cancel()
		if _, err := c.Wait(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: Wait: %v", layer, err)
		}
		c.Kill()
		r, err := c.Wait(context.Background())
		if err != nil || r.Outcome != OutcomeKilled {
			t.Fatalf("%s: after Kill: %+v %v", layer, r, err)
		}
	}
}

// TestProxy: with the proxy network the program reaches the proxy's unix
// socket through 127.0.0.1:PORT ({proxy_addr} and LOGIST_PROXY_ADDR), and
// nothing else.
func TestProxy(t *testing.T) {
	bin := attacker(t)
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			fmt.Fprintf(c, "proxy heard: %s", line)
			c.Close()
		}
	}()
	for _, layer := range append(layers(t), LayerNone) {
		spec := shSpec(t, "")
		spec.Layer = layer
		spec.Argv = []string{bin, "{proxy_addr}"}
		spec.Env = append(spec.Env, "LOGIST_ATTACK_ROLE=dial")
		spec.Network = Network{Mode: NetProxy, Socket: sock}
		r, err := Run(context.Background(), &Local{}, spec)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != OutcomeExited || !strings.HasPrefix(string(r.Stdout), "proxy heard: ping from 127.0.0.1:") {
			t.Errorf("%s: %+v stdout %q stderr %q", layer, r, r.Stdout, r.Stderr)
		}
		if layer == LayerBwrap && !strings.Contains(string(r.Stdout), fmt.Sprintf(":%d", DefaultProxyPort)) {
			t.Errorf("bwrap: proxy not on the default port: %q", r.Stdout)
		}
	}
}

// TestProxyNothingInside: under bwrap the proxy's listener is made inside
// and handed out, so the program holds no descriptor but its standard
// streams (not the listener, not the pair it went out through) and nothing
// of the proxy is bound into the sandbox; it still reaches the proxy, and
// no second helper runs between the sandbox's init and the program (the
// program is the init's child).
func TestProxyNothingInside(t *testing.T) {
	if !Probe().Bwrap.OK {
		t.Skip("bwrap does not work here")
	}
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "proxy\n")
			c.Close()
		}
	}()
	// The shell's descriptors are listed into a file, not through a pipe:
	// bash holds a pipeline's two ends open until it has started both of
	// its commands, and ls, already running, saw them now and then (3 and
	// 4: about one call in 60 on a 2-core machine, before and after the
	// spares alike).
	spec := shSpec(t, `ls /proc/$$/fd > /tmp/fds; tr '\n' ' ' < /tmp/fds; echo; grep -c proxy.sock /proc/self/mountinfo; `+
		`awk '/^PPid:/ {print $2}' /proc/$$/status; exec 3<>/dev/tcp/127.0.0.1/8788 2>/dev/null && cat <&3 || echo no-bash-tcp`)
	spec.Argv[0] = "/bin/bash"
	spec.Layer = LayerBwrap
	spec.Network = Network{Mode: NetProxy, Socket: sock}
	for _, b := range binaries(t) {
		t.Run("helper"+b.name, func(t *testing.T) {
			s := spec
			s.CallDir += b.name
			r, err := Run(context.Background(), &Local{Self: b.self}, s)
			proxyNothingInside(t, r, err)
		})
	}
}

func proxyNothingInside(t *testing.T, r *Result, err error) {
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(r.Stdout), "\n")
	if r.Outcome != OutcomeExited || r.ExitCode != 0 || len(lines) < 4 {
		t.Fatalf("%+v stdout %q stderr %q", r, r.Stdout, r.Stderr)
	}
	// Whatever the test binary inherited from its own parent included:
	// the launcher hands the sandbox its standard streams only.
	if fds := strings.Fields(lines[0]); !slices.Equal(fds, []string{"0", "1", "2"}) {
		t.Errorf("the program holds descriptors beyond its standard streams: %q", lines[0])
	}
	if got := strings.TrimSpace(lines[1]); got != "0" {
		t.Errorf("%s mounts name the proxy's socket in the sandbox, want none", got)
	}
	if got := strings.TrimSpace(lines[2]); got != "1" {
		t.Errorf("the program's parent is pid %s in the sandbox, want its init (1)", got)
	}
	if got := strings.TrimSpace(lines[3]); got != "proxy" {
		t.Errorf("through 127.0.0.1:8788 the program heard %q, want the proxy", got)
	}
}

// TestProxyAddrFilledInFiles: a config file the caller wrote into the
// call's HOME with the proxy's address placeholder (a preset's base URL
// in a file) holds the address the call reaches the proxy at when the
// program starts, on every layer; a symlink named as a file to fill is
// refused and its target left alone (the launcher has the daemon's
// rights; the HOME is the call's to plant links in).
func TestProxyAddrFilledInFiles(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, layer := range append(layers(t), LayerNone) {
		spec := shSpec(t, `cat "$HOME/.tool/config"; printf '|%s' "$LOGIST_PROXY_ADDR"`)
		spec.Layer = layer
		spec.Home = filepath.Join(filepath.Dir(spec.Dir), "home")
		conf := filepath.Join(spec.Home, ".tool", "config")
		if err := os.MkdirAll(filepath.Dir(conf), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(conf, []byte("base_url = \"http://"+ProxyAddr+"/v1\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		spec.Fill = []string{conf}
		spec.Network = Network{Mode: NetProxy, Socket: sock}
		r, err := Run(context.Background(), &Local{}, spec)
		if err != nil {
			t.Fatal(err)
		}
		out := string(r.Stdout)
		conf2, addr, _ := strings.Cut(out, "|")
		if r.Outcome != OutcomeExited || !strings.HasPrefix(addr, "127.0.0.1:") ||
			conf2 != "base_url = \"http://"+addr+"/v1\"\n" {
			t.Errorf("%s: %+v stdout %q stderr %q", layer, r, r.Stdout, r.Stderr)
		}

		// A symlink in place of the file: the call does not start.
		target := filepath.Join(t.TempDir(), "elsewhere")
		if err := os.WriteFile(target, []byte(ProxyAddr), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(conf); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, conf); err != nil {
			t.Fatal(err)
		}
		spec.CallDir += "-link"
		r, err = Run(context.Background(), &Local{}, spec)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != OutcomeStartFailed || !strings.Contains(r.Error, "proxy's address") {
			t.Errorf("%s: a symlink to fill: %+v stdout %q", layer, r, r.Stdout)
		}
		if b, _ := os.ReadFile(target); string(b) != ProxyAddr {
			t.Errorf("%s: the launcher wrote through a symlink: %q", layer, b)
		}
	}
}

// TestSpecCheck: the call directory can never be reached through a path a
// call is given, and paths must be absolute and clean.
func TestSpecCheck(t *testing.T) {
	base := shSpec(t, "true")
	job := filepath.Dir(base.Dir)
	for name, mod := range map[string]func(*Spec){
		"call dir in workspace":     func(s *Spec) { s.CallDir = filepath.Join(s.Dir, "call") },
		"workspace in call dir":     func(s *Spec) { s.CallDir = job },
		"read-only parent of call":  func(s *Spec) { s.ReadOnly = []string{job} },
		"read-write is call dir":    func(s *Spec) { s.ReadWrite = []string{s.CallDir} },
		"home holds call dir":       func(s *Spec) { s.Home = filepath.Dir(s.CallDir) },
		"relative workspace":        func(s *Spec) { s.Dir = "workspace" },
		"unclean path":              func(s *Spec) { s.ReadOnly = []string{s.Dir + "/../x"} },
		"root exposed":              func(s *Spec) { s.ReadOnly = []string{"/"} },
		"empty argv":                func(s *Spec) { s.Argv = nil },
		"proxy without socket":      func(s *Spec) { s.Network = Network{Mode: NetProxy} },
		"unknown network":           func(s *Spec) { s.Network = Network{Mode: "wide"} },
		"unknown layer":             func(s *Spec) { s.Layer = "chroot" },
		"proxy socket not a socket": func(s *Spec) { s.Network = Network{Mode: NetProxy, Socket: s.Dir} },
		"fill outside home":         func(s *Spec) { s.Fill = []string{filepath.Join(s.Dir, "config")} },
		"fill relative":             func(s *Spec) { s.Home = filepath.Join(job, "home"); s.Fill = []string{"config"} },
	} {
		s := base
		mod(&s)
		if err := s.check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := base.check(); err != nil {
		t.Fatal(err)
	}
}

// TestHostViewHidesSecrets: what only its owner may read in /etc is
// masked under bwrap and left out of Landlock's grants.
func TestHostViewHidesSecrets(t *testing.T) {
	etc := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(etc, "passwd"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(etc, "shadow"), []byte("x"), 0o640))
	must(os.MkdirAll(filepath.Join(etc, "ssl", "certs"), 0o755))
	must(os.WriteFile(filepath.Join(etc, "ssl", "certs", "ca.pem"), []byte("x"), 0o644))
	must(os.Mkdir(filepath.Join(etc, "ssl", "private"), 0o700))
	must(os.MkdirAll(filepath.Join(etc, "apt"), 0o755))
	v := computeView(etc)
	var secrets, grants []string
	for _, s := range v.Secrets {
		secrets = append(secrets, strings.TrimPrefix(s.Path, etc))
	}
	for _, g := range v.EtcGrants {
		grants = append(grants, strings.TrimPrefix(g.Path, etc))
	}
	slices.Sort(grants)
	if want := []string{"/shadow", "/ssl/private"}; !slices.Equal(secrets, want) {
		t.Errorf("secrets %v, want %v", secrets, want)
	}
	if want := []string{"/apt", "/passwd", "/ssl/certs"}; !slices.Equal(grants, want) {
		t.Errorf("grants %v, want %v", grants, want)
	}
	args := strings.Join(systemArgs(v), " ")
	for _, want := range []string{"--ro-bind /dev/null " + etc + "/shadow", "--tmpfs " + etc + "/ssl/private --remount-ro " + etc + "/ssl/private"} {
		if !strings.Contains(args, want) {
			t.Errorf("bwrap args lack %q: %s", want, args)
		}
	}
}

// TestPlanNeverMountsCallDir: whatever the spec, the bwrap mounts and the
// Landlock grants never include the call directory or the job folder.
func TestPlanNeverMountsCallDir(t *testing.T) {
	spec := shSpec(t, "true")
	spec.Home = filepath.Join(filepath.Dir(spec.Dir), "home")
	if err := os.Mkdir(spec.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	job := filepath.Dir(spec.Dir)
	for _, layer := range []Layer{LayerBwrap, LayerLandlock} {
		p, err := makePlan(&spec, layer, tools{self: "/usr/bin/logistd", bwrap: "/usr/bin/bwrap", abi: 7}, currentView())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range p.BArgs {
			if within(a, spec.CallDir) || a == job {
				t.Errorf("%s: bwrap argument %q exposes the job folder", layer, a)
			}
		}
		for _, g := range append(append([]pathGrant{}, p.Exec.RO...), p.Exec.RW...) {
			if layer == LayerBwrap && (g.Path == "/tmp" || g.Path == "/dev/shm") {
				continue // the sandbox's own tmpfs, not the host's
			}
			if within(spec.CallDir, g.Path) {
				t.Errorf("%s: Landlock grant %q covers the call directory", layer, g.Path)
			}
		}
	}
}

// TestHideProcess: a non-dumpable process's environment is unreadable
// to another process of the same user (not root); a dumpable one's is
// (the control).
func TestHideProcess(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run both sides as another user")
	}
	bin := attacker(t)
	if err := os.Chmod(attackerDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cred := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	start := func(role string) *exec.Cmd {
		cmd := exec.Command(bin, role)
		cmd.Env = []string{"LOGIST_ATTACK_ROLE=" + role, "SECRET_TOKEN=hideme", "LOGIST_ATTACK_SIGNALED=/dev/null"}
		cmd.SysProcAttr = cred
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if role == "daemon" {
			if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	read := func(pid int) string {
		cmd := exec.Command(bin, "cat", fmt.Sprintf("/proc/%d/environ", pid))
		cmd.Env = []string{"LOGIST_ATTACK_ROLE=cat"}
		cmd.SysProcAttr = cred
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	hidden := start("daemon")
	plain := start("survivor")
	waitFile(t, fmt.Sprintf("/proc/%d/cmdline", plain.Process.Pid), "survivor", 5e9)
	if got := read(plain.Process.Pid); !strings.Contains(got, "hideme") {
		t.Fatalf("control: a dumpable process's environ was not readable: %q", got)
	}
	if got := read(hidden.Process.Pid); strings.Contains(got, "hideme") {
		t.Fatalf("a non-dumpable process's environ was read: %q", got)
	}
}

// TestCheckHost: the --check-sandbox report names each layer, runs a call
// under each working one, and says what jobs get.
func TestCheckHost(t *testing.T) {
	ls := layers(t)
	var out strings.Builder
	if rc := CheckHost(&out); rc != 0 {
		t.Fatalf("rc %d:\n%s", rc, out.String())
	}
	for _, l := range ls {
		if !strings.Contains(out.String(), "a call under "+Probe().Effective(l)+" ran in") {
			t.Errorf("no trial for %s:\n%s", l, out.String())
		}
	}
	if !strings.Contains(out.String(), "jobs run under") {
		t.Errorf("report does not say what jobs get:\n%s", out.String())
	}
	// This test binary has no logist-sandbox beside it: it runs itself.
	if !strings.Contains(out.String(), "  helper    self     ") {
		t.Errorf("report does not say which helper binary runs the calls:\n%s", out.String())
	}
}

// TestHelperHookRequired: a binary that never called Helper cannot start
// calls with itself as the helper (it would run itself all over again).
func TestHelperHookRequired(t *testing.T) {
	hooked.Store(false)
	defer hooked.Store(true)
	spec := shSpec(t, "true")
	spec.Layer = LayerNone
	if _, err := (&Local{}).Start(spec); err == nil || !strings.Contains(err.Error(), "sandbox.Helper") {
		t.Fatalf("Start without the hook: %v", err)
	}
}

// TestNetHost: the shared network (a job's allowlist option) reaches the
// host's loopback — the weaker mode docs/security.md warns about — under
// every layer, while the default reaches nothing (TestEscapes).
func TestNetHost(t *testing.T) {
	bin := attacker(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprint(c, "host heard you")
			c.Close()
		}
	}()
	for _, layer := range layers(t) {
		spec := shSpec(t, "")
		spec.Layer = layer
		spec.Argv = []string{bin, ln.Addr().String()}
		spec.Env = append(spec.Env, "LOGIST_ATTACK_ROLE=dial")
		spec.Network = Network{Mode: NetHost}
		r, err := Run(context.Background(), &Local{}, spec)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Stdout) != "host heard you" {
			t.Errorf("%s: %+v stdout %q stderr %q", layer, r, r.Stdout, r.Stderr)
		}
	}
}

// TestPlanLinksProgramOnlyWhereNotBound: a program run by a link inside a
// folder the call is given (an npm package's node_modules/.bin/x) keeps
// that link; bwrap is not asked to make it again (it refuses: the file
// exists). A link in no bound folder is made.
func TestPlanLinksProgramOnlyWhereNotBound(t *testing.T) {
	spec := shSpec(t, "true")
	pkg := filepath.Join(filepath.Dir(spec.Dir), "node_modules")
	if err := os.MkdirAll(filepath.Join(pkg, ".bin"), 0o700); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(pkg, "cli.js")
	if err := os.WriteFile(real, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(pkg, ".bin", "cli")
	if err := os.Symlink("../cli.js", link); err != nil {
		t.Fatal(err)
	}
	tl := tools{self: "/usr/bin/logistd", bwrap: "/usr/bin/bwrap", abi: 7}
	for _, c := range []struct {
		ro   []string
		want bool
	}{{[]string{pkg}, false}, {nil, true}} {
		s := spec
		s.Argv = []string{link}
		s.ReadOnly = c.ro
		p, err := makePlan(&s, LayerBwrap, tl, currentView())
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(strings.Join(p.BArgs, " "), "--symlink "+real+" "+link)
		if got != c.want {
			t.Errorf("read-only %v: symlink made %v, want %v (%v)", c.ro, got, c.want, p.BArgs)
		}
	}
}

// TestSandboxKilledFromOutside: a SIGKILL that reaches bwrap itself (not
// the program, whose end bwrap reports as status 128+N) is told apart in
// the result (SandboxSignal), so that an agent killed by something other
// than its call is reported as such, not as a program's exit status.
func TestSandboxKilledFromOutside(t *testing.T) {
	for _, layer := range layers(t) {
		if layer != LayerBwrap {
			continue
		}
		spec := shSpec(t, "echo started; sleep 30")
		spec.Layer = layer
		c, err := (&Local{}).Start(spec)
		if err != nil {
			t.Fatal(err)
		}
		waitFile(t, filepath.Join(spec.CallDir, fileStdout), "started", 20e9)
		init, alive, err := readPid(filepath.Join(spec.CallDir, fileSandbox))
		if err != nil || !alive {
			t.Fatalf("sandbox pid: %d %v %v", init, alive, err)
		}
		bw := ppid(init) // bwrap, the launcher's child
		if bw <= 1 {
			t.Fatalf("no parent for the sandbox's init %d", init)
		}
		if err := syscall.Kill(bw, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		r, err := c.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != OutcomeExited || r.SandboxSignal != "SIGKILL" || r.Signal != "" {
			t.Fatalf("bwrap killed from outside: %+v", r)
		}
	}
}
