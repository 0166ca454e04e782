package agent

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/egress"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/sandbox"
)

func TestMain(m *testing.M) {
	// This binary is the sandbox's launcher and helper in these tests.
	sandbox.Helper()
	os.Exit(m.Run())
}

// The one rule for a job's layer: its setting, else the default; "none"
// only when asked; a layer the host lacks is an error naming what is
// missing, never a weaker layer.
func TestContainmentFailsClosed(t *testing.T) {
	nothing := &sandbox.Status{Bwrap: sandbox.Check{Why: "bwrap not installed"}, Landlock: sandbox.Check{Why: "landlock not supported by kernel"}}
	onlyLandlock := &sandbox.Status{Bwrap: sandbox.Check{Why: "user namespaces disabled"}, Landlock: sandbox.Check{OK: true}, LandlockABI: 6}
	for _, c := range []struct {
		name    string
		st      *sandbox.Status
		def     sandbox.Layer
		setting string
		layer   string // "" = an error
		why     string
	}{
		{"nothing works", nothing, "", "", "", "bwrap not installed"},
		{"nothing works, opt-out", nothing, "", "none", LayerNone, ""},
		{"daemon opt-out", nothing, sandbox.LayerNone, "", LayerNone, ""},
		{"job asks more than the daemon", nothing, sandbox.LayerNone, "auto", "", "landlock not supported"},
		{"auto falls to landlock", onlyLandlock, "", "", "landlock", ""},
		{"bwrap asked, not there", onlyLandlock, "", "bwrap", "", "user namespaces disabled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cont := &Containment{Exec: &sandbox.Local{Status: c.st}, Status: c.st, Default: c.def}
			ex, err := cont.For(&manifest.Manifest{Sandbox: c.setting})
			if c.layer == "" {
				ae, ok := AsError(err)
				if !ok || ae.Code != codes.SandboxUnavailable || !strings.Contains(ae.Msg, c.why) {
					t.Fatalf("For(%q) = %v, %v; want SANDBOX_UNAVAILABLE naming %q", c.setting, ex, err, c.why)
				}
				return
			}
			if err != nil || ex.Layer() != c.layer {
				t.Fatalf("For(%q) = %v, %v; want layer %s", c.setting, ex, err, c.layer)
			}
		})
	}
}

