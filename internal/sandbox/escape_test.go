package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/egress"
)

// arena is a jobs folder around the attacker's workspace, as logistd lays
// it out, with a secret marker in every file the agent must not read, a
// stand-in for the daemon (secrets in its environment, non-dumpable) and
// for its --listen port, and a UDP socket on the host's loopback.
type arena struct {
	root, jobs, job, other, ws, home, call, daemonHome string
	marker                                             string
	secrets                                            map[string]string // file -> its marker
	originals                                          map[string][]byte
	tcp                                                net.Listener
	tcpHits                                            atomic.Int32
	egressSocket, egressToken                          string
	udp                                                net.PacketConn
	udpHits                                            atomic.Int32
	unix                                               net.Listener
	unixHits                                           atomic.Int32
	daemon                                             *exec.Cmd
	daemonMark                                         string
	signaled                                           string
	limits                                             Limits
	uid                                                int // the user the daemon (and so the agent) runs as
}

// shortTempDir is a temporary folder for the arena whose path leaves
// room for its unix sockets (at most 107 bytes): t.TempDir's carries the
// test's name, and under a TMPDIR of a few dozen bytes the sockets'
// paths no longer fit. It is a folder's child, as t.TempDir's is: the
// arena opens its parent to the daemon's user (never TMPDIR itself).
func shortTempDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "sbx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	root := filepath.Join(d, "a")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	return root
}

func rnd() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// nobody is the unprivileged user the suite also runs as when the test
// runs as root: the daemon's recommended setting, and the one under which
// RLIMIT_NPROC applies (the kernel exempts uid 0 from it).
const nobody = 65534

