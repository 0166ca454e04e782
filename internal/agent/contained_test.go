package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
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
	st := sandbox.Probe()
	cont := &Containment{Exec: &sandbox.Local{}, Status: st}
	ex, err := cont.For(&manifest.Manifest{})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	jobDir := t.TempDir()
	ws := filepath.Join(jobDir, "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
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
	st := sandbox.Probe()
	cont := &Containment{Exec: &sandbox.Local{}, Status: st}
	ex, err := cont.For(&manifest.Manifest{Sandbox: string(sandbox.LayerBwrap)})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	jobDir := t.TempDir()
	ws := filepath.Join(jobDir, "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
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
	cont := &Containment{Exec: &sandbox.Local{Status: st}, Status: st, Network: proxy, ProxyPort: 4242}
	for _, c := range []struct {
		name   string
		m      manifest.Manifest
		want   sandbox.Network
		errMsg string
	}{
		{"default: the proxy", manifest.Manifest{}, proxy, ""},
		{"host", manifest.Manifest{SandboxNetwork: "host"}, sandbox.Network{Mode: sandbox.NetHost}, ""},
		{"allowlist", manifest.Manifest{SandboxNetwork: "host", SandboxNetworkAllow: []string{"api.github.com", "pypi.org:443", "10.0.0.5:8080"}},
			sandbox.Network{Mode: sandbox.NetHost, Ports: []int{443, 4242, 8080}}, ""},
		{"allowlist without host", manifest.Manifest{SandboxNetworkAllow: []string{"api.github.com"}}, sandbox.Network{}, "needs"},
		{"bad port", manifest.Manifest{SandboxNetwork: "host", SandboxNetworkAllow: []string{"x:0"}}, sandbox.Network{}, "port"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex, err := cont.For(&c.m)
			if c.errMsg != "" {
				if ae, ok := AsError(err); !ok || ae.Code != codes.AgentConfig || !strings.Contains(ae.Msg, c.errMsg) {
					t.Fatalf("For = %v, %v; want AGENT_CONFIG naming %q", ex, err, c.errMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ex.(*Contained).Network; !reflect.DeepEqual(got, c.want) {
				t.Errorf("network %+v, want %+v", got, c.want)
			}
		})
	}
}