// A contained command agent whose call a previous daemon started and that
// finished is adopted: the same answer, the program not run again; once
// the call is forgotten, the next run of that number runs the program.
func TestContainedCallIsAdoptedNotAskedAgain(t *testing.T) {
	_, ex, jobDir, ws := containedJob(t, &manifest.Manifest{})
	script := filepath.Join(jobDir, "agent.sh")
	body := "echo run >> runs.txt\necho '{\"action\":\"COMPLETED\",\"evidence_files\":[],\"summary_for_supervisor\":\"n'$(wc -l < runs.txt)'\"}'\n"
	if err := os.WriteFile(script, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Command{Cfg: manifest.Command{Argv: []string{"sh", "../agent.sh"}}, Getenv: pathOnly}
	req := &Request{JobID: "j", Phase: "work", Role: "worker", Workspace: ws, JobDir: jobDir, Interaction: 3}
	ctx := WithExecutor(context.Background(), ex)
	first, err := c.Call(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// The daemon died before recording it: the next daemon asks again.
	again, err := c.Call(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Raw) != string(first.Raw) || !strings.Contains(string(first.Raw), `"n1"`) {
		t.Errorf("adopted answer %q, first %q", again.Raw, first.Raw)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "runs.txt")); string(b) != "run\n" {
		t.Errorf("the program ran %q, want once", b)
	}
	if err := ForgetCall(jobDir, 3); err != nil {
		t.Fatal(err)
	}
	third, err := c.Call(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(third.Raw), `"n2"`) {
		t.Errorf("after ForgetCall the call ran %q, want a second run", third.Raw)
	}
	// Nothing of the job's folder but what the call was given is visible.
	c2 := &Command{Cfg: manifest.Command{Argv: []string{"sh", "-c", "cat ../job.json"}}, Getenv: pathOnly}
	if err := os.WriteFile(filepath.Join(jobDir, "job.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = c2.Call(ctx, &Request{JobID: "j", Workspace: ws, JobDir: jobDir, Interaction: 4})
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != codes.AgentExit {
		t.Errorf("reading ../job.json: %v, want the program to fail (AGENT_EXIT)", err)
	}
}

func pathOnly(k string) string {
	if k == "PATH" {
		return "/usr/local/bin:/usr/bin:/bin"
	}
	return ""
}

// A contained agent cannot write the workspace files its request names
// read-only (a parliament's governed files): bwrap mounts them read-only
// over the writable workspace. It still reads them and writes the rest.
func TestContainedAgentCannotWriteReadOnlyFiles(t *testing.T) {
	_, ex, jobDir, ws := containedJob(t, &manifest.Manifest{Sandbox: string(sandbox.LayerBwrap)})
	const readme = "# The official text\n"
	if err := os.WriteFile(filepath.Join(ws, "README.md"), []byte(readme), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(jobDir, "agent.sh")
	body := `if echo TAMPERED >> README.md; then echo wrote > tried.txt; else echo refused > tried.txt; fi
mv README.md gone.md 2>/dev/null && echo moved >> tried.txt
head -1 README.md >> tried.txt
echo '{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"tried"}'
`
	if err := os.WriteFile(script, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Command{Cfg: manifest.Command{Argv: []string{"sh", "../agent.sh"}}, Getenv: pathOnly}
	req := &Request{JobID: "j", Phase: "session", Role: "rep_2", Workspace: ws, JobDir: jobDir, Interaction: 1,
		ReadOnly: []string{"README.md", "missing.md", "../job.json"}}
	if _, err := c.Call(WithExecutor(context.Background(), ex), req); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "README.md")); string(b) != readme {
		t.Errorf("README.md = %q, want it untouched", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "tried.txt")); string(b) != "refused\n# The official text\n" {
		t.Errorf("the agent saw %q, want its write refused, no move, the file readable", b)
	}
	if got := Protected(req); len(got) != 1 || got[0] != filepath.Join(ws, "README.md") {
		t.Errorf("Protected = %v, want only the existing workspace file", got)
	}
}

// A job's network: the daemon's (the metering proxy) unless it opts into
// the host's; an allowlist narrows that to its ports and the proxy's, and
// needs the opt-in.
func TestContainmentNetwork(t *testing.T) {
	st := &sandbox.Status{Bwrap: sandbox.Check{OK: true}, Landlock: sandbox.Check{OK: true}, LandlockABI: 7}
	proxy := sandbox.Network{Mode: sandbox.NetProxy, Socket: "/run/meter.sock"}
	cont := &Containment{Exec: &sandbox.Local{Status: st}, Status: st, Network: proxy, ProxyPort: 4242, Egress: egress.Agents{}}
	allow := []egress.Entry{{Host: "api.github.com", Port: 443}, {Host: "pypi.org", Port: 443}, {IP: netip.MustParseAddr("10.0.0.5"), Port: 8080}}
	for _, c := range []struct {
		name   string
		m      manifest.Manifest
		want   sandbox.Network
		allow  []egress.Entry
		code   string
		errMsg string
	}{
		{"default: the proxy", manifest.Manifest{}, proxy, nil, "", ""},
		{"host", manifest.Manifest{SandboxNetwork: "host"}, sandbox.Network{Mode: sandbox.NetHost}, nil, "", ""},
		// An allowlist is the proxy's network plus the egress proxy, with
		// or without host (which it narrows).
		{"allowlist", manifest.Manifest{SandboxNetworkAllow: []string{"api.github.com", "pypi.org:443", "10.0.0.5:8080"}}, proxy, allow, "", ""},
		{"allowlist with host", manifest.Manifest{SandboxNetwork: "host", SandboxNetworkAllow: []string{"api.github.com", "pypi.org:443", "10.0.0.5:8080"}}, proxy, allow, "", ""},
		{"bad port", manifest.Manifest{SandboxNetworkAllow: []string{"x:0"}}, sandbox.Network{}, nil, codes.AgentConfig, "port"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex, err := cont.For(&c.m)
			if c.errMsg != "" {
				if ae, ok := AsError(err); !ok || ae.Code != c.code || !strings.Contains(ae.Msg, c.errMsg) {
					t.Fatalf("For = %v, %v; want %s naming %q", ex, err, c.code, c.errMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ex.(*Contained)
			if !reflect.DeepEqual(got.Network, c.want) || !reflect.DeepEqual(got.Allow, c.allow) {
				t.Errorf("network %+v allow %v, want %+v %v", got.Network, got.Allow, c.want, c.allow)
			}
		})
	}
	// A daemon without an egress proxy does not run a job with an
	// allowlist (fail closed).
	cont.Egress = nil
	if _, err := cont.For(&manifest.Manifest{SandboxNetworkAllow: []string{"pypi.org"}}); err == nil {
		t.Error("an allowlist ran without the egress proxy")
	} else if ae, ok := AsError(err); !ok || ae.Code != codes.SandboxUnavailable {
		t.Errorf("without egress: %v", err)
	}
}

// TestContainedEgressAllowlist: a contained call of a job with a network
// allowlist reaches a listed destination through the egress proxy (its
// only network beside the metering proxy, bound in the same way), and is
// refused an unlisted port, a listed name that resolves to loopback
// unless its address is listed too, and the daemon's own listener even
// when listed; it cannot go around the proxy.
func TestContainedEgressAllowlist(t *testing.T) {
	curl := "/usr/bin/curl"
	if _, err := os.Stat(curl); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is needed: " + err.Error())
		}
		t.Skip("curl not installed")
	}
	st := sandbox.Probe()
	serve := func(body string) (*httptest.Server, int) {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }))
		t.Cleanup(s.Close)
		return s, s.Listener.Addr().(*net.TCPAddr).Port
	}
	_, port := serve("listed")
	_, daemonPort := serve("the daemon")
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	eg := egress.New(egress.Config{Deny: []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(daemonPort))}})
	srv := &http.Server{Handler: eg}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	for _, layer := range []sandbox.Layer{sandbox.LayerBwrap, sandbox.LayerLandlock} {
		if _, err := st.Resolve(layer); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal(err)
			}
			t.Logf("SKIP (loud): %s: %v", layer, err)
			continue
		}
		var refused egress.Refused // the last fetch's, as the call's log has it
		fetch := func(allow []string, url string) string {
			t.Helper()
			es, err := egress.ParseAllow(allow)
			if err != nil {
				t.Fatal(err)
			}
			c := &Contained{Exec: &sandbox.Local{}, Mode: layer, Name: string(layer), Job: "j", Allow: es, Egress: egress.Agents{P: eg},
				Network: sandbox.Network{Mode: sandbox.NetProxy, Socket: sock}}
			ws := t.TempDir()
			ctx, log := WithEgressLog(WithExecutor(context.Background(), c))
			r, err := c.Run(ctx, ProcSpec{Argv: []string{curl, "-s", "-m", "20", "-w", " %{http_code}", url}, Dir: ws,
				Env: []string{"PATH=/usr/bin:/bin"}})
			if err != nil {
				t.Fatal(err)
			}
			refused = log.Refused()
			return strings.TrimSpace(string(r.Stdout))
		}
		p, dp := strconv.Itoa(port), strconv.Itoa(daemonPort)
		if got := fetch([]string{"localhost:" + p, "127.0.0.1:" + p}, "http://localhost:"+p+"/"); got != "listed 200" || refused.Total != 0 {
			t.Errorf("%s: a listed destination: %q, refused %+v", layer, got, refused)
		}
		if got := fetch([]string{"localhost:" + p}, "http://localhost:"+p+"/"); !strings.HasSuffix(got, " 403") || !strings.Contains(got, codes.EgressRefused) {
			t.Errorf("%s: a listed name resolving to loopback, its address unlisted: %q", layer, got)
		}
		// The run's refusals reach the call's log when the run ends.
		if refused.Total != 1 || len(refused.Kept) != 1 || refused.Kept[0].Host != "localhost" || refused.Kept[0].Port != port ||
			!strings.Contains(refused.Kept[0].Reason, "private network") {
			t.Errorf("%s: the call's log has %+v", layer, refused)
		}
		if got := fetch([]string{"localhost:" + p, "127.0.0.1:" + p}, "http://localhost:"+dp+"/"); !strings.HasSuffix(got, " 403") {
			t.Errorf("%s: an unlisted port: %q", layer, got)
		}
		if got := fetch([]string{"localhost:" + dp, "127.0.0.1:" + dp}, "http://localhost:"+dp+"/"); !strings.HasSuffix(got, " 403") || strings.HasPrefix(got, "the daemon") {
			t.Errorf("%s: the daemon's listener: %q", layer, got)
		}
		// Around the proxy (curl --noproxy): the sandbox has no route.
		es, _ := egress.ParseAllow([]string{"127.0.0.1:" + p})
		c := &Contained{Exec: &sandbox.Local{}, Mode: layer, Name: string(layer), Job: "j", Allow: es, Egress: egress.Agents{P: eg},
			Network: sandbox.Network{Mode: sandbox.NetProxy, Socket: sock}}
		r, err := c.Run(context.Background(), ProcSpec{Argv: []string{curl, "-s", "-m", "20", "--noproxy", "*", "-w", " %{http_code}", "http://127.0.0.1:" + p + "/"},
			Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(r.Stdout), "listed") {
			t.Errorf("%s: reached the destination around the proxy: %q", layer, r.Stdout)
		}
	}
}