func newArena(t *testing.T, uid int) *arena {
	bin := attacker(t)
	a := &arena{root: shortTempDir(t), marker: "LOGISTMARK" + rnd(), daemonMark: "DAEMONMARK" + rnd(),
		secrets: map[string]string{}, originals: map[string][]byte{}, uid: uid}
	a.jobs = filepath.Join(a.root, "jobs")
	a.job = filepath.Join(a.jobs, "job-a")
	a.other = filepath.Join(a.jobs, "otherjob-zq7")
	a.ws = filepath.Join(a.job, "workspace")
	a.home = filepath.Join(a.job, "agent-home", "worker")
	a.call = filepath.Join(a.job, "calls", "000001")
	a.daemonHome = filepath.Join(a.root, "daemon-home")
	for _, d := range []string{a.ws, a.home, a.call, filepath.Join(a.job, "requests"), filepath.Join(a.job, "snapshots"),
		filepath.Join(a.other, "workspace"), filepath.Join(a.jobs, ".logist"), a.daemonHome} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{
		filepath.Join(a.job, "job.json"), filepath.Join(a.job, "history.jsonl"),
		filepath.Join(a.job, "requests", "000001.json"), filepath.Join(a.job, "snapshots", "obj"),
		filepath.Join(a.other, "job.json"), filepath.Join(a.other, "history.jsonl"),
		filepath.Join(a.other, "workspace", "secret.txt"), filepath.Join(a.jobs, ".logist", "signing.key"),
		filepath.Join(a.daemonHome, "secret"),
	} {
		m := "SECRET" + rnd()
		a.secrets[f] = m
		if err := os.WriteFile(f, []byte(m+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		a.originals[f] = []byte(m + "\n")
	}
	// Symlinks planted in the workspace, pointing out of it.
	for name, target := range map[string]string{
		"link-job":  filepath.Join(a.job, "job.json"),
		"link-key":  filepath.Join(a.jobs, ".logist", "signing.key"),
		"link-jobs": a.jobs,
	} {
		if err := os.Symlink(target, filepath.Join(a.ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if a.tcp, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := a.tcp.Accept()
			if err != nil {
				return
			}
			a.tcpHits.Add(1)
			c.Close()
		}
	}()
	if a.udp, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 512)
		for {
			if _, _, err := a.udp.ReadFrom(buf); err != nil {
				return
			}
			a.udpHits.Add(1)
		}
	}()
	// A host service on a unix socket (a container runtime's, the
	// daemon's own control socket), owned by the daemon's user.
	if a.unix, err = net.Listen("unix", filepath.Join(a.daemonHome, "control.sock")); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := a.unix.Accept()
			if err != nil {
				return
			}
			a.unixHits.Add(1)
			c.Close()
		}
	}()
	// The network allowlist's egress proxy, the call's only network (as
	// logistd's metering proxy and egress proxy share a socket): it lists
	// nothing the attacker tries, and denies the daemon's listener.
	eg := egress.New(egress.Config{Deny: []netip.AddrPort{netip.MustParseAddrPort(a.tcp.Addr().String())}})
	allow, _ := egress.ParseAllow([]string{"example.invalid"})
	if a.egressToken, err = eg.Issue(egress.Grant{Job: "job", Call: "000001", Allow: allow}); err != nil {
		t.Fatal(err)
	}
	a.egressSocket = filepath.Join(a.root, "egress.sock")
	egLn, err := net.Listen("unix", a.egressSocket)
	if err != nil {
		t.Fatal(err)
	}
	egSrv := &http.Server{Handler: eg}
	go func() { _ = egSrv.Serve(egLn) }()
	t.Cleanup(func() { egSrv.Close() })
	a.signaled = filepath.Join(a.root, "daemon-signaled")
	daemonSecret := "SECRET" + rnd()
	a.secrets["daemon environ"] = daemonSecret
	if uid != 0 {
		// The daemon's user owns the jobs folder; the test's temporary
		// folders above it must let that user through.
		if err := filepath.Walk(a.root, func(p string, _ os.FileInfo, err error) error {
			if err == nil {
				err = os.Lchown(p, uid, uid)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{filepath.Dir(a.root), attackerDir} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	a.daemon = exec.Command(bin, a.daemonMark)
	a.daemon.Env = []string{"LOGIST_ATTACK_ROLE=daemon", "ANTHROPIC_API_KEY=" + daemonSecret, "LOGIST_ATTACK_SIGNALED=" + a.signaled}
	a.daemon.SysProcAttr = a.sysProcAttr()
	out, _ := a.daemon.StdoutPipe()
	if err := a.daemon.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("fake daemon: %q", line)
	}
	t.Cleanup(func() {
		a.tcp.Close()
		a.udp.Close()
		a.unix.Close()
		a.daemon.Process.Kill()
		a.daemon.Wait()
		for _, p := range survivors(a.marker) {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})
	if uid != 0 {
		if err := os.Chown(a.root, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	// 1 GiB of data: under 256 MiB the Go runtime of the test's programs
	// now and then could not start ("cannot allocate memory" in CI); the
	// memory attack still asks for more than the limit.
	a.limits = Limits{MemoryBytes: 1 << 30, Processes: 64, FileBytes: 4 << 20, TmpBytes: 8 << 20}
	return a
}

func (a *arena) sysProcAttr() *syscall.SysProcAttr {
	if a.uid == 0 {
		return nil
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(a.uid), Gid: uint32(a.uid)}}
}

// executor is a Local whose launcher runs as the arena's daemon user,
// from bin (the real logist-sandbox) or, when bin is "", from a copy of
// this test binary that user may execute.
func (a *arena) executor(t *testing.T, bin string) *Local {
	l := &Local{Self: bin}
	if a.uid == 0 {
		return l
	}
	l.cred = a.sysProcAttr().Credential
	if bin != "" {
		return l
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	l.Self = filepath.Join(attackerDir, "sandbox.test")
	if err := os.WriteFile(l.Self, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return l
}

func (a *arena) spec(layer Layer, role string) Spec {
	cfg, _ := json.Marshal(map[string]any{
		"workspace": a.ws, "job_dir": a.job, "jobs_dir": a.jobs, "other_job": a.other, "call_dir": a.call,
		"daemon_home": a.daemonHome, "real_home": os.Getenv("HOME"), "host_tmp": os.TempDir(),
		"daemon_pid": a.daemon.Process.Pid, "tcp_addr": a.tcp.Addr().String(), "udp_addr": a.udp.LocalAddr().String(),
		"unix_socket": filepath.Join(a.daemonHome, "control.sock"),
		"marker":      a.marker, "processes": a.limits.Processes, "memory_bytes": a.limits.MemoryBytes,
		"file_bytes": a.limits.FileBytes, "tmp_bytes": a.limits.TmpBytes,
	})
	return Spec{
		Argv: []string{attackerBin, "attacker-" + a.marker},
		Dir:  a.ws,
		Home: a.home,
		Env: []string{"PATH=/usr/bin:/bin", "LOGIST_ATTACK=" + string(cfg), "LOGIST_ATTACK_MARKER=" + a.marker, "LOGIST_ATTACK_ROLE=" + role,
			"HTTPS_PROXY=" + egress.ProxyURL("http://"+ProxyAddr, a.egressToken)},
		Network: Network{Mode: NetProxy, Socket: a.egressSocket},
		CallDir: a.call,
		Layer:   layer,
		Limits:  a.limits,
	}
}

// knownGaps are the attacks the Landlock-only layer cannot stop, as
// docs/security.md states; each still runs, and is reported.
func knownGaps(layer Layer, uid int) map[string]string {
	g := map[string]string{}
	if uid == 0 {
		g["fork-bomb"] = "the kernel does not apply RLIMIT_NPROC to uid 0: run logistd as an unprivileged user (or give it a cgroup with pids.max)"
	}
	if layer == LayerLandlock {
		g["see-host-processes"] = "Landlock cannot hide other processes' /proc entries (no PID namespace)"
		g["fill-tmp"] = "the private /tmp is a folder on the host's /tmp, with no size cap (no tmpfs)"
	}
	return g
}

type attackResult struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Data   string `json:"data"`
}

// TestEscapes runs the attacker under each layer this host has, with the
// launcher and helper run from this test binary and from the real
// logist-sandbox: every attempt must fail (escapes=0). The Landlock-only
// layer's documented gaps are counted apart, and a gap that closes fails
// the test too (the docs must then be updated).
func TestEscapes(t *testing.T) {
	uids := []int{os.Getuid()}
	if os.Getuid() == 0 {
		uids = append(uids, nobody)
	}
	for _, layer := range layers(t) {
		for _, uid := range uids {
			for _, b := range binaries(t) {
				// Under bwrap, also through a spare sandbox (spare.go).
				for _, spare := range []bool{false, true} {
					if spare && layer != LayerBwrap {
						continue
					}
					name := string(layer) + b.name
					if uid != 0 {
						name += fmt.Sprintf("-uid%d", uid)
					}
					if spare {
						name += "-spare"
					}
					t.Run(name, func(t *testing.T) { escapeSuite(t, layer, uid, b.self, spare) })
				}
			}
		}
	}
}

func escapeSuite(t *testing.T, layer Layer, uid int, bin string, spare bool) {
	a := newArena(t, uid)
	results, escapes, r := a.attack(t, layer, bin, spare)
	gaps := knownGaps(layer, uid)
	var names []string
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	nEsc, nGap := 0, 0
	for _, n := range names {
		why, escaped := escapes[n]
		gap, isGap := gaps[n]
		switch {
		case escaped && isGap:
			nGap++
			t.Logf("known gap  %-34s %s (%s)", n, gap, why)
		case escaped:
			nEsc++
			t.Errorf("ESCAPE     %-34s %s", n, why)
		case isGap:
			t.Errorf("gap closed %-34s documented as a gap (%s) but blocked: update docs/security.md and knownGaps", n, gap)
		default:
			t.Logf("blocked    %-34s %s", n, oneLine(results[n].Detail))
		}
	}
	if len(results) < 30 {
		t.Errorf("only %d attacks ran", len(results))
	}
	helper := "test-binary"
	if bin != "" {
		helper = filepath.Base(bin)
	}
	if spare {
		helper += "+spare"
	}
	fmt.Printf("sandbox escape suite: layer=%s uid=%d helper=%s attacks=%d escapes=%d known_gaps=%d\n", r.Layer, uid, helper, len(results), nEsc, nGap)
}

// attack runs the attacker under layer and judges what it did; spare:
// in a spare sandbox started ahead from a prediction of the call.
func (a *arena) attack(t *testing.T, layer Layer, bin string, spare bool) (map[string]attackResult, map[string]string, *Result) {
	t.Helper()
	spec := a.spec(layer, "attacker")
	if layer == LayerNone {
		spec.Env = append(spec.Env, "TMPDIR="+t.TempDir())
	}
	ex := a.executor(t, bin)
	sparePid := 0
	if spare {
		spec.Owner = "escape-suite"
		predicted := spec
		predicted.Argv, predicted.Env = []string{spec.Argv[0], "predicted"}, nil // the same program: a different one binds differently
		sparePid = startTestSpare(t, ex, predicted)
	}
	r, err := Run(context.Background(), ex, spec)
	if err != nil {
		t.Fatal(err)
	}
	if spare {
		if pid, _, err := readPid(filepath.Join(spec.CallDir, fileLauncher)); err != nil || pid != sparePid {
			t.Fatalf("the attacker did not run in the spare (launcher %d, the spare's %d): %v", pid, sparePid, err)
		}
	}
	if r.Outcome != OutcomeExited || r.ExitCode != 0 {
		t.Fatalf("attacker ended %s/%d: %s: %s", r.Outcome, r.ExitCode, r.Error, r.Stderr)
	}
	results := map[string]attackResult{}
	sc := bufio.NewScanner(bytes.NewReader(r.Stdout))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var ar attackResult
		if err := json.Unmarshal(sc.Bytes(), &ar); err != nil {
			t.Fatalf("attacker output line %q: %v", sc.Text(), err)
		}
		results[ar.Name] = ar
	}
	if layer != LayerNone {
		noSurvivors(t, a.marker, "leave-survivors")
	}
	return results, a.judge(t, results, r), r
}

// TestEscapeSuiteSeesEscapes is the suite's control: uncontained (layer
// none) the same attacker must be caught escaping, or the judge is blind.
func TestEscapeSuiteSeesEscapes(t *testing.T) {
	a := newArena(t, os.Getuid())
	_, escapes, _ := a.attack(t, LayerNone, "", false)
	for _, n := range []string{"read-own-history", "append-own-history", "rewrite-own-job-json", "write-own-request",
		"read-other-job", "read-signing-key", "write-other-workspace", "drop-manifest", "forge-call-result",
		"write-host-tmp", "write-daemon-home", "symlink-read-out", "symlink-write-out", "connect-daemon-listen-port",
		"send-udp-to-host", "connect-host-unix-socket", "see-host-processes", "signal-daemon", "fill-disk-one-file", "allocate-memory"} {
		if _, ok := escapes[n]; !ok {
			t.Errorf("uncontained, %s was not seen escaping", n)
		}
	}
	t.Logf("uncontained: %d escapes seen", len(escapes))
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// judge decides, attack by attack, whether the attacker got anywhere:
// from what it read (a secret marker in its output) and from the host's
// side (files changed, connections accepted, signals received).
func (a *arena) judge(t *testing.T, res map[string]attackResult, r *Result) map[string]string {
	esc := map[string]string{}
	flag := func(name, why string) {
		if _, ok := res[name]; !ok {
			esc[name] = "did not run"
			return
		}
		if esc[name] == "" {
			esc[name] = why
		}
	}
	for name, ar := range res {
		for f, m := range a.secrets {
			if strings.Contains(ar.Data, m) {
				flag(name, "read "+f)
			}
		}
	}
	for f, orig := range a.originals {
		if b, err := os.ReadFile(f); err != nil || !bytes.Equal(b, orig) {
			why := fmt.Sprintf("%s changed", f)
			switch {
			case strings.HasSuffix(f, "history.jsonl") && strings.Contains(f, "job-a"):
				flag("append-own-history", why)
			case strings.HasSuffix(f, "job.json") && strings.Contains(f, "job-a"):
				flag("rewrite-own-job-json", why)
				flag("symlink-write-out", why)
			case strings.Contains(f, "requests"):
				flag("write-own-request", why)
			default:
				flag("write-other-workspace", why)
			}
		}
	}
	exists := func(name, p string) {
		if _, err := os.Lstat(p); err == nil {
			flag(name, p+" exists")
			_ = os.RemoveAll(p) // flagged already; removed for the next attack
		}
	}
	exists("write-other-workspace", filepath.Join(a.other, "workspace", "pwned"))
	exists("drop-manifest", filepath.Join(a.jobs, "evil-job"))
	exists("write-host-tmp", filepath.Join(os.TempDir(), "logist-escape-"+a.marker))
	exists("write-daemon-home", filepath.Join(a.daemonHome, "pwned"))
	exists("write-daemon-home", filepath.Join(os.Getenv("HOME"), "logist-escape-"+a.marker))
	exists("write-system", "/etc/logist-escape-"+a.marker)
	exists("write-system", "/usr/logist-escape-"+a.marker)
	if ents, err := os.ReadDir(a.call); err == nil {
		for _, e := range ents {
			switch e.Name() {
			case fileLauncher, fileSandbox, fileStdout, fileStderr, fileResult, fileLog:
			default:
				flag("forge-call-result", "the call directory holds "+e.Name())
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(a.call, fileResult)); bytes.Contains(b, []byte(a.marker)) {
		flag("forge-call-result", "result.json holds the attacker's marker")
	}
	if bytes.Contains(r.Stdout, []byte(a.marker+"{")) || bytes.HasSuffix(bytes.TrimSpace(r.Stdout), []byte(a.marker)) {
		flag("forge-call-result", "the stdout file holds the attacker's write")
	}
	if shadow, err := os.ReadFile("/etc/shadow"); err == nil && len(shadow) > 0 {
		first := strings.SplitN(string(shadow), "\n", 2)[0]
		if strings.Contains(res["read-etc-shadow"].Data, first) {
			flag("read-etc-shadow", "read /etc/shadow")
		}
	}
	if strings.Contains(res["see-host-processes"].Data, a.daemonMark) {
		flag("see-host-processes", "saw the daemon's command line")
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := os.Stat(a.signaled); err == nil {
		flag("signal-daemon", "the daemon got SIGUSR1")
	}
	if fi, err := os.Stat(filepath.Join(a.ws, "big")); err == nil && fi.Size() > int64(a.limits.FileBytes) {
		flag("fill-disk-one-file", fmt.Sprintf("wrote a %d-byte file, limit %d", fi.Size(), a.limits.FileBytes))
	}
	if a.tcpHits.Load() > 0 {
		flag("connect-daemon-listen-port", fmt.Sprintf("the host's listener accepted %d connections", a.tcpHits.Load()))
	}
	if a.unixHits.Load() > 0 {
		flag("connect-host-unix-socket", fmt.Sprintf("the host's unix socket accepted %d connections", a.unixHits.Load()))
	}
	if a.udpHits.Load() > 0 {
		flag("send-udp-to-host", fmt.Sprintf("the host's UDP socket got %d datagrams", a.udpHits.Load()))
	}
	// What only the attacker can tell: a forbidden operation worked.
	for _, n := range []string{"fork-bomb", "allocate-memory", "fill-tmp", "capabilities", "signal-daemon",
		"connect-daemon-listen-port", "connect-daemon-listen-port-mptcp", "fill-disk-one-file", "egress-unlisted"} {
		if ar, ok := res[n]; ok && ar.OK {
			flag(n, ar.Detail)
		}
	}
	return esc
}

// TestKilledCallLeavesNoSurvivors: a call killed mid-run (a halt, a
// deadline) takes everything it started with it, setsid'd and
// double-forked processes included, under each layer and from either
// helper binary.
func TestKilledCallLeavesNoSurvivors(t *testing.T) {
	for _, layer := range append(layers(t), LayerNone) {
		for _, b := range binaries(t) {
			t.Run(string(layer)+b.name, func(t *testing.T) { killedCall(t, layer, b.self) })
		}
	}
}

func killedCall(t *testing.T, layer Layer, bin string) {
	a := newArena(t, os.Getuid())
	c, err := a.executor(t, bin).Start(a.spec(layer, "sleeper"))
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(a.call, fileStdout), "sleeping", 60*time.Second)
	if n := len(survivors(a.marker)); n < 3 {
		t.Fatalf("the sleeper runs %d processes, want at least 3", n)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	r, err := c.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != OutcomeKilled {
		t.Errorf("outcome %s, want killed", r.Outcome)
	}
	noSurvivors(t, a.marker, "killed call")
}