// A contained command agent's next call runs in the spare sandbox started
// for it while the call before ran (the agent the engine expects next, the
// next interaction's request file and answer folder), reading its request and writing its
// answer through it; the job's end kills the spare made for a call that
// never came and removes what was made for it.
func TestContainedCommandUsesItsSpare(t *testing.T) {
	cont, ex, jobDir, ws := containedJob(t, &manifest.Manifest{JobID: "spare-job", Sandbox: string(sandbox.LayerBwrap)})
	script := filepath.Join(jobDir, "agent.sh")
	body := `grep -q spare-job "$LOGIST_REQUEST_FILE" || exit 3
echo '{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"call '$LOGIST_INTERACTION'"}' > "$LOGIST_ANSWER_FILE"
`
	if err := os.WriteFile(script, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Command{Cfg: manifest.Command{Argv: []string{"sh", "../agent.sh"}, Answer: "file"}, Getenv: pathOnly}
	ctx := WithExecutor(context.Background(), ex)
	call := func(n int) {
		t.Helper()
		req := &Request{JobID: "spare-job", Phase: "work", Role: "worker", Workspace: ws, JobDir: jobDir, Interaction: n,
			Next: &NextCall{Provider: c, Phase: "work", Role: "worker"}}
		res, err := c.Call(ctx, req)
		if err != nil || !strings.Contains(string(res.Raw), "call "+strconv.Itoa(n)) {
			t.Fatalf("call %d: %v %v", n, res, err)
		}
	}
	call(1)
	spare := spareLauncher(t, answerDir(jobDir, 2))
	if spare == 0 {
		t.Fatal("no spare sandbox for call 2 after call 1")
	}
	call(2)
	b, err := os.ReadFile(filepath.Join(CallDir(jobDir, 2), "launcher.pid"))
	if err != nil || !strings.HasPrefix(string(b), strconv.Itoa(spare)+" ") {
		t.Errorf("call 2 ran under launcher %q, not its spare's %d (%v)", b, spare, err)
	}
	if spareLauncher(t, answerDir(jobDir, 3)) == 0 {
		t.Fatal("no spare sandbox for call 3 after call 2")
	}
	cont.EndJob("spare-job")
	for i := 0; spareLauncherNow(answerDir(jobDir, 3)) != 0; i++ {
		if i == 1000 { // 10 s
			t.Fatal("the spare for call 3 outlived its job's end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, p := range []string{RequestFile(jobDir, 3), answerDir(jobDir, 3)} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s, made for a call that never came, is left after the job's end", p)
		}
	}
	for _, p := range []string{RequestFile(jobDir, 2), answerDir(jobDir, 2)} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s, call 2's, is gone: %v", p, err)
		}
	}
}

// A job's roles that run different programs: the worker's call starts
// the sandbox of the supervisor's program, the call the engine expects
// next, and the supervisor's call is served by it; the supervisor's call,
// the job's last (nothing expected after it), starts no spare and makes
// nothing on disk for a call that will not come.
func TestSpareForTheNextRolesProgram(t *testing.T) {
	cont, ex, jobDir, ws := containedJob(t, &manifest.Manifest{JobID: "roles", Sandbox: string(sandbox.LayerBwrap)})
	local := cont.Exec.(*sandbox.Local)
	for _, role := range []string{"worker", "supervisor"} {
		body := `echo '{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"` + role + `"}' > "$LOGIST_ANSWER_FILE"` + "\n"
		if err := os.WriteFile(filepath.Join(jobDir, role+".sh"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Each program is bound into its own calls' sandboxes, and only there.
	worker := &Command{Cfg: manifest.Command{Argv: []string{"sh", "../worker.sh"}, Answer: "file"}, Getenv: pathOnly}
	supervisor := &Command{Cfg: manifest.Command{Argv: []string{"sh", "../supervisor.sh"}, Answer: "file"}, Getenv: pathOnly}
	ctx := WithExecutor(context.Background(), ex)
	req := &Request{JobID: "roles", Phase: "work", Role: "worker", Workspace: ws, JobDir: jobDir, Interaction: 1,
		Next: &NextCall{Provider: supervisor, Phase: "review", Role: "supervisor"}}
	if res, err := worker.Call(ctx, req); err != nil || !strings.Contains(string(res.Raw), "worker") {
		t.Fatalf("worker's call: %v %v", res, err)
	}
	if spareLauncher(t, answerDir(jobDir, 2)) == 0 {
		t.Fatal("no spare sandbox for the supervisor's call after the worker's")
	}
	req = &Request{JobID: "roles", Phase: "review", Role: "supervisor", Workspace: ws, JobDir: jobDir, Interaction: 2}
	if res, err := supervisor.Call(ctx, req); err != nil || !strings.Contains(string(res.Raw), "supervisor") {
		t.Fatalf("supervisor's call: %v %v", res, err)
	}
	if got := local.SpareCounts(); got != (sandbox.SpareCounts{Started: 1, Served: 1}) {
		t.Errorf("spares %+v after the supervisor's call, want 1 started and served, none discarded", got)
	}
	for _, p := range []string{RequestFile(jobDir, 3), answerDir(jobDir, 3)} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s made after the job's last call", p)
		}
	}
	cont.EndJob("roles")
	if got := local.SpareCounts(); got != (sandbox.SpareCounts{Started: 1, Served: 1}) {
		t.Errorf("spares %+v at the job's end, want the one served only (no spare for a call after the last)", got)
	}
}

// spareLauncher is the launcher of the running bwrap sandbox that binds
// dir (0: none), waiting up to 10 s for it to start (a loaded machine
// starts a sandbox late); spareLauncherNow looks once.
func spareLauncher(t *testing.T, dir string) int {
	t.Helper()
	return findSpareLauncher(dir, 10*time.Second)
}

func spareLauncherNow(dir string) int { return findSpareLauncher(dir, 0) }

func findSpareLauncher(dir string, wait time.Duration) int {
	for deadline := time.Now().Add(wait); ; {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || !strings.Contains(string(b), "\x00"+dir+"\x00") || !strings.HasSuffix(strings.Split(string(b), "\x00")[0], "bwrap") {
				continue
			}
			st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
			for _, l := range strings.Split(string(st), "\n") {
				if v, ok := strings.CutPrefix(l, "PPid:"); ok {
					pid, _ := strconv.Atoi(strings.TrimSpace(v))
					return pid
				}
			}
		}
		if time.Now().After(deadline) {
			return 0
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An uncontained command agent (sandbox none) predicts nothing: no spare
// sandbox, no file made for a next call.
func TestUncontainedCommandMakesNoSpare(t *testing.T) {
	jobDir := t.TempDir()
	ws := filepath.Join(jobDir, "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	c := &Command{Cfg: manifest.Command{Argv: []string{"sh", "-c", `echo '{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}'`}}, Getenv: pathOnly}
	req := &Request{JobID: "j", Phase: "work", Role: "worker", Workspace: ws, JobDir: jobDir, Interaction: 1}
	if _, err := c.Call(WithExecutor(context.Background(), Direct{}), req); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{RequestFile(jobDir, 2), answerDir(jobDir, 2)} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s made for an uncontained job's next call", p)
		}
	}
}

// What a daemon that died left for its spares' predicted calls (an empty
// request file, an empty answer folder) is removed when the job's run
// starts again; a call's own files, and those of a call that runs on
// from that daemon (its call folder holds it), stay.
func TestClearPredicted(t *testing.T) {
	jobDir := t.TempDir()
	reqs := filepath.Join(jobDir, "requests")
	if err := os.MkdirAll(reqs, 0o700); err != nil {
		t.Fatal(err)
	}
	put := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(reqs, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mkdir := func(p string) {
		t.Helper()
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	put("000004.json", `{"job_id":"j"}`) // a call's request
	mkdir(answerDir(jobDir, 4))
	put(filepath.Join("000004.answer", "answer.json"), "{}") // and its answer
	put("000005.json", "")                                   // predicted, never started
	mkdir(answerDir(jobDir, 5))
	put("000006.json", "") // predicted, started: it runs on from the dead daemon
	mkdir(answerDir(jobDir, 6))
	mkdir(CallDir(jobDir, 6))
	put(filepath.Join("000006.call", "launcher.pid"), "1234 5678\n")
	if err := os.Symlink("/etc/passwd", filepath.Join(reqs, "000007.json")); err != nil {
		t.Fatal(err)
	}
	if err := ClearPredicted(jobDir); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		kept bool
	}{
		{RequestFile(jobDir, 4), true}, {answerDir(jobDir, 4), true},
		{RequestFile(jobDir, 5), false}, {answerDir(jobDir, 5), false},
		{RequestFile(jobDir, 6), true}, {answerDir(jobDir, 6), true},
		{RequestFile(jobDir, 7), true},
	} {
		if _, err := os.Lstat(c.path); (err == nil) != c.kept {
			t.Errorf("%s: kept = %v, want %v", c.path, err == nil, c.kept)
		}
	}
}

// containedJob is a containment on this host (the test fails under CI and
// is skipped elsewhere when it has none), its executor for m, and a job
// folder with its workspace.
func containedJob(t *testing.T, m *manifest.Manifest) (cont *Containment, ex Executor, jobDir, ws string) {
	t.Helper()
	cont = &Containment{Exec: &sandbox.Local{}, Status: sandbox.Probe()}
	ex, jobDir, ws = jobUnder(t, cont, m)
	return cont, ex, jobDir, ws
}

// jobUnder is cont's executor for m and a job folder with its workspace.
func jobUnder(t *testing.T, cont *Containment, m *manifest.Manifest) (ex Executor, jobDir, ws string) {
	t.Helper()
	ex, err := cont.For(m)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	jobDir = t.TempDir()
	ws = filepath.Join(jobDir, "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	return ex, jobDir, ws
}

// A contained agent's answer file must be its own: a link from its answer
// folder to a file of the host's is refused, and nothing of that file is
// read into the call's record.
func TestContainedAnswerFileLinkedOutIsRefused(t *testing.T) {
	_, ex, jobDir, ws := containedJob(t, &manifest.Manifest{Sandbox: string(sandbox.LayerBwrap)})
	secret := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(secret, []byte(`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"host secret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Command{Cfg: manifest.Command{Argv: []string{"sh", "-c", `ln -sf "$2" "$1"`, "sh", "{answer_file}", secret}, Answer: "file"}, Getenv: pathOnly}
	req := &Request{JobID: "j", Phase: "p", Role: "worker", Workspace: ws, JobDir: jobDir, Interaction: 1}
	res, err := c.Call(WithExecutor(context.Background(), ex), req)
	if err != nil || len(res.Raw) != 0 || !strings.Contains(res.NoAnswer, "no answer file Logist may read") || !strings.Contains(res.NoAnswer, "outside") {
		t.Fatalf("res %+v, err = %v; want the linked answer refused: no answer, and why", res, err)
	}
	if strings.Contains(string(res.Stdout), "host secret") || strings.Contains(res.NoAnswer, "host secret") {
		t.Error("the host's file was read into the call")
	}
}
